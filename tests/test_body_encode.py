"""The upstream body encode memo: byte for byte orjson.dumps (formats/body_encode.py)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from memo_support import conversations
from tiergate.formats.body_encode import MAX_REENCODED, MIN_ELEMENTS, BodyEncodeMemo

_scalar = st.one_of(
    st.integers(-3, 3), st.sampled_from([1.0, 0.5, True, False, None]), st.text(max_size=6)
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant"])},
    optional={"content": st.one_of(_scalar, st.lists(_scalar, max_size=2)), "n": _scalar},
)


def _bodies(history: list[list[Any]], shared: bool) -> list[dict[str, Any]]:
    """Upstream bodies of a conversation; with `shared`, each reuses the previous
    body's message objects where equal (as the render memo hands them over)."""
    out: list[dict[str, Any]] = []
    last: list[Any] = []
    for i, messages in enumerate(history):
        if shared:
            messages = [
                last[j] if j < len(last) and last[j] == m and i % 3 else m
                for j, m in enumerate(messages)
            ]
        last = messages
        pad = [{"role": "system", "content": "p"}] * MIN_ELEMENTS
        out.append({"model": f"m{i % 2}", "messages": pad + messages, "stream": bool(i % 2)})
    return out


@settings(max_examples=300, deadline=None)
@given(conversations(_message), st.booleans())
def test_byte_for_byte_orjson(history: list[list[Any]], shared: bool) -> None:
    memo = BodyEncodeMemo()
    for body in _bodies(history, shared):
        assert memo.dumps(body) == orjson.dumps(body)


def test_equal_but_differently_encoded_elements_are_not_reused() -> None:
    """1, 1.0 and True are equal in Python; their JSON is not."""
    memo = BodyEncodeMemo()
    base = [{"role": "user", "content": str(i)} for i in range(MIN_ELEMENTS)]
    for value in (1, 1.0, True, 1):
        body = {"messages": [*base, {"role": "user", "n": value}], "model": "m"}
        assert memo.dumps(body) == orjson.dumps(body)


def test_a_growing_conversation_reuses_the_encoded_history() -> None:
    memo = BodyEncodeMemo()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s" * 100}]
    for _ in range(20):
        messages.append({"role": "tool", "content": f"result {len(messages)}"})
        body = {"model": "m", "messages": [dict(messages[0]), *messages[1:]]}  # system afresh
        stored = len(memo)
        assert memo.dumps(body) == orjson.dumps(body)
        assert memo.reused == (len(messages) - 1 if stored else 0)
    assert len(memo) == 1 and memo.bytes_held == len(orjson.dumps(body))
    # every message rendered afresh: a few compared by their bytes, no more
    body = {"model": "m", "messages": [dict(m) for m in messages]}
    assert memo.dumps(body) == orjson.dumps(body)
    assert memo.reused == MAX_REENCODED


def test_a_long_conversation_goes_out_in_a_few_pieces() -> None:
    """200 turns: each body's pieces join to orjson's bytes, the kept history is
    handed over as pieces (no copy of it a turn), and a slot holds about log2 of
    the turns in pieces (each turn's new messages one, merged while the newer is
    at least as long), so a write never has many."""
    memo = BodyEncodeMemo()
    system = {"role": "system", "content": "s" * 5000}
    messages: list[dict[str, Any]] = [system]
    most = 0
    for turn in range(200):
        messages += [{"role": "assistant", "content": f"a{turn}"}, {"role": "tool", "content": "t"}]
        afresh = turn % 2 == 0  # the system message rendered anew: compared by its bytes
        body = {"model": "m", "messages": [dict(system) if afresh else system, *messages[1:]]}
        pieces = memo.encode(body)
        assert b"".join(pieces) == orjson.dumps(body)
        kept = len(messages) - 2 >= MIN_ELEMENTS  # the last body had a slot
        assert memo.reused == (len(messages) - 2 if kept else 0)
        most = max(most, len(pieces))
    assert most <= 2 + 12  # head and tail, and log2(200) + a few
    memo.encode({**body, "model": "n"})  # the same messages again: nothing to add
    assert b"".join(memo.encode(body)) == orjson.dumps(body)


def test_other_bodies_are_plain_orjson() -> None:
    memo = BodyEncodeMemo()
    for body in ({"input": "x"}, {"messages": [{"a": 1}]}, [1, 2], {"messages": "no"}):
        assert memo.dumps(body) == orjson.dumps(body)
    assert len(memo) == 0


def test_a_mutated_body_is_not_read_from_the_memo_by_equality() -> None:
    memo = BodyEncodeMemo()
    messages = [{"role": "user", "content": str(i)} for i in range(MIN_ELEMENTS + 2)]
    memo.dumps({"messages": messages})
    edited = copy.deepcopy(messages)
    edited[3]["content"] = "changed"
    assert memo.dumps({"messages": edited}) == orjson.dumps({"messages": edited})


def test_the_memo_is_bounded() -> None:
    memo = BodyEncodeMemo(limit=2, max_bytes=5_000)
    for i in range(6):
        msgs = [{"role": "user", "content": f"{i}{j}" * 100} for j in range(MIN_ELEMENTS)]
        memo.dumps({"messages": msgs})
    assert len(memo) <= 2 and memo.bytes_held <= 5_000


def test_two_live_conversations_opening_alike_each_reuse_their_whole_history() -> None:
    """Issue #30's twin defect: the same first two messages must not make two
    conversations take each other's slot."""
    memo = BodyEncodeMemo()
    opening = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    old, young = [*opening], [*opening]
    for i in range(40):
        old.append({"role": "tool", "content": f"old {i}"})
        assert memo.dumps({"messages": old}) == orjson.dumps({"messages": old})
    for i in range(10):
        young.append({"role": "tool", "content": f"young {i}"})
        assert memo.dumps({"messages": young}) == orjson.dumps({"messages": young})
        first = len(young) == MIN_ELEMENTS  # the opening alone is the old one's
        assert memo.reused == (0 if len(young) < MIN_ELEMENTS else 2 if first else len(young) - 1)
        old.append({"role": "tool", "content": f"old {40 + i}"})
        assert memo.dumps({"messages": old}) == orjson.dumps({"messages": old})
        assert memo.reused == len(old) - 1
    assert len(memo) == 2


def test_many_live_conversations_opening_alike_each_reuse_their_own_history() -> None:
    """Forty conversations whose first items are the same objects (one key, as the
    render memo hands them over): each continuation reuses its own encoding."""
    memo = BodyEncodeMemo()
    opening = [{"role": "system", "content": "s" * 100}, {"role": "user", "content": "task"}]
    histories: dict[int, list[Any]] = {
        n: [*opening, *({"role": "user", "content": f"context {n}.{i}"} for i in range(8))]
        for n in range(40)
    }
    for turn in range(4):
        for n, history in histories.items():
            history.append({"role": "tool", "content": f"result {n}.{turn}"})
            body = {"model": "m", "messages": list(history)}
            assert memo.dumps(body) == orjson.dumps(body)
            if turn:
                assert memo.reused == len(history) - 1  # all but this turn's message
    assert len(memo) == 40


def test_more_live_conversations_than_the_bound_holds_keep_those_held() -> None:
    """Sixteen conversations in turn against a bound that holds about ten: the
    held ones go on reusing their encoding (least-recently-used eviction left
    none to reuse); the rest are encoded whole, byte for byte the same."""
    opening = [{"role": "system", "content": "s" * 1000}, {"role": "user", "content": "task"}]
    histories: dict[int, list[Any]] = {
        n: [*opening, *({"role": "user", "content": f"context {n:02d}.{i}"} for i in range(6))]
        for n in range(16)
    }
    size = len(orjson.dumps({"messages": histories[0]}))
    memo = BodyEncodeMemo(max_bytes=10 * size + size // 2)
    reused_per_turn = []
    for turn in range(4):
        reused = 0
        for n, history in histories.items():
            history.append({"role": "tool", "content": f"r{n}.{turn}"})
            body = {"messages": list(history)}
            assert memo.dumps(body) == orjson.dumps(body)
            reused += memo.reused == len(history) - 1
        reused_per_turn.append(reused)
    assert reused_per_turn[0] == 0 and all(r >= 8 for r in reused_per_turn[1:])
