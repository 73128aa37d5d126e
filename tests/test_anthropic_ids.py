"""Anthropic-format replies converted from another provider carry Anthropic's id
shapes (`msg_...`, `toolu_...`), and the tool loop still closes on them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from servers import ANTHROPIC_TOOLS, TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.core.model import ChatResponse, StreamStart, TextPart, ToolCall, ToolCallStart
from tiergate.formats.anthropic import StreamRenderer, render_response, tool_use_id
from tiergate.sim.app import create_sim_app


def test_other_providers_ids_get_anthropic_prefixes_and_anthropics_are_kept() -> None:
    resp = ChatResponse(
        id="chatcmpl-9",
        model="gpt-5-mini",
        content=[TextPart("x")],
        tool_calls=[ToolCall("call_abc", "read_file", "{}")],
        finish_reason="tool_calls",
    )
    out = render_response(resp, "openai/gpt-5-mini")
    assert out["id"] == "msg_chatcmpl-9"
    assert out["content"][1]["id"] == "toolu_call_abc"
    assert tool_use_id("toolu_01XYZ") == "toolu_01XYZ"  # idempotent: Anthropic's own ids
    native = ChatResponse(id="msg_01A", model="m", tool_calls=[ToolCall("toolu_01B", "f", "{}")])
    assert render_response(native, "m")["id"] == "msg_01A"
    stream = StreamRenderer("m")
    head = stream.render(StreamStart("chatcmpl-7", "m", input_tokens=1))
    tool = stream.render(ToolCallStart(index=0, id="call_z", name="f"))
    assert b'"id":"msg_chatcmpl-7"' in head and b'"id":"toolu_call_z"' in tool


@pytest.fixture(scope="module")
def gw() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as sim:
        cfg = parse_config(gateway_config(sim.url))
        with ServerThread(create_app(cfg)) as g:
            yield g


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_sdk_on_an_openai_model_sees_anthropic_ids(
    gw: ServerThread, stream: bool
) -> None:
    client = anthropic.Anthropic(base_url=gw.url, api_key=TOKEN, max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Open the README please"}]
    kw: dict[str, Any] = {"model": "openai/gpt-5-mini", "max_tokens": 512, "tools": ANTHROPIC_TOOLS}
    if stream:
        with client.messages.stream(messages=messages, **kw) as s:  # type: ignore[arg-type]
            first = s.get_final_message()
    else:
        first = client.messages.create(messages=messages, **kw)  # type: ignore[arg-type]
    assert first.id.startswith("msg_")
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.id.startswith("toolu_")
    messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    result = {"type": "tool_result", "tool_use_id": use.id, "content": "# README\nhello"}
    messages.append({"role": "user", "content": [result]})
    second = client.messages.create(messages=messages, **kw)  # type: ignore[arg-type]
    assert second.stop_reason == "end_turn" and second.id.startswith("msg_")
