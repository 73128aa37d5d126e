"""core.idle_lru and the per-session transcript memo it bounds (issue #27 item 7:
memory climbed through a soak because per-session summaries were only dropped after
50,000 sessions)."""

from __future__ import annotations

import pytest

from tiergate.core.idle_lru import IdleLru
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
