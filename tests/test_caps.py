"""Share caps: the pure comparison, day buckets, and counting through a real store."""

from __future__ import annotations

from tiergate.routing.caps import (
    ShareCounters,
    count_share,
    counters_from_values,
    day_stamps,
    router_share_keys,
    session_cap_reached,
    share_exceeded,
    workspace_share_keys,
)
from tiergate.state.base import StateStore
from tiergate.state.memory import MemoryStore

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def test_share_cap_is_strictly_greater() -> None:
    at_cap = ShareCounters(requests=100, strong_requests=20, spend=1, strong_spend=0.2)
    over = ShareCounters(requests=100, strong_requests=21, spend=1, strong_spend=0.21)
    assert not share_exceeded(at_cap, 20, "requests", 20)
    assert not share_exceeded(at_cap, 20, "spend", 20)
    assert share_exceeded(over, 20, "requests", 20)
    assert share_exceeded(over, 20, "spend", 20)


def test_warmup_floor_of_twenty_requests() -> None:
    """1 escalation out of 2 requests must not read as 50 % and lock the feature."""
    early = ShareCounters(requests=19, strong_requests=19, spend=1, strong_spend=1)
    assert not share_exceeded(early, 20, "requests", 20)
    assert share_exceeded(ShareCounters(20, 19, 1, 1), 20, "requests", 20)


def test_basis_selects_the_measured_share() -> None:
    cheap_strong = ShareCounters(requests=100, strong_requests=50, spend=10.0, strong_spend=1.0)
    assert share_exceeded(cheap_strong, 20, "requests", 20)
    assert not share_exceeded(cheap_strong, 20, "spend", 20)
    assert cheap_strong.request_share == 0.5 and cheap_strong.spend_share == 0.1


def test_spend_basis_with_nothing_spent_falls_back_to_requests() -> None:
    free = ShareCounters(requests=100, strong_requests=50)
    assert free.spend_share is None and free.share("spend") == 0.5
    assert share_exceeded(free, 20, "spend", 20)


def test_cap_of_zero_disables_escalation_and_hundred_never_binds() -> None:
    assert share_exceeded(ShareCounters(), 0, "spend", 20)
    assert not share_exceeded(ShareCounters(100, 100, 1, 1), 100, "spend", 20)


def test_session_cap() -> None:
    assert not session_cap_reached(0, 1)
    assert session_cap_reached(1, 1)
    assert session_cap_reached(0, 0)


def test_day_stamps_span_the_trailing_window() -> None:
    assert day_stamps(T0 + 3600, 2) == ["20260101", "20251231"]
    assert day_stamps(T0 - 1, 1) == ["20251231"]
    keys = router_share_keys("coding", T0, 2)
    assert keys[:4] == [
        "esc:share:coding:20260101:req",
        "esc:share:coding:20260101:req_strong",
        "esc:share:coding:20260101:spend",
        "esc:share:coding:20260101:spend_strong",
    ]
    assert len(keys) == 8 and workspace_share_keys("ws", T0, 3)[0].startswith("esc:wshare:ws:")


def test_unreadable_counters_count_as_zero() -> None:
    c = counters_from_values([b"3", None, b"junk", b"0.5", b"2", b"1", None, None])
    assert c == ShareCounters(requests=5, strong_requests=1, spend=0.0, strong_spend=0.5)


async def test_counting_sums_across_days_and_scopes(any_store: StateStore) -> None:
    store = any_store
    yesterday = T0 - 3600
    await count_share(store, "coding", "ws", yesterday, 2, strong=True, cost=0.5)
    await count_share(store, "coding", "ws", T0 + 60, 2, strong=False, cost=0.25)
    await count_share(store, "coding", None, T0 + 120, 2, strong=False, cost=0.0)
    router = counters_from_values(await store.get_many(router_share_keys("coding", T0 + 200, 2)))
    assert router == ShareCounters(requests=3, strong_requests=1, spend=0.75, strong_spend=0.5)
    ws = counters_from_values(await store.get_many(workspace_share_keys("ws", T0 + 200, 2)))
    assert ws == ShareCounters(requests=2, strong_requests=1, spend=0.75, strong_spend=0.5)
    # Two days later yesterday's bucket has left the window.
    later = counters_from_values(await store.get_many(router_share_keys("coding", T0 + 86400, 2)))
    assert later.requests == 2 and later.strong_requests == 0


async def test_counters_expire_one_day_after_the_window() -> None:
    clock = [0.0]
    store = MemoryStore(clock=lambda: clock[0])
    await count_share(store, "coding", None, T0, 2, strong=True, cost=1.0)
    clock[0] = 3 * 86400 - 1
    assert await store.get(f"esc:share:coding:{day_stamps(T0, 1)[0]}:req") == b"1"
    clock[0] = 3 * 86400 + 1
    assert await store.get(f"esc:share:coding:{day_stamps(T0, 1)[0]}:req") is None
