"""The message memo (formats/message_memo.py): a parse that reuses the conversation's
previous parse is the parse without it, whatever the sequence of bodies; its
bounds hold; and over HTTP a deep new message is still refused."""

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
from tiergate.formats.message_memo import MessageMemo
from tiergate.formats.openai import parse_request, render_request
from tiergate.formats.openai import request as openai_request
from tiergate.sim.app import create_sim_app

texts = st.text(alphabet="ab \n{}", max_size=12)
system_msg = st.builds(
    lambda t, role: {"role": role, "content": t}, texts, st.sampled_from(["system", "developer"])
)
user_msg = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, texts),
    st.builds(lambda t: {"role": "user", "content": [{"type": "text", "text": t}]}, texts),
)
assistant_msg = st.one_of(
    st.builds(lambda t: {"role": "assistant", "content": t}, texts),
    st.builds(
        lambda i, a: {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": a}}
            ],
        },
        st.integers(0, 3),
        texts,
    ),
)
tool_msg = st.builds(
    lambda i, t: {"role": "tool", "tool_call_id": f"c{i}", "content": t}, st.integers(0, 3), texts
)
message = st.one_of(system_msg, user_msg, assistant_msg, tool_msg)


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "m", "messages": copy.deepcopy(messages)}


@settings(max_examples=300, deadline=None)
@given(conversations(message))
def test_a_memoised_parse_equals_the_parse_without_the_memo(bodies: list[list[Any]]) -> None:
    memo = MessageMemo()
    for messages in bodies:
        try:
            plain = parse_request(body(messages))
        except Exception as err:  # the same refusal either way
            try:
                parse_request(body(messages), memo, 100)
            except Exception as again:  # noqa: BLE001 - compared with the first
                assert type(again) is type(err) and str(again) == str(err)
                continue
            raise AssertionError("the memo accepted what the codec refuses") from err
        memoised = parse_request(body(messages), memo, 100)
        assert memoised == plain
        for deepseek in (False, True):  # rendering reused messages is memoised too
            assert render_request(memoised, "up", deepseek=deepseek) == render_request(
                plain, "up", deepseek=deepseek
            )


def test_the_shared_prefix_is_reused_not_parsed_again() -> None:
    memo = MessageMemo()
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    first = parse_request(body(history), memo, 10)
    history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    reuse = memo.match("openai", body(history)["messages"])
    assert reuse is not None and reuse.count == 2  # the system prompt and the task
    second = parse_request(body(history), memo, 10)
    assert second.messages[0] is first.messages[0]  # the same parsed object
    assert second.system == first.system


def test_a_system_message_after_the_conversation_started_stays_in_place() -> None:
    """Why only a prefix is reused: a system message's meaning depends on what precedes it."""
    memo = MessageMemo()
    a = [{"role": "user", "content": "u"}, {"role": "system", "content": "s"}]
    parse_request(body([*a, {"role": "user", "content": "x"}]), memo, 10)
    b = [{"role": "user", "content": "u"}, {"role": "system", "content": "s"}]
    got = parse_request(body([*b, {"role": "user", "content": "y"}]), memo, 10)
    assert [m.role for m in got.messages] == ["user", "system", "user"] and not got.system


def test_bounds_slots_bytes_and_idle_time() -> None:
    now = [0.0]
    memo = MessageMemo(limit=2, max_bytes=1000, idle_seconds=60, clock=lambda: now[0])

    def conv(i: int) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"task {i}"}, {"role": "user", "content": "go"}]

    for i in range(3):
        parse_request(body(conv(i)), memo, 100)
        now[0] += 1
    # a new conversation does not evict live ones (core/slot_groups.py): not kept
    assert len(memo) == 2 and memo.match("openai", conv(2)) is None
    assert memo.match("openai", conv(0)) is not None
    grown = [*conv(0), {"role": "assistant", "content": "ok"}, {"role": "user", "content": "on"}]
    parse_request(body(grown), memo, 950)  # over the byte budget: the least recent goes
    assert memo.bytes_held <= 1000 and len(memo) == 1
    assert memo.match("openai", conv(1)) is None and memo.match("openai", grown) is not None
    now[0] += 61
    assert memo.match("openai", grown) is None  # idle too long
    parse_request(body(conv(4)), memo, 5000)  # larger than the whole budget: not kept
    assert memo.match("openai", conv(4)) is None


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"a": node}
    return node


def test_over_http_a_deep_new_message_is_still_refused_after_memo_hits() -> None:
    with ServerThread(create_sim_app()) as sim:
        cfg = parse_config(gateway_config(sim.url))
        with ServerThread(create_app(cfg)) as gw, httpx.Client(timeout=10) as http:
            url = f"{gw.url}/v1/chat/completions"
            headers = {"authorization": f"Bearer {TOKEN}"}
            history: list[dict[str, Any]] = [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Say hi."},
            ]
            for turn in range(3):
                r = http.post(
                    url, json={"model": "openai/gpt-5-mini", "messages": history}, headers=headers
                )
                assert r.status_code == 200, r.text
                history += [
                    {"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]},
                    {"role": "user", "content": f"Again ({turn})."},
                ]
            deep = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": _nested(80)},
                    }
                ],
            }
            r = http.post(
                url,
                json={"model": "openai/gpt-5-mini", "messages": [*history, deep]},
                headers=headers,
            )
            assert r.status_code == 400 and "nested deeper than 64" in r.json()["error"]["message"]
            assert len(gw.app.gateway.intake.message_memo) >= 1  # the memo was in play


def test_the_render_memo_stays_within_its_character_budget(monkeypatch: Any) -> None:
    monkeypatch.setattr(openai_request, "RENDER_MEMO_CHARS", 10_000)
    monkeypatch.setattr(openai_request, "_render_memo", {})
    monkeypatch.setattr(openai_request, "_render_memo_chars", 0)
    memo = MessageMemo()
    history: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for turn in range(50):
        history += [
            {"role": "assistant", "content": "x" * 500},
            {"role": "user", "content": f"turn {turn}"},
        ]
        req = parse_request(body(history), memo, 100)
        assert render_request(req, "up") == render_request(parse_request(body(history)), "up")
        assert openai_request._render_memo_chars <= 10_000
    assert 0 < len(openai_request._render_memo) < 2 * len(history)


def test_a_malformed_role_is_refused_not_a_crash() -> None:
    """The memo's signature hashes the first messages' roles: a list there is the
    codec's 400, not a TypeError in the memo (found by the Responses fuzz test)."""
    memo = MessageMemo()
    for role in ([], {"a": 1}):
        raws = [{"role": role, "content": "x"}, {"role": "user", "content": "y"}]
        assert memo.match("openai", raws) is None


def test_two_live_conversations_opening_alike_each_reuse_their_whole_history() -> None:
    """Issue #30's twin defect: a task run twice at once sends the same first two
    messages; each conversation must keep its own slot, not take the other's."""
    memo = MessageMemo()
    opening = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    old = [*opening]
    for i in range(30):
        old += [{"role": "assistant", "content": f"a{i}"}, {"role": "user", "content": f"u{i}"}]
        parse_request(body(old), memo, 10)
    young = [*opening]
    for i in range(5):
        young += [{"role": "assistant", "content": f"b{i}"}, {"role": "user", "content": f"v{i}"}]
        reuse = memo.match("openai", body(young)["messages"])
        assert reuse is not None and reuse.count == (2 if i == 0 else len(young) - 2)
        parse_request(body(young), memo, 10)
        old += [{"role": "assistant", "content": f"c{i}"}, {"role": "user", "content": f"w{i}"}]
        reuse = memo.match("openai", body(old)["messages"])
        assert reuse is not None and reuse.count == len(old) - 2  # its own history, whole
        parse_request(body(old), memo, 10)
    assert len(memo) == 2


def test_many_live_conversations_opening_alike_each_keep_their_own_slot() -> None:
    """Forty at once (more than a key kept before session 25): every continuation
    reuses its own whole history."""
    memo = MessageMemo()
    opening = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    histories = {
        n: [*opening, *({"role": "user", "content": f"context {n}.{i}"} for i in range(6))]
        for n in range(40)
    }
    for turn in range(4):
        for n, history in histories.items():
            history += [
                {"role": "assistant", "content": f"a{n}.{turn}"},
                {"role": "user", "content": f"u{n}.{turn}"},
            ]
            reuse = memo.match("openai", body(history)["messages"])
            if turn:
                assert reuse is not None and reuse.count == len(history) - 2
            parse_request(body(history), memo, 10)
    assert len(memo) == 40
