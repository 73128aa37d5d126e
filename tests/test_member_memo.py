"""formats/member_memo.py: a conversation's unchanged tools, checked and parsed once.

The body-decode memo hands back the same tool-list object while its bytes do
not change; the depth bound and the codec's tool parse then reuse their result
for that object. The parse must equal a fresh one, a too-deep list must be
refused on every request (it is never remembered), and the memo stays bounded.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import orjson
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.formats import anthropic, openai, responses
from tiergate.formats.body_decode import BodyDecodeMemo
from tiergate.formats.member_memo import CHECKED, MemberMemo
from tiergate.formats.message_memo import MessageMemo
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.inbound import ANTHROPIC, OPENAI, RESPONSES, InboundFormat
from tiergate.gateway.request_body import parse
from tiergate.sim.app import create_sim_app


def _schema(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        node = {"type": "object", "properties": {"x": node}}
    return node


def _tools(fmt: InboundFormat, depth: int = 3) -> list[dict[str, Any]]:
    out = []
    for i in range(12):
        schema = {"type": "object", "properties": {"a": _schema(depth)}, "required": ["a"]}
        fn = {"name": f"tool{i}", "description": "d" * 800, "parameters": schema}
        if fmt is OPENAI:
            out.append({"type": "function", "function": fn})
        elif fmt is RESPONSES:
            out.append({"type": "function", **fn})
        else:
            out.append({"name": f"tool{i}", "description": "d" * 800, "input_schema": schema})
    return out


def _body(fmt: InboundFormat, turns: int, tools: list[dict[str, Any]]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the bug."}]
    for t in range(turns):
        messages += [
            {"role": "assistant", "content": f"Looking at file {t}."},
            {"role": "user", "content": f"file {t}: " + "x" * 600},
        ]
    body: dict[str, Any] = {"model": "m", "max_tokens": 100, fmt.memo_field: messages}
    if fmt is RESPONSES:
        del body["max_tokens"]
    body["tools"] = tools  # after the messages, as agents send it
    return body


def _turn(
    fmt: InboundFormat, decode: BodyDecodeMemo, memo: MessageMemo, body: dict[str, Any]
) -> Any:
    raw = orjson.dumps(body)
    return parse(fmt, decode.loads(raw, fmt.memo_field), len(raw), memo)


@pytest.mark.parametrize(
    "fmt", [OPENAI, ANTHROPIC, RESPONSES], ids=["openai", "anthropic", "responses"]
)
def test_a_resent_tool_list_is_parsed_once_and_equals_a_fresh_parse(fmt: InboundFormat) -> None:
    decode, memo = BodyDecodeMemo(), MessageMemo()
    tools = _tools(fmt)
    first = _turn(fmt, decode, memo, _body(fmt, 20, tools))
    second = _turn(fmt, decode, memo, _body(fmt, 21, tools))
    codec = {OPENAI: openai, ANTHROPIC: anthropic, RESPONSES: responses}[fmt]
    fresh = codec.parse_request(copy.deepcopy(_body(fmt, 21, tools)))
    assert second.tools == fresh.tools and len(second.tools) == 12
    assert all(a is b for a, b in zip(first.tools, second.tools, strict=True))  # reused
    assert second.tools is not first.tools  # each request owns its list
    assert len(memo.members) >= 2  # the tools: checked and parsed


@pytest.mark.parametrize(
    "fmt", [OPENAI, ANTHROPIC, RESPONSES], ids=["openai", "anthropic", "responses"]
)
def test_a_too_deep_tool_list_is_refused_on_every_turn(fmt: InboundFormat) -> None:
    decode, memo = BodyDecodeMemo(), MessageMemo()
    deep = _tools(fmt, depth=40)  # 2 * 40 levels of schema
    for turns in (20, 21, 22):
        with pytest.raises(GatewayError) as err:
            _turn(fmt, decode, memo, _body(fmt, turns, deep))
        assert err.value.status == 400 and "nested deeper than 64" in err.value.message
    assert len(memo.members) == 0


def test_a_changed_tool_list_is_checked_again() -> None:
    """A list whose bytes changed decodes to a new object: the deep one is refused
    even after the shallow one was remembered."""
    decode, memo = BodyDecodeMemo(), MessageMemo()
    _turn(OPENAI, decode, memo, _body(OPENAI, 20, _tools(OPENAI)))
    with pytest.raises(GatewayError):
        _turn(OPENAI, decode, memo, _body(OPENAI, 21, _tools(OPENAI, depth=40)))


def test_identity_not_equality_and_the_bounds() -> None:
    now = [0.0]
    memo = MemberMemo(limit=3, max_bytes=100_000, idle_seconds=60, clock=lambda: now[0])
    a, twin = [1, 2], [1, 2]
    memo.put(CHECKED, a, True, 20_000)
    assert memo.checked(a) and not memo.checked(twin)
    memo.put(CHECKED, twin, True, 100)  # a body too small for the decode memo
    assert not memo.checked(twin)
    held = [[i] for i in range(4)]
    for h in held:
        memo.put(CHECKED, h, True, 20_000)
    assert len(memo) == 3 and not memo.checked(a)  # the oldest went first
    memo.put(CHECKED, [9], True, 70_000)  # over the byte budget: more go
    assert memo.bytes_held <= 100_000
    now[0] = 61.0
    assert not memo.checked(held[-1])  # idle too long
    calls = []
    assert memo.parsed("k", a, 20_000, lambda: calls.append(1) or "x") == "x"
    assert memo.parsed("k", a, 20_000, lambda: calls.append(1) or "y") == "x"
    assert calls == [1]
    memo.clear()
    assert len(memo) == 0 and memo.bytes_held == 0


def test_over_http_tools_turn_deep_after_memo_hits() -> None:
    """Three turns with the same tools are served, then the same conversation with
    a tool nested too deep is refused with a 400 in OpenAI's error format."""
    with ServerThread(create_sim_app()) as sim:
        cfg = parse_config(gateway_config(sim.url))
        with ServerThread(create_app(cfg)) as gw, httpx.Client(timeout=10) as http:
            url = f"{gw.url}/v1/chat/completions"
            headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
            for turns in (20, 21, 22):
                body = _body(OPENAI, turns, _tools(OPENAI))
                body["model"] = "openai/gpt-5-mini"
                r = http.post(url, content=json.dumps(body), headers=headers)
                assert r.status_code == 200, r.text
            assert len(gw.app.gateway.intake.message_memo.members) >= 2
            body = _body(OPENAI, 23, _tools(OPENAI, depth=40))
            body["model"] = "openai/gpt-5-mini"
            r = http.post(url, content=json.dumps(body), headers=headers)
            assert r.status_code == 400, r.text
            assert "nested deeper than 64" in r.json()["error"]["message"]
