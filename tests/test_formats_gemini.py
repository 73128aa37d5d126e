"""Gemini codec: tool-call ids that round-trip without Gemini carrying them, thought
signatures, schema cleaning, usage and the ?alt=sse stream."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.core.model import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    StreamAccumulator,
    StreamEnd,
    StreamEvent,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolSpec,
    Usage,
)
from tiergate.formats import gemini as fmt
from tiergate.formats import openai as openai_fmt
from tiergate.formats.errors import FormatError, UpstreamStreamError
from tiergate.formats.sse import SSEDecoder, encode_sse


def request(messages: list[Message], **over: Any) -> ChatRequest:
    req = ChatRequest(model="m", messages=messages, system=[TextPart("sys")])
    for k, v in over.items():
        setattr(req, k, v)
    return req


def test_contents_roles_and_tool_results_by_name() -> None:
    req = request(
        [
            Message("user", [TextPart("hi"), ImagePart(data="QQ==", media_type="image/png")]),
            Message(
                "assistant",
                [TextPart("calling")],
                tool_calls=[ToolCall("c1", "read", '{"p":1}'), ToolCall("c2", "ls", "")],
            ),
            Message("tool", [TextPart("ok")], tool_call_id="c1"),
            Message("tool", [TextPart("boom")], tool_call_id="c2", is_error=True),
            Message("user", [TextPart("go on"), ImagePart(url="https://x/cat.png")]),
        ]
    )
    out = fmt.render_request(req, "gemini-2.5-pro")
    assert out["systemInstruction"] == {"parts": [{"text": "sys"}]}
    user, model, results = out["contents"]
    assert user == {
        "role": "user",
        "parts": [{"text": "hi"}, {"inlineData": {"mimeType": "image/png", "data": "QQ=="}}],
    }
    assert model["role"] == "model"
    assert model["parts"] == [
        {"text": "calling"},
        {
            "functionCall": {"name": "read", "args": {"p": 1}},
            "thoughtSignature": fmt.SKIP_SIGNATURE,  # no signature known: the documented bypass
        },
        {"functionCall": {"name": "ls", "args": {}}},
    ]
    # Both results in one turn, then the user's text merged into it (turns alternate).
    assert results == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "read", "response": {"output": "ok"}}},
            {"functionResponse": {"name": "ls", "response": {"error": "boom"}}},
            {"text": "go on"},
            {"fileData": {"mimeType": "image/png", "fileUri": "https://x/cat.png"}},
        ],
    }


def test_unknown_tool_call_id_is_a_client_error() -> None:
    with pytest.raises(FormatError):
        fmt.render_request(request([Message("tool", [TextPart("x")], tool_call_id="nope")]), "g")


def test_only_gemini_signatures_are_replayed() -> None:
    def model_parts(signature: str) -> list[dict[str, Any]]:
        msg = Message(
            "assistant",
            [ThinkingPart("", signature=signature)],
            tool_calls=[ToolCall("c", "f", "{}")],
        )
        out = fmt.render_request(request([Message("user", [TextPart("q")]), msg]), "g")
        return out["contents"][1]["parts"]

    assert model_parts("gemini:REAL")[0]["thoughtSignature"] == "REAL"
    assert model_parts("EqAnthropicSig")[0]["thoughtSignature"] == fmt.SKIP_SIGNATURE


def test_schema_cleaning() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "path": {"type": ["string", "null"], "format": "uri", "description": "p"},
            "mode": {"const": "fast"},
            "when": {"type": "string", "format": "date-time"},
            "item": {"$ref": "#/$defs/Item"},
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 1},
            "tags": {"type": "array", "items": {"type": "string", "examples": ["a"]}},
        },
        "required": ["path", "ghost"],
        "$defs": {
            "Item": {"type": "object", "properties": {"k": {"type": "integer", "enum": [1, 2]}}}
        },
    }
    assert fmt.clean_schema(schema) == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "nullable": True, "description": "p"},
            "mode": {"enum": ["fast"]},
            "when": {"type": "string", "format": "date-time"},
            "item": {"type": "object", "properties": {"k": {"type": "integer"}}},
            "n": {"type": "integer", "nullable": True, "default": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["path"],
    }


def test_recursive_refs_terminate() -> None:
    node = {
        "$ref": "#/$defs/Node",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
    }
    assert fmt.clean_schema(node)["type"] == "object"


def test_tools_tool_choice_and_generation_config() -> None:
    req = request(
        [Message("user", [TextPart("q")])],
        tools=[
            ToolSpec("read", "Read", {"type": "object", "properties": {"p": {"type": "string"}}}),
            ToolSpec("now", "", {"type": "object", "properties": {}}),
        ],
        tool_choice={"type": "tool", "name": "read"},
        max_tokens=100,
        temperature=0.3,
        top_p=0.9,
        stop=list("abcdefg"),
        response_format={
            "type": "json_schema",
            "json_schema": {"schema": {"type": "object", "additionalProperties": True}},
        },
        thinking={"type": "enabled", "budget_tokens": 512},
    )
    out = fmt.render_request(req, "g")
    assert out["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "read",
                    "description": "Read",
                    "parameters": {"type": "object", "properties": {"p": {"type": "string"}}},
                },
                {"name": "now"},  # Gemini rejects an object schema with no properties
            ]
        }
    ]
    assert out["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["read"]}
    }
    assert out["generationConfig"] == {
        "maxOutputTokens": 100,
        "temperature": 0.3,
        "topP": 0.9,
        "stopSequences": ["a", "b", "c", "d", "e"],
        "responseMimeType": "application/json",
        "responseSchema": {"type": "object"},
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 512},
    }


def test_tool_history_without_tools_is_declared_but_not_callable() -> None:
    req = request(
        [
            Message("user", [TextPart("q")]),
            Message("assistant", [], tool_calls=[ToolCall("c", "f", "{}")]),
            Message("tool", [TextPart("r")], tool_call_id="c"),
        ]
    )
    out = fmt.render_request(req, "g")
    assert out["tools"] == [{"functionDeclarations": [{"name": "f"}]}]
    assert out["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}


# ---- responses ------------------------------------------------------------------

RESPONSE = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Plan: read.", "thought": True},
                    {"text": "Reading now."},
                    {
                        "functionCall": {"name": "read", "args": {"p": "a.py"}},
                        "thoughtSignature": "SIG",
                    },
                    {"functionCall": {"name": "ls", "args": {}}},
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 4000,
        "cachedContentTokenCount": 3000,
        "candidatesTokenCount": 60,
        "thoughtsTokenCount": 40,
        "totalTokenCount": 4100,
    },
    "modelVersion": "gemini-2.5-pro",
    "responseId": "resp-1",
}


def test_parse_response_usage_ids_and_signature() -> None:
    resp = fmt.parse_response(RESPONSE, "gemini-2.5-pro")
    assert resp.usage == Usage(input_tokens=4000, output_tokens=100, cache_read_tokens=3000)
    assert resp.finish_reason == "tool_calls"  # Gemini says STOP after function calls
    assert resp.content == [
        ThinkingPart("Plan: read.", signature="gemini:SIG"),
        TextPart("Reading now."),
    ]
    first, second = resp.tool_calls
    assert first.id == fmt.call_id("resp-1", 0, "read", '{"p":"a.py"}')
    assert first.id.startswith("call_0_") and second.id.startswith("call_1_")
    assert fmt.parse_response(RESPONSE, "g").tool_calls == resp.tool_calls  # deterministic


def test_ids_round_trip_through_an_openai_client() -> None:
    """Gemini answer -> OpenAI client -> next request -> Gemini: names and signature return."""
    resp = fmt.parse_response(RESPONSE, "g")
    client_view = openai_fmt.render_response(resp, "orcarouter/coding")["choices"][0]["message"]
    calls = client_view["tool_calls"]
    next_turn = openai_fmt.parse_request(
        {
            "model": "orcarouter/coding",
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": client_view["content"], "tool_calls": calls},
                {"role": "tool", "tool_call_id": calls[1]["id"], "content": "files"},
                {"role": "tool", "tool_call_id": calls[0]["id"], "content": "code"},
            ],
        }
    )
    out = fmt.render_request(next_turn, "g")
    names = [p["functionResponse"]["name"] for p in out["contents"][2]["parts"]]
    assert names == ["ls", "read"]
    # The OpenAI dialect cannot carry the signature, so the bypass token stands in.
    assert out["contents"][1]["parts"][1]["thoughtSignature"] == fmt.SKIP_SIGNATURE


def test_anthropic_client_carries_the_real_signature_back() -> None:
    resp = fmt.parse_response(RESPONSE, "g")
    history = Message("assistant", resp.content, tool_calls=resp.tool_calls)
    out = fmt.render_request(request([Message("user", [TextPart("q")]), history]), "g")
    assert out["contents"][1]["parts"][1]["thoughtSignature"] == "SIG"


def test_function_call_ids_from_gemini_are_kept() -> None:
    body = {
        "candidates": [
            {"content": {"parts": [{"functionCall": {"id": "fc-7", "name": "f", "args": {}}}]}}
        ]
    }
    assert fmt.parse_response(body, "g").tool_calls[0].id == "fc-7"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("OTHER", "stop"),
    ],
)
def test_finish_reasons(reason: str, expected: str) -> None:
    body = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]}
    assert fmt.parse_response(body, "g").finish_reason == expected


def test_blocked_prompt_is_a_content_filter() -> None:
    resp = fmt.parse_response({"promptFeedback": {"blockReason": "SAFETY"}}, "g")
    assert resp.finish_reason == "content_filter" and resp.content == []


def test_error_body_raises() -> None:
    with pytest.raises(UpstreamStreamError):
        fmt.parse_response(
            {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}, "g"
        )


# ---- stream ---------------------------------------------------------------------


def sse_chunk(
    parts: list[dict[str, Any]], finish: str | None = None, usage: dict[str, Any] | None = None
) -> bytes:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        cand["finishReason"] = finish
    body: dict[str, Any] = {
        "candidates": [cand],
        "modelVersion": "gemini-2.5-pro",
        "responseId": "resp-1",
    }
    if usage:
        body["usageMetadata"] = usage
    return encode_sse(orjson.dumps(body)).replace(b"\n", b"\r\n")  # Google frames with CRLF


RECORDED = b"".join(
    [
        sse_chunk([{"text": "Plan: ", "thought": True}], usage={"promptTokenCount": 4000}),
        sse_chunk([{"text": "read.", "thought": True}]),
        sse_chunk([{"text": "Reading now."}]),
        sse_chunk(
            [
                {
                    "functionCall": {"name": "read", "args": {"p": "a.py"}},
                    "thoughtSignature": "SIG",
                },
                {"functionCall": {"name": "ls", "args": {}}},
            ],
            "STOP",
            RESPONSE["usageMetadata"],  # type: ignore[arg-type]
        ),
    ]
)


def parse_stream(pieces: list[bytes]) -> list[StreamEvent]:
    dec, parser = SSEDecoder(), fmt.StreamParser("gemini-2.5-pro")
    events: list[StreamEvent] = []
    for piece in pieces:
        for msg in dec.feed(piece):
            events.extend(parser.feed(msg.data))
    events.extend(parser.finish())
    return events


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(RECORDED)), max_size=15))
def test_stream_matches_the_non_streamed_answer(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [RECORDED[a:b] for a, b in zip([0, *points], [*points, len(RECORDED)], strict=True)]
    acc = StreamAccumulator()
    for e in parse_stream(pieces):
        acc.add(e)
    assert acc.finished
    streamed = acc.result()
    whole = fmt.parse_response(RESPONSE, "gemini-2.5-pro")
    assert streamed.tool_calls == whole.tool_calls  # the same synthesised ids
    assert streamed.content == whole.content
    assert streamed.usage == whole.usage and streamed.finish_reason == "tool_calls"


def test_stream_without_finish_reason_does_not_finish() -> None:
    events = parse_stream([sse_chunk([{"text": "partial"}])])
    assert not any(isinstance(e, StreamEnd) for e in events)


def test_stream_error_chunk_raises() -> None:
    parser = fmt.StreamParser("g")
    with pytest.raises(UpstreamStreamError):
        parser.feed('{"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}')


def test_response_id_round_trip_keeps_model_name() -> None:
    resp: ChatResponse = fmt.parse_response({"candidates": []}, "gemini-x")
    assert resp.model == "gemini-x" and resp.finish_reason == "stop"
