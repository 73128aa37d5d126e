"""The message memo on Anthropic Messages bodies (Claude Code's format, issue #30): a
parse that reuses the conversation's previous parse is the parse without it, for
every sequence of bodies, including `clear_at` system messages whose emptying
must not leak into a later request that shares them; and over HTTP a Claude
Code-shaped session is served the same with the memo warm."""

from __future__ import annotations

import copy
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from memo_support import conversations
from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.formats.anthropic import parse_request, render_request
from tiergate.formats.anthropic import render as anthropic_render
from tiergate.formats.message_memo import MessageMemo
from tiergate.formats.openai import parse_request as openai_parse
from tiergate.formats.render_memo import IdentityMemo
from tiergate.sim.app import create_sim_app

texts = st.text(alphabet="ab \n{}", max_size=12)
text_block = st.builds(lambda t: {"type": "text", "text": t}, texts)
user_msg = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, texts),
    st.builds(
        lambda b: {"role": "user", "content": b}, st.lists(text_block, min_size=1, max_size=2)
    ),
    st.builds(
        lambda i, t, err: {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": t, "is_error": err}
            ],
        },
        st.integers(0, 3),
        texts,
        st.booleans(),
    ),
)
assistant_msg = st.one_of(
    st.builds(lambda t: {"role": "assistant", "content": t}, texts),
    st.builds(
        lambda i, t: {
            "role": "assistant",
            "content": [
                {"type": "text", "text": t},
                {"type": "tool_use", "id": f"t{i}", "name": "f", "input": {"a": t}},
            ],
        },
        st.integers(0, 3),
        texts,
    ),
)
system_msg = st.builds(
    lambda t, clear: {
        "role": "system",
        "content": t,
        **({"clear_at": "next_user_message"} if clear else {}),
    },
    texts,
    st.booleans(),
)
message = st.one_of(user_msg, user_msg, assistant_msg, system_msg)


def body(messages: list[dict[str, Any]], system: str = "sys") -> dict[str, Any]:
    return {"model": "m", "max_tokens": 64, "system": system, "messages": copy.deepcopy(messages)}


@st.composite
def sessions(draw: st.DrawFn) -> list[tuple[list[dict[str, Any]], str]]:
    """Bodies of interleaved conversations (memo_support); the body's system prompt
    may change from one request to the next."""
    return [
        (messages, draw(st.sampled_from(["sys", "other", ""])))
        for messages in draw(conversations(message))
    ]


@settings(max_examples=300, deadline=None)
@given(sessions())
def test_a_memoised_parse_equals_the_parse_without_the_memo(
    bodies: list[tuple[list[Any], str]],
) -> None:
    memo = MessageMemo()
    for messages, system in bodies:
        try:
            plain = parse_request(body(messages, system))
        except Exception as err:  # the same refusal either way
            try:
                parse_request(body(messages, system), memo, 100)
            except Exception as again:  # noqa: BLE001 - compared with the first
                assert type(again) is type(err) and str(again) == str(err)
                continue
            raise AssertionError("the memo accepted what the codec refuses") from err
        memoised = parse_request(body(messages, system), memo, 100)
        assert memoised == plain
        assert render_request(memoised, "up") == render_request(plain, "up")


def test_a_cleared_system_message_is_not_cleared_in_the_memo() -> None:
    """Emptied for the request that has a later user message, the system message
    is still whole for a request that shares it but has no user message after it."""
    memo = MessageMemo()
    note = {"role": "system", "content": "until next ask", "clear_at": "next_user_message"}
    history = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ok"},
        note,
        {"role": "user", "content": "next"},
    ]
    first = parse_request(body(history), memo, 10)
    assert first.messages[2].content == []
    trimmed = [*history[:3], {"role": "assistant", "content": "more"}]
    again = parse_request(body(trimmed), memo, 10)
    assert memo.match("anthropic", body(trimmed)["messages"]) is not None
    assert again == parse_request(body(trimmed))
    assert again.messages[2].text() == "until next ask"


def test_the_shared_prefix_is_reused_not_parsed_again() -> None:
    memo = MessageMemo()
    history = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    first = parse_request(body(history), memo, 10)
    history.append({"role": "user", "content": "more"})
    second = parse_request(body(history, system="a new system prompt"), memo, 10)
    assert second.messages[0] is first.messages[0]  # the same parsed object
    assert second.system[0].text == "a new system prompt"


def test_over_http_a_claude_code_session_is_served_with_the_memo_warm() -> None:
    """Turn after turn on /v1/messages through the real server, answered by the
    simulator; the memo holds the conversation, and a deep new message is still
    refused after memo hits (its depth is walked, the shared prefix's is not)."""
    with ServerThread(create_sim_app()) as sim:
        cfg = parse_config(gateway_config(sim.url))
        with ServerThread(create_app(cfg)) as gw, httpx.Client(timeout=10) as http:
            url = f"{gw.url}/v1/messages"
            headers = {"x-api-key": TOKEN, "anthropic-version": "2023-06-01"}
            history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the parser."}]

            def send(messages: list[dict[str, Any]]) -> httpx.Response:
                payload = {**body(messages), "model": "anthropic/claude-sonnet-4-5"}
                return http.post(url, json=payload, headers=headers)

            for turn in range(4):
                r = send(history)
                assert r.status_code == 200, r.text
                assert r.json()["type"] == "message"
                history += [
                    {"role": "assistant", "content": r.json()["content"] or "ok"},
                    {"role": "user", "content": f"Step {turn} done."},
                ]
            assert len(gw.app.gateway.intake.message_memo) >= 1  # the memo was in play
            node: dict[str, Any] = {}
            for _ in range(80):
                node = {"a": node}
            deep = {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": node}],
            }
            r = send([*history, deep, {"role": "user", "content": "and?"}])
            assert r.status_code == 400 and "nested deeper than 64" in r.json()["error"]["message"]


def test_a_cache_breakpoint_does_not_stick_to_a_remembered_message() -> None:
    """For an OpenAI client on an Anthropic upstream the render marks the last block
    for prompt caching; next turn that message is history, and its remembered
    rendering must not carry the mark (the marked block is a copy)."""
    memo = MessageMemo()
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
    ]
    for turn in range(3):
        req = openai_parse({"model": "m", "messages": copy.deepcopy(history)}, memo, 10)
        fresh = openai_parse({"model": "m", "messages": copy.deepcopy(history)})
        assert render_request(req, "up") == render_request(fresh, "up")
        marks = [
            b
            for m in render_request(req, "up")["messages"]
            for b in m["content"]
            if "cache_control" in b
        ]
        assert len(marks) == 1  # only the last block of the conversation
        history += [
            {"role": "assistant", "content": f"reply {turn}"},
            {"role": "user", "content": f"more {turn}"},
        ]


def test_the_render_memo_stays_within_its_budget(monkeypatch: Any) -> None:
    small: IdentityMemo[object] = IdentityMemo(20_000)
    monkeypatch.setattr(anthropic_render, "_memo", small)
    memo = MessageMemo()
    history: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for turn in range(60):
        history += [
            {"role": "assistant", "content": "x" * 500},
            {"role": "user", "content": f"turn {turn}"},
        ]
        req = parse_request(body(history), memo, 100)
        assert render_request(req, "up") == render_request(parse_request(body(history)), "up")
        assert small.chars <= 20_000
    assert 0 < len(small) < 2 * len(history)
