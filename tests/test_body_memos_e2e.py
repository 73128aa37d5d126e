"""Over HTTP: with the body decode and encode memos (formats/body_decode.py,
formats/body_encode.py) the upstream receives byte for byte what it receives
without them, turn after turn of long agent sessions, in both wire formats."""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.core.slot_groups import HISTORY_CACHE_MB
from tiergate.formats.body_decode import BodyDecodeMemo
from tiergate.formats.body_encode import BodyEncodeMemo
from tiergate.formats.message_memo import MessageMemo
from tiergate.sim.app import create_sim_app

Asgi = Callable[[Any, Any, Any], Awaitable[None]]


def _recording(app: Asgi, bodies: list[bytes]) -> Asgi:
    """The simulator, with every request body it receives kept in `bodies`."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        messages = []
        while True:
            message = await receive()
            messages.append(message)
            if not message.get("more_body"):
                break
        bodies.append(b"".join(m.get("body", b"") for m in messages))

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await app(scope, replay, send)

    return asgi


def _without_memos(app: Any) -> None:
    """The gateway as it was before the memos: every body decoded, parsed and encoded whole."""
    gateway = app.gateway
    gateway.intake.body_memo.min_bytes = 1 << 62
    gateway.intake.message_memo.max_bytes = -1  # stores nothing
    for provider in gateway.providers.values():
        provider.http.encoder = types.SimpleNamespace(
            dumps=orjson.dumps, encode=lambda body: [orjson.dumps(body)]
        )


def _openai_turns(turns: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " * 900},
        {"role": "user", "content": "Fix the failing test in utils.py."},
    ]
    out = []
    for t in range(turns):
        out.append({"model": "openai/gpt-5-mini", "messages": list(history), "max_tokens": 64})
        call = {"id": f"c{t}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{t}", "content": f"out {t} " * 300})
    return out


def _anthropic_turns(turns: int) -> list[dict[str, Any]]:
    """Claude Code's shape: the cache marker on the latest user turn moves each turn."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]}
    ]
    out = []
    for t in range(turns):
        marked = [dict(m) for m in history]
        last = dict(marked[-1])
        last["content"] = [{**last["content"][-1], "cache_control": {"type": "ephemeral"}}]
        marked[-1] = last
        out.append(
            {
                "model": "anthropic/claude-sonnet-4-5",
                "max_tokens": 64,
                "system": [{"type": "text", "text": "You are Claude Code. " * 900}],
                "messages": marked,
                "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
            }
        )
        use = {"type": "tool_use", "id": f"toolu_{t}", "name": "Bash", "input": {"c": "ls"}}
        history.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{t}", "content": f"f{t} " * 300}
        history.append({"role": "user", "content": [result]})
    return out


def _send(url: str, path: str, bodies: list[dict[str, Any]]) -> None:
    headers = {"authorization": f"Bearer {TOKEN}", "anthropic-version": "2023-06-01"}
    with httpx.Client(timeout=20) as http:
        for body in bodies:
            r = http.post(f"{url}{path}", content=orjson.dumps(body), headers=headers)
            assert r.status_code == 200, r.text


def test_upstream_bodies_are_identical_with_and_without_the_memos() -> None:
    """`off` is the operator's switch, server.history_cache_mb: 0 (nothing kept);
    `plain` bypasses the memos' code altogether."""
    seen: dict[str, list[bytes]] = {"memo": [], "plain": [], "off": []}
    for name in seen:
        with ServerThread(_recording(create_sim_app(), seen[name])) as sim:
            raw = gateway_config(sim.url)
            if name == "off":
                raw["server"]["history_cache_mb"] = 0
            app = create_app(parse_config(raw))
            with ServerThread(app) as gw:
                if name == "plain":
                    _without_memos(app)
                _send(gw.url, "/v1/chat/completions", _openai_turns(12))
                _send(gw.url, "/v1/messages", _anthropic_turns(12))
                intake = app.gateway.intake
                encoder = app.gateway.providers["anthropic"].http.encoder
                if name == "memo":  # the memos were in play, not bypassed
                    assert len(intake.body_memo) >= 2
                    assert intake.body_memo.bytes_held > 0
                    assert encoder.reused >= 12  # the last Anthropic body's history, reused
                if name == "off":
                    assert intake.body_memo.bytes_held == intake.message_memo.bytes_held == 0
                    assert encoder.bytes_held == encoder.reused == 0
    assert len(seen["memo"]) == len(seen["plain"]) == len(seen["off"]) == 24
    for with_memo, without, off in zip(seen["memo"], seen["plain"], seen["off"], strict=True):
        assert with_memo == without == off


def _metric(text: str, name: str, memo: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith(f'{name}{{memo="{memo}"}}'))
    return float(line.rsplit(" ", 1)[1])


def test_a_full_history_cache_keeps_its_conversations_and_says_so_in_metrics() -> None:
    """server.history_cache_mb: 1 against three active 400 KB conversations: the
    two held go on being continued, the third is not kept, and /metrics shows
    it (tiergate_history_cache_turned_away_total) with the bytes held."""
    with ServerThread(create_sim_app()) as sim:
        raw = gateway_config(sim.url)
        raw["server"]["history_cache_mb"] = 1
        app = create_app(parse_config(raw))
        with ServerThread(app) as gw:
            histories = [
                [
                    {"role": "system", "content": "You are a coding agent. " * 100},
                    {"role": "user", "content": f"task {n}: " + "context " * 50_000},
                ]
                for n in range(3)
            ]
            for turn in range(3):
                for history in histories:
                    history.append({"role": "user", "content": f"turn {turn}"})
                    body = {"model": "openai/gpt-5-mini", "messages": history, "max_tokens": 8}
                    _send(gw.url, "/v1/chat/completions", [body])
            with httpx.Client(timeout=10) as http:
                text = http.get(f"{gw.url}/metrics").text
    memo = app.gateway.intake.body_memo
    assert len(memo) == 2 and memo.turned_away >= 2  # the third, on each later turn
    for name in ("decode", "parse"):
        assert _metric(text, "tiergate_history_cache_conversations", name) == 2
        assert _metric(text, "tiergate_history_cache_turned_away_total", name) >= 2
    assert 0 < _metric(text, "tiergate_history_cache_bytes", "decode") <= 1024 * 1024


def test_the_default_bound_is_one_figure_for_every_history_memo() -> None:
    """Without server.history_cache_mb each memo keeps 64 MiB (HISTORY_CACHE_MB's
    note: 16 held too few agent sessions at once), the config's default and the
    memos' own default alike."""
    assert HISTORY_CACHE_MB == 64
    with ServerThread(create_sim_app()) as sim:
        app = create_app(parse_config(gateway_config(sim.url)))
    intake = app.gateway.intake
    memos = [intake.body_memo, intake.message_memo, intake.message_memo.members]
    memos += [p.http.encoder for p in app.gateway.providers.values()]
    memos += [BodyDecodeMemo(), MessageMemo(), BodyEncodeMemo()]
    assert {m.max_bytes for m in memos} == {64 * 1024 * 1024}
