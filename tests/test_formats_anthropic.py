"""Anthropic Messages codec: block-exact round trips, prompt-cache breakpoints, usage,
and streams checked against the official anthropic SDK."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import anthropic
import httpx2  # this anthropic SDK's HTTP client (a fork of httpx)
import orjson
import pytest
from anthropic.types import Message as SDKMessage
from anthropic.types import RawMessageStreamEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from tiergate.core.model import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    StreamAccumulator,
    StreamEnd,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
)
from tiergate.formats import anthropic as fmt
from tiergate.formats.errors import FormatError, UpstreamStreamError
from tiergate.formats.sse import SSEDecoder, encode_sse

CC = {"type": "ephemeral"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}}

# A Claude-Code-shaped request in canonical block form.
CANONICAL: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 8000,
    "system": [
        {"type": "text", "text": "You are Claude Code."},
        {"type": "text", "text": "Project rules", "cache_control": CC},
    ],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "fix the test"}, IMAGE]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "look first", "signature": "EqSig=="},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"path": "a.py"}},
                {"type": "tool_use", "id": "toolu_02", "name": "Bash", "input": {"cmd": "pytest"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "print(1)"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_02",
                    "content": [{"type": "text", "text": "1 failed"}, IMAGE],
                    "is_error": True,
                },
                {"type": "text", "text": "<reminder>", "cache_control": CC},
            ],
        },
    ],
    "tools": [
        {
            "name": "Read",
            "description": "Read a file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "cache_control": CC,
        }
    ],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    "metadata": {"user_id": "user_abc_session_123"},
    "stop_sequences": ["</done>"],
    "thinking": {"type": "enabled", "budget_tokens": 4000},
    "stream": True,
    "top_k": 5,
}


# ---- inbound request ------------------------------------------------------------


def test_parse_splits_tool_results_out_of_the_user_message_in_order() -> None:
    req = fmt.parse_request(copy.deepcopy(CANONICAL))
    assert [m.role for m in req.messages] == ["user", "assistant", "tool", "tool", "user"]
    first, second = req.messages[2], req.messages[3]
    assert first.tool_call_id == "toolu_01" and first.text() == "print(1)" and not first.is_error
    assert second.tool_call_id == "toolu_02" and second.is_error
    assert isinstance(second.content[1], ImagePart)
    assert req.messages[4].content == [TextPart("<reminder>", CC)]
    assistant = req.messages[1]
    assert assistant.content[:2] == [
        ThinkingPart("look first", signature="EqSig=="),
        ThinkingPart("opaque", redacted=True),
    ]
    assert assistant.tool_calls[0] == ToolCall("toolu_01", "Read", '{"path":"a.py"}')
    assert req.system[1].cache_control == CC
    assert req.tool_choice == "required" and req.parallel_tool_calls is False
    assert req.metadata == {"user_id": "user_abc_session_123"}
    assert req.stop == ["</done>"] and req.max_tokens == 8000
    assert req.extra == {"top_k": 5} and req.source_format == "anthropic"


def test_string_forms() -> None:
    req = fmt.parse_request(
        {
            "model": "m",
            "max_tokens": 5,
            "system": "sys",
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    assert req.system == [TextPart("sys")] and req.messages[0].content == [TextPart("hi")]


def bad(**over: Any) -> dict[str, Any]:
    b = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    b.update(over)
    return b


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "messages": []}, "max_tokens"),
        (bad(messages=[]), "messages"),
        (bad(messages=[{"role": "system", "content": "x"}]), "messages"),
        (bad(messages=[{"role": "developer", "content": "x"}]), "messages[0].role"),
        (
            bad(messages=[{"role": "user", "content": [{"text": "no type"}]}]),
            "messages[0].content[0].type",
        ),
        (
            bad(messages=[{"role": "user", "content": [{"type": "image", "source": {}}]}]),
            "messages[0].content[0].source.type",
        ),
        (
            bad(messages=[{"role": "user", "content": [{"type": "tool_result"}]}]),
            "messages[0].content[0].tool_use_id",
        ),
        (bad(system=[{"type": "image"}]), "system[0].type"),
        (bad(tools=[{"type": 5}]), "tools[0].type"),
        (bad(tools=[{"type": "bash_20250124"}]), "tools[0].name"),
        (bad(tools=[{"name": "t"}]), "tools[0].input_schema"),
        (bad(tool_choice={"type": "maybe"}), "tool_choice.type"),
        (bad(temperature=1.5), "temperature"),
    ],
)
def test_schema_errors_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(FormatError) as err:
        fmt.parse_request(body)
    assert err.value.param == param


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
_BLOCK = st.dictionaries(
    st.sampled_from(["type", "text", "id", "name", "input", "tool_use_id", "content", "source"]),
    _JSON | st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking", "base64"]),
)
_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": _JSON | st.lists(_BLOCK, max_size=3),
    }
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_MESSAGE, min_size=1, max_size=3),
    st.dictionaries(
        st.sampled_from(["system", "tools", "tool_choice", "thinking", "stop_sequences"]), _JSON
    ),
)
def test_garbage_is_a_format_error_never_a_crash(
    messages: list[Any], extra: dict[str, Any]
) -> None:
    with contextlib.suppress(FormatError):
        fmt.parse_request({"model": "m", "max_tokens": 9, "messages": messages, **extra})


# ---- upstream request -----------------------------------------------------------


def test_anthropic_request_round_trips_block_for_block() -> None:
    rendered = fmt.render_request(fmt.parse_request(copy.deepcopy(CANONICAL)), "claude-up")
    assert rendered == {**CANONICAL, "model": "claude-up"}


def openai_origin(**over: Any) -> ChatRequest:
    req = ChatRequest(
        model="m",
        system=[TextPart("sys")],
        messages=[
            Message("user", [TextPart("hi")]),
            Message("assistant", [ThinkingPart("r1")], tool_calls=[ToolCall("call:1", "f", "{")]),
            Message("tool", [TextPart("out")], tool_call_id="call:1"),
        ],
        tools=[ToolSpec("f", parameters={"type": "object"})],
        source_format="openai",
        extra={"seed": 3},
    )
    for k, v in over.items():
        setattr(req, k, v)
    return req


def test_openai_origin_gets_cache_breakpoints_and_sanitised_ids() -> None:
    out = fmt.render_request(openai_origin(), "claude")
    assert out["max_tokens"] == fmt.DEFAULT_MAX_TOKENS
    assert out["system"] == [{"type": "text", "text": "sys", "cache_control": CC}]
    assistant, results = out["messages"][1], out["messages"][2]
    # Unsigned thinking cannot be sent to Anthropic; unparsable arguments become {}.
    assert assistant["content"] == [{"type": "tool_use", "id": "call_1", "name": "f", "input": {}}]
    assert results["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "out", "cache_control": CC}
    ]
    assert "seed" not in out  # OpenAI extras are not Anthropic parameters


def test_no_automatic_breakpoints_when_the_client_placed_its_own() -> None:
    req = openai_origin()
    req.messages[0].content[0].cache_control = CC  # type: ignore[union-attr]
    out = fmt.render_request(req, "claude")
    assert "cache_control" not in out["system"][0]
    assert "cache_control" not in out["messages"][-1]["content"][-1]


def test_breakpoint_skips_thinking_blocks() -> None:
    req = openai_origin(
        messages=[
            Message("user", [TextPart("q")]),
            Message("assistant", [TextPart("a"), ThinkingPart("t", signature="s")]),
        ]
    )
    content = fmt.render_request(req, "claude")["messages"][-1]["content"]
    assert content == [
        {"type": "text", "text": "a", "cache_control": CC},
        {"type": "thinking", "thinking": "t", "signature": "s"},
    ]


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        ({"type": "tool", "name": "f"}, None, {"type": "tool", "name": "f"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (None, None, None),
    ],
)
def test_tool_choice_mapping(choice: Any, parallel: bool | None, expected: Any) -> None:
    out = fmt.render_request(openai_origin(tool_choice=choice, parallel_tool_calls=parallel), "c")
    assert out.get("tool_choice") == expected


def test_tool_history_without_tools_declares_uncallable_stubs() -> None:
    out = fmt.render_request(openai_origin(tools=[]), "claude")
    assert out["tools"] == [{"name": "f", "input_schema": {"type": "object"}}]
    assert out["tool_choice"] == {"type": "none"}


def test_sampling_and_stop_rules() -> None:
    out = fmt.render_request(openai_origin(temperature=1.7, top_p=0.5, stop=["\n", "END"]), "c")
    assert out["temperature"] == 1.0 and "top_p" not in out  # newer models reject both
    assert out["stop_sequences"] == ["END"]  # whitespace-only stops are rejected upstream


def test_thinking_budget_is_clamped_and_excludes_temperature() -> None:
    req = openai_origin(
        messages=[Message("user", [TextPart("q")])],
        thinking={"type": "enabled", "budget_tokens": 100},
        max_tokens=3000,
        temperature=0.2,
    )
    out = fmt.render_request(req, "c")
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert "temperature" not in out
    req.thinking = {"type": "enabled", "budget_tokens": 9000}
    assert fmt.render_request(req, "c")["thinking"]["budget_tokens"] == 2999


def test_thinking_is_skipped_mid_tool_loop_after_another_providers_turn() -> None:
    req = openai_origin(thinking={"type": "enabled", "budget_tokens": 2000}, max_tokens=4000)
    assert "thinking" not in fmt.render_request(req, "c")


def test_gemini_signed_thinking_never_reaches_anthropic() -> None:
    req = openai_origin(
        messages=[
            Message("user", [TextPart("q")]),
            Message("assistant", [ThinkingPart("t", signature="gemini:abc"), TextPart("a")]),
        ]
    )
    assert fmt.render_request(req, "c")["messages"][1]["content"][0]["type"] == "text"


def test_user_field_becomes_metadata_user_id() -> None:
    assert fmt.render_request(openai_origin(user="u-1"), "c")["metadata"] == {"user_id": "u-1"}


# ---- upstream response & client response ----------------------------------------

UPSTREAM_MESSAGE = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "text", "text": "Running tests."},
        {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"cmd": "pytest -q"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 50,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 3000,
        "output_tokens": 70,
    },
}


def test_parse_response_sums_the_whole_prompt() -> None:
    resp = fmt.parse_response(UPSTREAM_MESSAGE)
    assert resp.usage == Usage(
        input_tokens=3250, output_tokens=70, cache_read_tokens=3000, cache_write_tokens=200
    )
    assert resp.usage.uncached_input_tokens == 50
    assert resp.finish_reason == "tool_calls"
    assert resp.tool_calls == [ToolCall("toolu_9", "Bash", '{"cmd":"pytest -q"}')]
    assert resp.content[0] == ThinkingPart("hm", signature="sig")


def test_response_round_trips_and_validates_with_the_sdk() -> None:
    out = fmt.render_response(fmt.parse_response(UPSTREAM_MESSAGE), "claude-sonnet-4-5")
    assert out == UPSTREAM_MESSAGE
    SDKMessage.model_validate(out)


@pytest.mark.parametrize(
    ("finish", "stop_reason"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "refusal"),
        ("error", "end_turn"),
    ],
)
def test_finish_reasons(finish: Any, stop_reason: str) -> None:
    resp = ChatResponse(id="", model="", content=[TextPart("x")], finish_reason=finish)
    out = fmt.render_response(resp, "m")
    assert SDKMessage.model_validate(out).stop_reason == stop_reason
    assert out["id"].startswith("msg_")


# ---- upstream stream ------------------------------------------------------------


def ev(kind: str, **payload: Any) -> bytes:
    return encode_sse(orjson.dumps({"type": kind, **payload}), event=kind)


def delta(index: int, **d: Any) -> bytes:
    return ev("content_block_delta", index=index, delta=d)


RECORDED = b"".join(
    [
        ev(
            "message_start",
            message={
                "id": "msg_s",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-sonnet-4-5",
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 12,
                    "cache_creation_input_tokens": 300,
                    "cache_read_input_tokens": 2000,
                    "output_tokens": 1,
                },
            },
        ),
        ev(
            "content_block_start",
            index=0,
            content_block={"type": "thinking", "thinking": "", "signature": ""},
        ),
        ev("ping"),
        delta(0, type="thinking_delta", thinking="Check "),
        delta(0, type="thinking_delta", thinking="the file."),
        delta(0, type="signature_delta", signature="EqSig"),
        ev("content_block_stop", index=0),
        ev("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        delta(1, type="text_delta", text="Réading ✓"),
        ev("content_block_stop", index=1),
        ev(
            "content_block_start",
            index=2,
            content_block={"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}},
        ),
        delta(2, type="input_json_delta", partial_json=""),
        delta(2, type="input_json_delta", partial_json='{"path": '),
        delta(2, type="input_json_delta", partial_json='"a.py"}'),
        ev("content_block_stop", index=2),
        ev(
            "message_delta",
            delta={"stop_reason": "tool_use", "stop_sequence": None},
            usage={"output_tokens": 89},
        ),
        ev("message_stop"),
    ]
)


def parse_stream(pieces: list[bytes]) -> list[StreamEvent]:
    dec, parser = SSEDecoder(), fmt.StreamParser()
    events: list[StreamEvent] = []
    for piece in pieces:
        for msg in dec.feed(piece):
            events.extend(parser.feed(msg.event, msg.data))
    events.extend(parser.finish())
    return events


def accumulate(events: list[StreamEvent]) -> ChatResponse:
    acc = StreamAccumulator()
    for e in events:
        acc.add(e)
    assert acc.finished
    return acc.result()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(RECORDED)), max_size=15))
def test_recorded_stream_at_any_byte_boundaries(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [RECORDED[a:b] for a, b in zip([0, *points], [*points, len(RECORDED)], strict=True)]
    events = parse_stream(pieces)
    assert events[0] == StreamStart("msg_s", "claude-sonnet-4-5", input_tokens=2312)
    resp = accumulate(events)
    assert resp.content == [
        ThinkingPart("Check the file.", signature="EqSig"),
        TextPart("Réading ✓"),
    ]
    assert resp.tool_calls == [ToolCall("toolu_1", "Read", '{"path": "a.py"}')]
    assert resp.finish_reason == "tool_calls"
    assert resp.usage == Usage(2312, 89, 2000, 300)


def test_error_event_raises() -> None:
    parser = fmt.StreamParser()
    err = '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    with pytest.raises(UpstreamStreamError) as caught:
        parser.feed("error", err)
    assert caught.value.error_type == "overloaded_error"


def test_cut_stream_does_not_pretend_to_finish() -> None:
    cut = RECORDED.split(b"event: message_delta")[0]
    assert not any(isinstance(e, StreamEnd) for e in parse_stream([cut]))
    no_stop = RECORDED.split(b"event: message_stop")[0]
    assert isinstance(parse_stream([no_stop])[-1], StreamEnd)


# ---- client stream, checked by the official SDK -----------------------------------

_EVENT = TypeAdapter(RawMessageStreamEvent)


def render(events: list[StreamEvent]) -> bytes:
    r = fmt.StreamRenderer("claude-sonnet-4-5")
    return b"".join(r.render(e) for e in events)


def sdk_final(payload: bytes) -> Any:
    def reply(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=payload, headers={"content-type": "text/event-stream"})

    http = httpx2.Client(transport=httpx2.MockTransport(reply))
    client = anthropic.Anthropic(api_key="k", base_url="http://gateway.test", http_client=http)
    with client.messages.stream(
        model="orcarouter/coding", max_tokens=100, messages=[{"role": "user", "content": "x"}]
    ) as stream:
        return stream.get_final_message()


def wire_events(payload: bytes) -> list[Any]:
    msgs = SSEDecoder().feed(payload)
    events = [_EVENT.validate_python(orjson.loads(m.data)) for m in msgs]
    assert [m.event for m in msgs] == [e.type for e in events]
    return events


def test_rendered_stream_from_an_openai_upstream() -> None:
    """Usage only at the end: message_start says 0, message_delta carries the truth."""
    neutral: list[StreamEvent] = [
        StreamStart("chatcmpl-1", "gpt-5-mini"),
        TextDelta("Hello"),
        TextDelta(" there"),
        ToolCallStart(0, "call_a", "Read"),
        ToolCallDelta(0, '{"path":'),
        ToolCallDelta(0, '"a"}'),
        ToolCallStart(1, "call_b", "Bash"),
        ToolCallDelta(1, '{"cmd":"ls"}'),
        StreamEnd("tool_calls", Usage(input_tokens=1500, output_tokens=42, cache_read_tokens=1024)),
    ]
    payload = render(neutral)
    events = wire_events(payload)
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    starts = [e.index for e in events if e.type == "content_block_start"]
    stops = [e.index for e in events if e.type == "content_block_stop"]
    assert starts == stops == [0, 1, 2]
    final = sdk_final(payload)
    assert final.content[0].text == "Hello there"
    assert [(b.id, b.name, b.input) for b in final.content[1:]] == [
        ("toolu_call_a", "Read", {"path": "a"}),
        ("toolu_call_b", "Bash", {"cmd": "ls"}),
    ]
    assert final.stop_reason == "tool_use"
    assert final.usage.input_tokens == 476  # uncached part: 1500 - 1024
    assert final.usage.cache_read_input_tokens == 1024
    assert final.usage.output_tokens == 42


def test_anthropic_stream_relays_thinking_and_signatures() -> None:
    neutral = parse_stream([RECORDED])
    final = sdk_final(render(neutral))
    thinking, text, tool = final.content
    assert (thinking.thinking, thinking.signature) == ("Check the file.", "EqSig")
    assert text.text == "Réading ✓"
    assert tool.input == {"path": "a.py"}
    assert final.usage.cache_creation_input_tokens == 300
    assert final.usage.input_tokens == 12


def test_thinking_after_a_signature_opens_a_new_block() -> None:
    payload = render(
        [
            ThinkingDelta("a"),
            ThinkingDelta("", signature="s1"),
            ThinkingDelta("b"),
            ThinkingDelta("", signature="s2"),
            TextDelta("x"),
            StreamEnd("stop", Usage()),
        ]
    )
    final = sdk_final(payload)
    assert [(b.type, getattr(b, "signature", None)) for b in final.content] == [
        ("thinking", "s1"),
        ("thinking", "s2"),
        ("text", None),
    ]
