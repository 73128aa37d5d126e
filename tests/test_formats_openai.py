"""OpenAI chat-completions codec: strict inbound parsing, upstream rendering, usage,
and streams checked against the official openai SDK."""

from __future__ import annotations

import contextlib
from typing import Any

import httpx2  # the HTTP client this openai SDK is built on (a fork of httpx)
import openai
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

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
    Usage,
)
from tiergate.formats import openai as fmt
from tiergate.formats.errors import FormatError, UpstreamStreamError
from tiergate.formats.sse import SSEDecoder, encode_sse

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            "strict": True,
        },
    }
]


def body(**over: Any) -> dict[str, Any]:
    b: dict[str, Any] = {
        "model": "orcarouter/coding",
        "messages": [{"role": "user", "content": "hi"}],
    }
    b.update(over)
    return b


# ---- inbound request ------------------------------------------------------------


def test_parse_full_tool_loop_request() -> None:
    req = fmt.parse_request(
        body(
            messages=[
                {"role": "developer", "content": "be brief"},
                {"role": "system", "content": [{"type": "text", "text": "rules"}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                        {"type": "image_url", "image_url": {"url": "https://x/y.jpg"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "think",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path":"a"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "contents"},
            ],
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "read_file"}},
            parallel_tool_calls=False,
            stream=True,
            stream_options={"include_usage": True},
            max_tokens=10,
            max_completion_tokens=20,
            stop="END",
            seed=7,
            prompt_cache_key="k",
        )
    )
    assert [p.text for p in req.system] == ["be brief", "rules"]
    assert [m.role for m in req.messages] == ["user", "assistant", "tool"]
    img_data, img_url = req.messages[0].content[1:]
    assert img_data == ImagePart(data="AAAA", media_type="image/png")
    assert img_url == ImagePart(url="https://x/y.jpg")
    assistant = req.messages[1]
    assert assistant.content == [ThinkingPart("think")]
    assert assistant.tool_calls == [ToolCall("call_1", "read_file", '{"path":"a"}')]
    assert req.messages[2].tool_call_id == "call_1" and req.messages[2].text() == "contents"
    assert req.tool_choice == {"type": "tool", "name": "read_file"}
    assert req.parallel_tool_calls is False
    assert req.tools[0].strict is True
    assert req.include_usage and req.stream
    assert req.max_tokens == 20  # max_completion_tokens wins
    assert req.stop == ["END"]
    assert req.extra == {"seed": 7}
    assert req.prompt_cache_key == "k" and req.source_format == "openai"


@pytest.mark.parametrize(
    ("bad", "param"),
    [
        (body(model=None), "model"),
        (body(messages=[]), "messages"),
        (body(messages="hi"), "messages"),
        (body(n=2), "n"),
        (body(messages=[{"role": "wizard", "content": "x"}]), "messages[0].role"),
        (body(messages=[{"role": "user", "content": 5}]), "messages[0].content"),
        (
            body(messages=[{"role": "user", "content": [{"type": "input_audio"}]}]),
            "messages[0].content[0].type",
        ),
        (body(messages=[{"role": "tool", "content": "x"}]), "messages[0].tool_call_id"),
        (
            body(messages=[{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]),
            "messages[0].tool_calls[0].id",
        ),
        (body(temperature="hot"), "temperature"),
        (body(temperature=3), "temperature"),
        (body(max_tokens=0), "max_tokens"),
        (body(max_tokens=True), "max_tokens"),
        (body(tools=[{"type": "custom", "custom": {}}]), "tools[0].type"),
        (body(tool_choice="sometimes"), "tool_choice"),
        (body(response_format={"type": "yaml"}), "response_format.type"),
        (body(stop=[1]), "stop[0]"),
    ],
)
def test_schema_errors_name_the_field(bad: dict[str, Any], param: str) -> None:
    with pytest.raises(FormatError) as err:
        fmt.parse_request(bad)
    assert err.value.param == param


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    ["role", "content", "tool_calls", "tool_call_id", "name", "type", "text", "image_url"]
)
_MESSAGE = st.dictionaries(_KEYS, _JSON | st.sampled_from(["user", "assistant", "tool", "text"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(_MESSAGE, max_size=4), st.dictionaries(st.sampled_from(list(body())), _JSON))
def test_garbage_is_a_format_error_never_a_crash(
    messages: list[Any], extra: dict[str, Any]
) -> None:
    with contextlib.suppress(FormatError):
        fmt.parse_request({**body(messages=messages), **extra})


# ---- upstream request -----------------------------------------------------------


def neutral_request(**over: Any) -> ChatRequest:
    req = fmt.parse_request(
        body(
            messages=[
                {"role": "system", "content": "sys"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "see"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,QQ=="}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": "",
                    "reasoning_content": "hmm",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "done"},
            ],
            tools=TOOLS,
            stream=True,
            max_tokens=50,
            seed=1,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
            thinking={"type": "enabled"},
            user="u1",
        )
    )
    for k, v in over.items():
        setattr(req, k, v)
    return req


def test_render_for_openai_forwards_openai_extras_and_always_asks_for_usage() -> None:
    out = fmt.render_request(neutral_request(include_usage=False), "gpt-5-mini")
    assert out["model"] == "gpt-5-mini"
    assert out["stream_options"] == {"include_usage": True}
    assert out["max_completion_tokens"] == 50 and "max_tokens" not in out
    assert out["seed"] == 1 and out["user"] == "u1"
    assert "thinking" not in out  # thinking is not an OpenAI parameter
    assistant = out["messages"][2]
    assert "reasoning_content" not in assistant  # dropped for OpenAI
    assert assistant["tool_calls"][0]["id"] == "c1"
    assert out["messages"][1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,QQ=="},
    }
    assert out["tools"][0]["function"]["strict"] is True


def test_extras_from_another_dialect_are_not_forwarded() -> None:
    req = neutral_request(source_format="anthropic", extra={"top_k": 5})
    assert "top_k" not in fmt.render_request(req, "gpt")


def test_render_for_deepseek() -> None:
    out = fmt.render_request(neutral_request(), "deepseek-chat", deepseek=True)
    assert out["max_tokens"] == 50 and "max_completion_tokens" not in out
    assert out["messages"][1]["content"] == "see"  # image dropped: text-only API
    assert out["messages"][2]["reasoning_content"] == "hmm"  # required back after tool calls
    assert out["response_format"] == {"type": "json_object"}
    assert out["thinking"] == {"type": "enabled"}
    assert "strict" not in out["tools"][0]["function"]
    assert "user" not in out


# ---- upstream response & usage --------------------------------------------------


def completion(**msg: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "created": 17,
        "model": "gpt-5-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", **msg}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 1000,
            "completion_tokens": 30,
            "total_tokens": 1030,
            "prompt_tokens_details": {"cached_tokens": 768},
        },
    }


def test_parse_openai_usage_and_tool_calls() -> None:
    raw = completion(
        content=None,
        tool_calls=[
            {"id": "call_x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    )
    resp = fmt.parse_response(raw)
    assert resp.usage == Usage(input_tokens=1000, output_tokens=30, cache_read_tokens=768)
    assert resp.tool_calls == [ToolCall("call_x", "f", "{}")]
    assert resp.finish_reason == "tool_calls"  # "stop" with calls is normalised


def test_parse_deepseek_usage_and_reasoning() -> None:
    raw = completion(content="4", reasoning_content="2+2")
    raw["usage"] = {
        "prompt_tokens": 500,
        "completion_tokens": 9,
        "prompt_cache_hit_tokens": 448,
        "prompt_cache_miss_tokens": 52,
    }
    resp = fmt.parse_response(raw)
    assert resp.usage == Usage(input_tokens=500, output_tokens=9, cache_read_tokens=448)
    assert resp.content == [ThinkingPart("2+2"), TextPart("4")]


# ---- client response ------------------------------------------------------------


def test_render_response_is_a_valid_chat_completion() -> None:
    resp = ChatResponse(
        id="msg_1",
        model="claude",
        content=[ThinkingPart("why", signature="sig"), TextPart("Hi")],
        tool_calls=[ToolCall("toolu_1", "f", '{"a":1}')],
        finish_reason="tool_calls",
        usage=Usage(
            input_tokens=1200, output_tokens=40, cache_read_tokens=1000, cache_write_tokens=100
        ),
    )
    out = fmt.render_response(resp, "orcarouter/coding")
    parsed = ChatCompletion.model_validate(out)
    assert parsed.model == "orcarouter/coding"
    choice = parsed.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Hi"
    assert choice.message.tool_calls[0].id == "toolu_1"  # type: ignore[index]
    assert out["choices"][0]["message"]["reasoning_content"] == "why"
    assert parsed.usage is not None
    assert parsed.usage.prompt_tokens == 1200 and parsed.usage.completion_tokens == 40
    assert parsed.usage.prompt_tokens_details.cached_tokens == 1000  # type: ignore[union-attr]


def test_error_finish_renders_as_a_finish_reason_openai_knows() -> None:
    out = fmt.render_response(ChatResponse(id="", model="", finish_reason="error"), "m")
    assert ChatCompletion.model_validate(out).choices[0].finish_reason == "stop"
    assert out["id"].startswith("chatcmpl-")


# ---- upstream stream ------------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> bytes:
    c: dict[str, Any] = {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-5-mini",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": None,
    }
    c.update(top)
    return encode_sse(orjson.dumps(c))


RECORDED = b"".join(
    [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "check."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"a.py"}'}}]}),
        chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "call_b", "function": {"name": "ls", "arguments": "{}"}}
                ]
            }
        ),
        chunk({}, "tool_calls"),
        chunk(
            usage={
                "prompt_tokens": 900,
                "completion_tokens": 33,
                "total_tokens": 933,
                "prompt_tokens_details": {"cached_tokens": 512},
            }
        ),
        b"data: [DONE]\n\n",
    ]
)


def parse_stream(raw_chunks: list[bytes]) -> list[StreamEvent]:
    dec, parser = SSEDecoder(), fmt.StreamParser()
    events: list[StreamEvent] = []
    for c in raw_chunks:
        for msg in dec.feed(c):
            events.extend(parser.feed(msg.data))
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
    resp = accumulate(parse_stream(pieces))
    assert resp.text() == "Let me check."
    assert resp.tool_calls == [
        ToolCall("call_a", "read_file", '{"path":"a.py"}'),
        ToolCall("call_b", "ls", "{}"),
    ]
    assert resp.finish_reason == "tool_calls"
    assert resp.usage == Usage(input_tokens=900, output_tokens=33, cache_read_tokens=512)


def test_deepseek_stream_reasoning_and_usage_in_the_last_chunk() -> None:
    usage = {"prompt_tokens": 60, "completion_tokens": 5, "prompt_cache_hit_tokens": 32}
    raw = [
        chunk({"role": "assistant", "content": None, "reasoning_content": "Hm"}),
        chunk({"content": "Yes"}),
        chunk({"content": ""}, "stop", usage=usage),
        b"data: [DONE]\n\n",
    ]
    events = parse_stream(raw)
    assert isinstance(events[0], StreamStart)
    assert ThinkingDelta("Hm") in events
    assert events[-1] == StreamEnd("stop", Usage(60, 5, 32, 0))


def test_stream_without_done_completes_only_if_it_finished() -> None:
    finished = parse_stream([chunk({"content": "a"}), chunk({}, "length")])
    assert finished[-1] == StreamEnd("length", Usage())
    cut = parse_stream([chunk({"content": "a"})])
    assert not any(isinstance(e, StreamEnd) for e in cut)


def test_error_payload_mid_stream_raises() -> None:
    parser = fmt.StreamParser()
    parser.feed(orjson.dumps({"id": "x", "choices": []}).decode())
    with pytest.raises(UpstreamStreamError):
        parser.feed('{"error": {"message": "overloaded", "type": "server_error"}}')


def test_tool_calls_without_index_are_told_apart_by_id() -> None:
    raw = [
        chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
        chunk({}, "stop"),
    ]
    resp = accumulate(parse_stream(raw))
    assert [(c.id, c.name) for c in resp.tool_calls] == [("a", "f"), ("b", "g")]
    assert resp.finish_reason == "tool_calls"


# ---- client stream, checked by the official SDK -----------------------------------


EVENTS: list[StreamEvent] = [
    StreamStart(id="msg_up", model="claude", input_tokens=10),
    ThinkingDelta("plan"),
    ThinkingDelta("", signature="sig"),
    TextDelta('Say "hi"\n'),
    ToolCallStart(0, "toolu_1", "read_file"),
    ToolCallDelta(0, '{"path"'),
    ToolCallDelta(0, ':"x"}'),
    ToolCallStart(1, "toolu_2", "ls"),
    ToolCallDelta(1, "{}"),
    StreamEnd("tool_calls", Usage(input_tokens=2000, output_tokens=50, cache_read_tokens=1500)),
]


def render(events: list[StreamEvent], include_usage: bool) -> bytes:
    r = fmt.StreamRenderer("orcarouter/coding", include_usage)
    return b"".join(r.render(e) for e in events)


def sdk_client(payload: bytes) -> openai.OpenAI:
    def reply(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=payload, headers={"content-type": "text/event-stream"})

    http = httpx2.Client(transport=httpx2.MockTransport(reply))
    return openai.OpenAI(api_key="k", base_url="http://gateway.test/v1", http_client=http)


@pytest.mark.parametrize("include_usage", [True, False])
def test_rendered_stream_parses_with_the_openai_sdk(include_usage: bool) -> None:
    payload = render(EVENTS, include_usage)
    assert payload.endswith(b"data: [DONE]\n\n")
    stream = sdk_client(payload).chat.completions.create(
        model="orcarouter/coding", messages=[{"role": "user", "content": "x"}], stream=True
    )
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    chunks = list(stream)
    for c in chunks:
        assert isinstance(c, ChatCompletionChunk)
        assert c.id == "msg_up" and c.model == "orcarouter/coding"
        state.handle_chunk(c)
    assert len({c.created for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    final = state.get_final_completion()
    msg = final.choices[0].message
    assert msg.content == 'Say "hi"\n'
    assert [(t.id, t.function.name, t.function.arguments) for t in msg.tool_calls or []] == [
        ("toolu_1", "read_file", '{"path":"x"}'),
        ("toolu_2", "ls", "{}"),
    ]
    assert final.choices[0].finish_reason == "tool_calls"
    if include_usage:
        # Like OpenAI: every chunk names usage, null until the final usage-only chunk.
        raw = [orjson.loads(m.data) for m in SSEDecoder().feed(payload) if m.data != "[DONE]"]
        assert all(r["usage"] is None for r in raw[:-1]) and raw[-1]["usage"]
        assert chunks[-1].choices == []
        assert final.usage is not None and final.usage.prompt_tokens == 2000
        assert final.usage.prompt_tokens_details.cached_tokens == 1500  # type: ignore[union-attr]
    else:
        assert all(c.usage is None for c in chunks)


def test_renderer_round_trips_through_the_parser() -> None:
    """Our own upstream parser reads our client renderer: one neutral stream either way."""
    events = parse_stream([render(EVENTS, include_usage=True)])
    resp = accumulate(events)
    assert resp.text() == 'Say "hi"\n'
    assert [c.arguments for c in resp.tool_calls] == ['{"path":"x"}', "{}"]
    assert resp.usage.input_tokens == 2000 and resp.content[0] == ThinkingPart("plan")


def test_renderer_without_start_event_still_opens_with_a_role_chunk() -> None:
    out = render([TextDelta("a"), StreamEnd("stop", Usage())], include_usage=False)
    first = orjson.loads(out.split(b"\n\n")[0][len(b"data: ") :])
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}


def test_render_request_from_anthropic_origin_messages() -> None:
    req = ChatRequest(
        model="m",
        messages=[
            Message("user", [TextPart("a"), TextPart("b")]),
            Message("tool", [TextPart("r1"), TextPart("r2")], tool_call_id="t"),
        ],
    )
    out = fmt.render_request(req, "gpt")
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]
    assert out["messages"][1] == {
        "role": "tool",
        "tool_call_id": "t",
        "content": [{"type": "text", "text": "r1"}, {"type": "text", "text": "r2"}],
    }
