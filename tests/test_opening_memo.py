"""routing.session.OpeningMemo: the session fingerprint and the conversation key
remembered by the identities of the body objects the opening is read from.
Why they are remembered: about 100 us a request for Claude Code's 60 KB system
prompt (issue #30). What must hold: the same answer as reading the text again,
for shared objects, equal copies and edited ones alike."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.routing import conversation, session
from tiergate.routing.session import OPENING_MEMO_MIN_CHARS, OpeningMemo, opening_parts

texts = st.sampled_from(["", "fix it", "x" * (OPENING_MEMO_MIN_CHARS + 1), "y" * 5000])
content = st.one_of(
    texts, st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts), max_size=2)
)
message = st.builds(
    lambda role, c: {"role": role, "content": c},
    st.sampled_from(["system", "developer", "user", "assistant"]),
    content,
)
body = st.one_of(
    st.builds(lambda m: {"messages": m}, st.lists(message, max_size=4)),
    st.builds(lambda s, m: {"system": s, "messages": m}, content, st.lists(message, max_size=4)),
    st.builds(lambda i, t: {"instructions": i, "input": t}, texts, texts),
)


def _fresh(b: dict[str, Any]) -> tuple[Any, Any]:
    """Both values read again from the text, with empty memos."""
    session._fingerprints.clear()
    conversation._keys.clear()
    return session.fingerprint(b), conversation.conversation_key(b)


@settings(max_examples=300, deadline=None)
@given(body, st.integers(0, 3))
def test_remembered_values_equal_a_fresh_reading(b: dict[str, Any], edit: int) -> None:
    first = (session.fingerprint(b), conversation.conversation_key(b))
    assert first == _fresh(b)
    again = (session.fingerprint(b), conversation.conversation_key(b))  # same objects
    assert again == first
    equal = copy.deepcopy(b)  # other objects, same content
    assert (session.fingerprint(equal), conversation.conversation_key(equal)) == first
    edited = copy.deepcopy(b)
    parts = opening_parts(edited)
    if parts is not None and isinstance(parts[-1], dict) and edit:
        parts[-1]["content"] = f"edited {edit}"  # a new body with another task
        got = (session.fingerprint(edited), conversation.conversation_key(edited))
        assert got == _fresh(edited)


def test_a_long_opening_is_read_once_while_its_objects_come_back() -> None:
    calls: list[tuple[str, str]] = []
    memo: OpeningMemo[str] = OpeningMemo(lambda o: calls.append(o) or o[0][:3])
    system = [{"type": "text", "text": "s" * 60_000}]
    user = {"role": "user", "content": "task"}
    for turn in range(5):
        parts = opening_parts({"system": system, "messages": [user, *[{"role": "tool"}] * turn]})
        assert parts is not None and memo(parts) == "sss"
    assert len(calls) == 1
    assert memo(opening_parts({"system": copy.deepcopy(system), "messages": [user]})) == "sss"
    assert len(calls) == 2  # equal but other objects: read again, same answer


def test_short_openings_are_not_kept_and_the_budget_holds() -> None:
    memo: OpeningMemo[int] = OpeningMemo(lambda o: len(o[0]), max_chars=60_000)
    memo(("z" * (OPENING_MEMO_MIN_CHARS - 10), {"role": "user", "content": "hi"}))
    assert len(memo) == 0  # under the floor: its body's objects are new every turn
    for _ in range(10):
        memo(("z" * 17_000, {"role": "user", "content": "hi"}))
    assert 1 <= len(memo) <= 3


def test_over_http_a_conversation_reads_its_opening_once() -> None:
    """The gateway's own decode memo hands later turns the same opening objects,
    so the fingerprint of a Claude Code-shaped session is computed twice in five
    turns: on turn 1, and on turn 2, whose members before `messages` (here the
    system prompt) come from the decode memo's own first reading of them."""
    import httpx
    import orjson

    from servers import TOKEN, ServerThread, gateway_config
    from tiergate.app import create_app
    from tiergate.config_load import parse_config
    from tiergate.sim.app import create_sim_app

    calls: list[tuple[str, str]] = []
    memo = session._fingerprints
    compute = memo._compute
    memo.clear()
    memo._compute = lambda o: calls.append(o) or compute(o)
    system = [{"type": "text", "text": "You are a coding agent. " * 900}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    headers = {"authorization": f"Bearer {TOKEN}", "anthropic-version": "2023-06-01"}
    try:
        with (
            ServerThread(create_sim_app()) as sim,
            ServerThread(create_app(parse_config(gateway_config(sim.url)))) as gw,
            httpx.Client(timeout=20) as http,
        ):
            for t in range(5):
                body = {
                    "model": "anthropic/claude-sonnet-4-5",
                    "max_tokens": 64,
                    "system": system,
                    "messages": history,
                }
                r = http.post(f"{gw.url}/v1/messages", content=orjson.dumps(body), headers=headers)
                assert r.status_code == 200, r.text
                history = [
                    *history,
                    {"role": "assistant", "content": f"step {t}"},
                    {"role": "user", "content": f"output {t} " * 200},
                ]
    finally:
        memo._compute = compute
    assert len(calls) == 2
