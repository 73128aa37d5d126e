"""The Responses API codec: requests in, Response objects and SSE events out.

Shapes are checked against the official openai SDK's own types (pydantic
models generated from OpenAI's spec), so a missing or misnamed field fails
here, not in a client.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tiergate.core.model import (
    ChatRequest,
    ChatResponse,
    FinishReason,
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
    Usage,
)
from tiergate.formats import dumps
from tiergate.formats.errors import FormatError
from tiergate.formats.responses import StreamRenderer, parse_request, render_response
from tiergate.formats.responses.items import encode_reasoning
from tiergate.formats.sse import SSEDecoder

EVENT = TypeAdapter(ResponseStreamEvent)

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}},
    {
        "type": "custom",
        "name": "apply_patch",
        "description": "Patch files",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
    },
    {"type": "local_shell"},
    {
        "type": "namespace",
        "name": "agents",
        "description": "Sub-agents",
        "tools": [
            {"type": "function", "name": "spawn", "parameters": {"type": "object"}},
            {"type": "custom", "name": "note"},
            {"type": "web_search"},
        ],
    },
    {"type": "web_search"},
    {"type": "a_tool_type_from_next_year", "name": "x"},
]

#: The shape Codex CLI sends on a later turn of a tool loop (store=false, full input).
CODEX_BODY: dict[str, Any] = {
    "model": "orcarouter/coding",
    "instructions": "You are Codex.",
    "input": [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "<permissions>sandboxed</permissions>"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "fix the bug"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBOR"},
            ],
        },
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Looking around"}],
            "encrypted_content": encode_reasoning("I should list files", "sig-1"),
        },
        {"type": "function_call", "name": "shell", "arguments": '{"cmd":"ls"}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
        {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin", "call_id": "c2"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done"},
        {
            "type": "local_shell_call",
            "call_id": "c3",
            "status": "completed",
            "action": {"type": "exec", "command": ["pytest"], "timeout_ms": 1000},
        },
        {"type": "local_shell_call_output", "id": "c3", "output": "1 passed"},
        {"type": "web_search_call", "status": "completed", "action": {"type": "search"}},
        {"type": "compaction", "encrypted_content": "opaque"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Fixed."}],
        },
        {"role": "user", "content": "thanks"},
    ],
    "tools": TOOLS,
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "0199-conv",
    "text": {"verbosity": "low"},
}


# ---- requests --------------------------------------------------------------------


def test_codex_turn_becomes_one_neutral_transcript() -> None:
    req = parse_request(CODEX_BODY)
    assert req.system_text() == "You are Codex.\n<permissions>sandboxed</permissions>"
    roles = [m.role for m in req.messages]
    assert roles == ["user"] + ["assistant", "tool"] * 3 + ["assistant", "user"]
    calls = [m.tool_calls for m in req.messages if m.role == "assistant"]
    assert [[(c.id, c.name) for c in turn] for turn in calls] == [
        [("c1", "shell")],
        [("c2", "apply_patch")],
        [("c3", "local_shell")],
        [],
    ]
    assert req.messages[1].content == [ThinkingPart("I should list files", "sig-1")]
    assert orjson.loads(calls[1][0].arguments) == {"input": "*** Begin"}
    assert orjson.loads(calls[2][0].arguments) == {"command": ["pytest"], "timeout_ms": 1000}
    assert [m.tool_call_id for m in req.messages if m.role == "tool"] == ["c1", "c2", "c3"]
    assert req.messages[7].text() == "Fixed."
    assert req.has_images() and req.stream and req.include_usage
    assert req.parallel_tool_calls is False and req.prompt_cache_key == "0199-conv"
    assert [t.name for t in req.tools] == [
        "shell",
        "apply_patch",
        "local_shell",
        "agents__spawn",
        "agents__note",
    ]
    assert {name: r.kind for name, r in req.extra["tool_routes"].items()} == {
        "shell": "function",
        "apply_patch": "custom",
        "local_shell": "local_shell",
        "agents__spawn": "function",
        "agents__note": "custom",
    }
    assert req.tools[3].description == "(agents: Sub-agents)"
    assert "lark grammar" in req.tools[1].description
    assert req.tools[1].parameters["required"] == ["input"]


def test_a_developer_message_inside_the_conversation_stays_in_place() -> None:
    items = [
        {"role": "developer", "content": "first"},
        {"role": "user", "content": "a"},
        {"role": "developer", "content": [{"type": "input_text", "text": "sandbox changed"}]},
        {"role": "user", "content": "b"},
    ]
    req = parse_request({"model": "m", "input": items})
    assert req.system_text() == "first"
    assert [(m.role, m.text()) for m in req.messages] == [
        ("user", "a"),
        ("system", "sandbox changed"),
        ("user", "b"),
    ]


def test_text_format_and_sampling_map_to_the_neutral_fields() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    req = parse_request(
        {
            "model": "m",
            "input": "hi",
            "max_output_tokens": 64,
            "temperature": 0.2,
            "top_p": 0.9,
            "user": "u-1",
            "metadata": {"k": "v"},
            "text": {"format": {"type": "json_schema", "name": "out", "schema": schema}},
        }
    )
    assert (req.max_tokens, req.temperature, req.top_p, req.user) == (64, 0.2, 0.9, "u-1")
    assert req.response_format == {
        "type": "json_schema",
        "json_schema": {"name": "out", "schema": schema},
    }
    assert req.metadata == {"k": "v"} and req.messages[0].text() == "hi"


def test_allowed_tools_narrows_the_offer_and_named_choices_map() -> None:
    allowed = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "local_shell"}]}
    req = parse_request({"model": "m", "input": "x", "tools": TOOLS, "tool_choice": allowed})
    assert req.tool_choice == "required" and [t.name for t in req.tools] == ["local_shell"]
    named = parse_request(
        {
            "model": "m",
            "input": "x",
            "tools": TOOLS,
            "tool_choice": {"type": "custom", "name": "apply_patch"},
        }
    )
    assert named.tool_choice == {"type": "tool", "name": "apply_patch"}
    hosted = parse_request(
        {"model": "m", "input": "x", "tools": TOOLS, "tool_choice": {"type": "web_search"}}
    )
    assert hosted.tool_choice is None


def test_only_tiergate_minted_reasoning_is_given_back() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA-openai-encrypted"},
        {"type": "reasoning", "summary": [], "encrypted_content": "tgr1.!!not base64"},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hm"}]},
        {"type": "message", "role": "assistant", "content": "ok"},
    ]
    req = parse_request({"model": "m", "input": items})
    assert req.messages[1].content == [ThinkingPart("hm"), TextPart("ok")]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"background": True}, "background"),
        ({"input": []}, "input"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0]",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            "input[0].content[0]",
        ),
        ({"input": [{"role": "critic", "content": "x"}]}, "input[0].role"),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"text": {"format": {"type": "yaml"}}}, "text.format.type"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"store": "no"}, "store"),
        ({"include": [1]}, "include[0]"),
        ({"model": 5}, "model"),
    ],
)
def test_unservable_requests_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(FormatError) as err:
        parse_request({"model": "m", "input": "hi", **body})
    assert err.value.param == param


def test_previous_response_id_null_is_accepted() -> None:
    parse_request({"model": "m", "input": "hi", "previous_response_id": None, "store": True})


# ---- whole responses --------------------------------------------------------------


def _request(**kw: Any) -> ChatRequest:
    return parse_request({"model": "orcarouter/coding", "input": "hi", "tools": TOOLS, **kw})


@pytest.mark.parametrize(
    ("finish", "status"),
    [
        ("stop", "completed"),
        ("length", "incomplete"),
        ("content_filter", "incomplete"),
        ("error", "failed"),
    ],
)
def test_response_object_is_what_the_sdk_expects(finish: FinishReason, status: str) -> None:
    resp = ChatResponse(
        id="up-1",
        model="gpt-5-mini",
        content=[ThinkingPart("think", "sig"), TextPart("hello")],
        tool_calls=[
            ToolCall("c1", "apply_patch", dumps({"input": "*** Begin"})),
            ToolCall("c2", "local_shell", dumps({"command": ["ls"]})),
            ToolCall("c3", "shell", "{}"),
        ],
        finish_reason=finish,
        usage=Usage(100, 20, cache_read_tokens=60, cache_write_tokens=10),
    )
    out = Response.model_validate(render_response(resp, _request(instructions="Be brief.")))
    assert out.status == status and out.model == "orcarouter/coding"
    assert [i.type for i in out.output] == [
        "reasoning",
        "message",
        "custom_tool_call",
        "local_shell_call",
        "function_call",
    ]
    assert out.output_text == "hello" and out.instructions == "Be brief."
    custom, shell = out.output[2], out.output[3]
    assert custom.type == "custom_tool_call" and custom.input == "*** Begin"
    assert shell.type == "local_shell_call" and shell.action.command == ["ls"]
    assert out.usage is not None and out.usage.input_tokens_details.cached_tokens == 60
    assert out.usage.total_tokens == 120 and out.store is False
    assert [t.type for t in out.tools] == ["function", "custom", "local_shell", "namespace"]


def test_namespaced_calls_go_back_with_name_and_namespace_apart() -> None:
    resp = ChatResponse(
        id="r",
        model="m",
        tool_calls=[ToolCall("c1", "agents__spawn", "{}"), ToolCall("c2", "agents__note", "{}")],
    )
    out = Response.model_validate(render_response(resp, _request()))
    spawn, note = out.output
    assert spawn.type == "function_call" and (spawn.name, spawn.namespace) == ("spawn", "agents")
    assert note.type == "custom_tool_call" and (note.name, note.namespace) == ("note", "agents")
    choice = {"type": "function", "name": "spawn", "namespace": "agents"}
    assert _request(tool_choice=choice).tool_choice == {"type": "tool", "name": "agents__spawn"}


# ---- round trips: what a client sends back is what the upstream said -------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_calls = st.lists(
    st.tuples(st.sampled_from(["shell", "apply_patch", "agents__spawn", "agents__note"]), _text),
    max_size=3,
)


@st.composite
def _responses(draw: st.DrawFn) -> ChatResponse:
    content: list[Any] = []
    thinking, signature = draw(_text), draw(st.none() | _text.filter(bool))
    if thinking or signature:
        content.append(ThinkingPart(thinking, signature))
    text = draw(_text)
    if text:
        content.append(TextPart(text))
    calls = []
    for i, (name, value) in enumerate(draw(_calls)):
        custom = name in ("apply_patch", "agents__note")
        args = dumps({"input": value}) if custom else dumps({"cmd": value})
        calls.append(ToolCall(f"call_{i}", name, args))
    return ChatResponse(id="r", model="m", content=content, tool_calls=calls, usage=Usage(5, 3))


def _sent_back(output: list[dict[str, Any]]) -> Message:
    """The assistant turn a client's next request carries for this output."""
    history = [{"role": "user", "content": "go"}, *output]
    req = parse_request({"model": "m", "input": history, "tools": TOOLS})
    return req.messages[-1] if req.messages[-1].role == "assistant" else Message("assistant")


@settings(max_examples=150, deadline=None)
@given(_responses())
def test_whole_reply_round_trips_through_the_clients_next_turn(resp: ChatResponse) -> None:
    out = render_response(resp, _request())
    back = _sent_back(out["output"])
    assert back.tool_calls == resp.tool_calls
    assert back.text() == resp.text()
    thinking = [p for p in resp.content if isinstance(p, ThinkingPart)]
    assert [p for p in back.content if isinstance(p, ThinkingPart)] == thinking


# ---- streams ----------------------------------------------------------------------


def _as_events(resp: ChatResponse, cut: int) -> list[StreamEvent]:
    """The neutral stream an upstream would send for `resp`, deltas cut every `cut` chars."""
    events: list[StreamEvent] = [StreamStart("up", "m")]
    for p in resp.content:
        if isinstance(p, ThinkingPart):
            events += [ThinkingDelta(p.text[i : i + cut]) for i in range(0, len(p.text), cut)]
            if p.signature:
                events.append(ThinkingDelta("", p.signature))
        elif isinstance(p, TextPart):
            events += [TextDelta(p.text[i : i + cut]) for i in range(0, len(p.text), cut)]
    for i, c in enumerate(resp.tool_calls):
        events.append(ToolCallStart(i, c.id, c.name))
        args = c.arguments
        events += [ToolCallDelta(i, args[j : j + cut]) for j in range(0, len(args), cut)]
    events.append(StreamEnd(resp.finish_reason, resp.usage))
    return events


def _render(events: list[StreamEvent], req: ChatRequest) -> list[dict[str, Any]]:
    renderer, decoder, out = StreamRenderer(req), SSEDecoder(), []
    for ev in events:
        for msg in decoder.feed(renderer.render(ev)):
            data = orjson.loads(msg.data)
            assert msg.event == data["type"]
            EVENT.validate_python(data)  # the SDK's own event types
            out.append(data)
    return out


def _without_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in i.items() if k != "id"} for i in items]


@settings(max_examples=150, deadline=None)
@given(_responses(), st.integers(1, 7))
def test_stream_ends_with_the_same_response_as_the_whole_reply(
    resp: ChatResponse, cut: int
) -> None:
    req = _request(stream=True)
    if resp.tool_calls:
        resp.finish_reason = "tool_calls"
    events = _render(_as_events(resp, cut), req)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    final = events[-1]
    assert final["type"] == "response.completed"
    added = [e["item"]["id"] for e in events if e["type"] == "response.output_item.added"]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [i["id"] for i in done] == added == [i["id"] for i in final["response"]["output"]]
    acc = StreamAccumulator()
    for ev in _as_events(resp, cut):
        acc.add(ev)
    whole = render_response(acc.result(), req)
    streamed_output = final["response"]["output"]
    if not resp.text() and not resp.tool_calls:
        # the whole reply always has a message; a stream with no text has none
        whole["output"] = [i for i in whole["output"] if i["type"] != "message"]
    assert _without_ids(streamed_output) == _without_ids(whole["output"])
    assert final["response"]["usage"] == whole["usage"]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == resp.text()


def test_failure_after_start_is_response_failed() -> None:
    renderer = StreamRenderer(_request(stream=True))
    decoder = SSEDecoder()
    raw = renderer.render(StreamStart("x", "m")) + renderer.render(TextDelta("par"))
    raw += renderer.fail(429, "slow down")
    assert renderer.render(TextDelta("more")) == b"" and renderer.fail(500, "again") == b""
    events = [orjson.loads(m.data) for m in decoder.feed(raw)]
    for e in events:
        EVENT.validate_python(e)
    last = events[-1]
    assert last["type"] == "response.failed" and last["sequence_number"] == len(events) - 1
    assert last["response"]["error"] == {"code": "rate_limit_exceeded", "message": "slow down"}


def test_length_cut_stream_is_response_incomplete() -> None:
    events = _render([TextDelta("abc"), StreamEnd("length", Usage(1, 1))], _request(stream=True))
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
