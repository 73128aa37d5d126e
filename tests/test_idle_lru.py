"""core.idle_lru and the per-session transcript memo it bounds (issue #27 item 7:
memory climbed through a soak because per-session summaries were only dropped after
50,000 sessions)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.core.idle_lru import IdleLru, SizedLru
from tiergate.core.model import ChatRequest, Message, TextPart
from tiergate.routing import transcript
from tiergate.routing.transcript import TranscriptCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_idle_entries_expire_and_the_count_bound_drops_the_least_recently_used() -> None:
    clock = Clock()
    lru: IdleLru[str, int] = IdleLru(limit=3, idle_seconds=60, clock=clock)
    for key in "abc":
        lru.put(key, ord(key))
    lru.put("a", lru.pop("a") or 0)  # a is now the most recently used
    lru.put("d", 4)  # over the count bound: b, the least recently used, goes
    assert [lru.pop(k) is not None for k in "bcd"] == [False, True, True]
    lru.put("c", 3)
    clock.now += 61  # everything idle past the bound
    assert lru.pop("c") is None  # an idle entry is not returned...
    lru.put("e", 5)
    assert len(lru) == 1  # ...and a put drops every expired one


def test_idle_lru_rejects_no_bound() -> None:
    with pytest.raises(ValueError):
        IdleLru(limit=0, idle_seconds=1)
    with pytest.raises(ValueError):
        IdleLru(limit=1, idle_seconds=0)


def _req(session: int, turn: int) -> ChatRequest:
    msgs = [Message("user", [TextPart(f"session {session} task")])]
    for i in range(turn):
        msgs += [
            Message("assistant", [TextPart(f"answer {i}")]),
            Message("user", [TextPart(f"next step {i}")]),
        ]
    return ChatRequest(model="m", messages=msgs)


def test_transcript_summaries_of_ended_sessions_do_not_pile_up() -> None:
    """A soak's sessions end after a few turns; the memo must level off at the
    sessions active within the idle bound, not grow until its count bound."""
    clock = Clock()
    cache = TranscriptCache(idle_seconds=600, clock=clock)
    for s in range(3000):  # one new 3-turn session per second, for 50 minutes
        for turn in range(3):
            cache.summarize(f"s{s}", _req(s, turn))
        clock.now += 1.0
    assert len(cache) <= 601
    assert cache.limit == transcript.TRANSCRIPT_CACHE_LIMIT <= 10_000


def test_an_active_session_keeps_its_summary() -> None:
    clock = Clock()
    cache = TranscriptCache(clock=clock)
    first = cache.summarize("s", _req(0, 1))
    clock.now += transcript.TRANSCRIPT_IDLE_SECONDS - 1
    again = cache.summarize("s", _req(0, 2))
    assert again.count == first.count + 2 and len(cache) == 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "get", "pop", "wait"]),
            st.sampled_from("abcde"),
            st.integers(0, 40),
        ),
        max_size=40,
    )
)
def test_sized_lru_keeps_its_three_bounds_like_a_plain_model(ops: list[Any]) -> None:
    """SizedLru against a list-based model: same entries, sizes and order after
    every operation, and never over a bound once a put has run."""
    clock = Clock()
    lru: SizedLru[str, int] = SizedLru(limit=3, max_size=60, idle_seconds=10, clock=clock)
    model: list[tuple[str, float, int]] = []  # (key, last put, size), oldest first

    def fresh(entry: tuple[str, float, int]) -> bool:
        return clock.now - entry[1] <= 10

    for op, key, n in ops:
        held = next((e for e in model if e[0] == key), None)
        if op == "wait":
            clock.now += n / 4
        elif op == "get":
            assert lru.get(key) == (held[2] if held and fresh(held) else None)
        elif op == "pop":
            assert lru.pop(key) == (held[2] if held and fresh(held) else None)
            model = [e for e in model if e[0] != key]
        else:
            lru.put(key, n, n)
            model = [e for e in model if e[0] != key] + [(key, clock.now, n)]
            while model and (
                not fresh(model[0]) or len(model) > 3 or sum(e[2] for e in model) > 60
            ):
                model.pop(0)
            assert len(lru) <= 3 and lru.size <= 60
        assert len(lru) == len(model) and lru.size == sum(e[2] for e in model)
    lru.clear()
    assert len(lru) == 0 and lru.size == 0
