"""bench/soak_wire.py: the soak's Anthropic and Responses bodies say what its Chat
Completions body says, as the gateway's own parsers read them. Pure, fast; the
soak itself (tests/test_soak.py) checks the answers on a live gateway."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import soak_wire
from soak_sessions import new_session
from tiergate.core.model import ChatRequest
from tiergate.formats.anthropic.request import parse_request as parse_anthropic
from tiergate.formats.openai.request import parse_request as parse_chat
from tiergate.formats.responses.request import parse_request as parse_responses

PARSERS = {soak_wire.ANTHROPIC: parse_anthropic, soak_wire.RESPONSES: parse_responses}


def _shape(req: ChatRequest) -> list[tuple[str, str, list[tuple[str, str, str]], str | None]]:
    return [
        (
            m.role,
            m.text(),
            [(c.id, c.name, c.arguments.replace(" ", "")) for c in m.tool_calls],
            m.tool_call_id,
        )
        for m in req.messages
        if m.role != "system"
    ]


def _sessions() -> list[list[dict[str, Any]]]:
    """Bodies of complete soak sessions, with tool calls answered."""
    rng = random.Random(7)
    out = []
    for _ in range(40):
        session = new_session(rng, 0)
        bodies = []
        while (step := session.next_step()) is not None:
            bodies.append(step.body)
            call = {"id": f"toolu_{len(bodies)}", "type": "function"}
            call["function"] = {"name": "read_file", "arguments": '{"path": "a.py"}'}
            msg = {"role": "assistant", "content": None, "tool_calls": [call]}
            if not step.expect_tools:
                msg = {"role": "assistant", "content": "done", "tool_calls": []}
            session.pending_calls = msg["tool_calls"]
            session.messages.append(msg)
        out.append(bodies)
    return out


@pytest.mark.parametrize("wire", [soak_wire.ANTHROPIC, soak_wire.RESPONSES])
def test_every_soak_turn_reads_the_same_in_each_wire(wire: str) -> None:
    tool_turns = 0
    for bodies in _sessions():
        for body in bodies:
            plain = {k: v for k, v in body.items() if k != "session_tier"}
            rendered = {k: v for k, v in soak_wire.render(wire, body).items()}
            rendered.pop("session_tier", None)
            want, got = parse_chat(plain), PARSERS[wire](rendered)
            assert _shape(got) == _shape(want)
            assert [t.name for t in got.tools] == [t.name for t in want.tools]
            assert got.system_text() == want.system_text()
            assert got.stream == want.stream
            tool_turns += any(m.role == "tool" for m in want.messages)
    assert tool_turns > 20


def test_answers_fold_back_into_one_chat_message() -> None:
    anthropic = {
        "content": [
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
        ]
    }
    msg = soak_wire.anthropic_message(anthropic)
    assert msg["content"] == "Reading it."
    assert msg["tool_calls"][0]["function"] == {"name": "read_file", "arguments": '{"path":"a"}'}
    stream = soak_wire.AnthropicStream()
    for event in [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_2", "name": "run_command"},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"cmd": "ls"}'},
        },
        {"type": "message_stop"},
    ]:
        stream.feed(event)
    assert stream.done and not stream.error
    assert stream.message()["tool_calls"][0]["function"]["arguments"] == '{"cmd": "ls"}'
    responses = soak_wire.ResponsesStream()
    item = {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"}
    responses.feed({"type": "response.output_item.done", "item": item})
    responses.feed({"type": "response.failed"})
    assert responses.error and responses.message()["tool_calls"][0]["id"] == "c1"
