"""Commit races on real Redis: many gateway connections committing one session at once.

Each racing commit uses its own RedisStore (its own connection pool), so the
WATCH/MULTI/EXEC transactions genuinely interleave at the server; a counting
wrapper proves that conflicts and re-runs really happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar

import pytest
import redis.asyncio as aioredis

from escalation_support import SessionDriver, make_router
from tiergate.config import RouterConfig
from tiergate.routing.escalation import EscalationDecision
from tiergate.routing.escalation_commit import CommitResult, commit_escalation
from tiergate.routing.escalation_read import explain_escalation
from tiergate.routing.tier_state import TierState, TurnOutcome
from tiergate.state.base import TransactFn
from tiergate.state.redis import RedisStore

T = TypeVar("T")
RACERS = 16


class CountingRedisStore(RedisStore):
    """Counts how often transaction bodies run: more runs than commits = real conflicts."""

    runs = 0

    async def transact(self, keys: Sequence[str], fn: TransactFn[T], retries: int = 16) -> T:
        def counted(values: list[bytes | None]) -> Any:
            CountingRedisStore.runs += 1
            return fn(values)

        return await super().transact(keys, counted, retries)


@pytest.fixture
async def racers(redis_store: RedisStore, redis_url: str) -> AsyncIterator[list[RedisStore]]:
    """RACERS stores on separate connection pools, sharing the test's key prefix.

    Generous timeouts: a burst of new connections on a busy CI box must not turn
    into StateUnavailable, which would test the timeouts rather than the races.
    """
    CountingRedisStore.runs = 0
    stores = [
        CountingRedisStore(
            redis_url, key_prefix=redis_store.prefix, connect_timeout=5.0, socket_timeout=5.0
        )
        for _ in range(RACERS)
    ]
    yield stores
    await asyncio.gather(*(s.close() for s in stores))


async def commit_all(
    stores: list[RedisStore], decisions: list[EscalationDecision], now: float
) -> list[CommitResult]:
    """Commit every decision at once, each through its own connection."""
    outcome = TurnOutcome(True, served_tier="strong", served_model="m", cost_usd=0.01)
    return list(
        await asyncio.gather(
            *(
                commit_escalation(stores[i % len(stores)], d, outcome, now)
                for i, d in enumerate(decisions)
            )
        )
    )


async def resolve_many(d: SessionDriver, n: int, **kw: Any) -> list[EscalationDecision]:
    """n requests resolved against the same snapshot (same instant, nothing committed)."""
    return [await d.resolve(d.inputs(**kw)) for _ in range(n)]


def router(**esc: Any) -> RouterConfig:
    return make_router("auto", **esc)


async def test_racing_identical_escalations_merge_into_one_ratchet(
    redis_store: RedisStore, racers: list[RedisStore]
) -> None:
    d = SessionDriver(redis_store, router())
    await d.turn()
    d.now += 30
    decisions = await resolve_many(d, RACERS, tier="strong")
    assert all(x.reason == "explicit" for x in decisions)

    results = await commit_all(racers, decisions, d.now)

    assert CountingRedisStore.runs > RACERS, "no transaction ever conflicted: not a race"
    assert sum(r.applied.count("escalate") for r in results) == 1
    assert sum(r.merged.count("escalate") for r in results) == RACERS - 1
    assert sum(len(r.events) for r in results) == 1  # one `escalated` audit row
    state = await d.state()
    assert state is not None and state.tier == "strong" and state.escalations_used == 1
    assert len(state.seen_turns) == RACERS + 1  # every racing turn was recorded: none lost


async def test_stale_writers_cannot_clobber_a_committed_escalation(
    redis_store: RedisStore, racers: list[RedisStore]
) -> None:
    d = SessionDriver(redis_store, router())
    await d.turn(delta=0.72)
    d.now += 30
    escalation = await d.resolve(d.inputs(delta=0.72))
    stale = await resolve_many(d, RACERS - 1, delta=0.1)  # decided on the base snapshot
    assert escalation.reason == "difficulty" and all(s.session_tier == "base" for s in stale)

    results = await commit_all(racers, [*stale, escalation], d.now)

    assert sum(r.applied.count("escalate") for r in results) == 1
    state = await d.state()
    assert state is not None and state.tier == "strong" and state.escalations_used == 1
    assert len(state.seen_turns) == RACERS + 1


async def test_stale_transitions_after_an_escalation_are_dropped(
    redis_store: RedisStore, racers: list[RedisStore]
) -> None:
    """Resets and escalations decided before a committed escalation lose, all at once."""
    d = SessionDriver(redis_store, router(max_per_session=5))
    await d.turn()
    d.now += 30
    winner = await d.resolve(d.inputs(tier="strong"))
    resets = await resolve_many(d, RACERS // 2, tier="base")
    asks = await resolve_many(d, RACERS // 2, tier="strong")
    await commit_all(racers[:1], [winner], d.now)

    results = await commit_all(racers, [*resets, *asks], d.now + 1)

    assert all(r.stale == ("reset",) for r in results[: RACERS // 2])
    assert all(r.merged == ("escalate",) for r in results[RACERS // 2 :])
    state = await d.state()
    assert state is not None and state.tier == "strong" and state.escalations_used == 1


async def test_ratchets_never_exceed_max_per_session_under_races(
    redis_store: RedisStore, racers: list[RedisStore]
) -> None:
    d = SessionDriver(redis_store, router(max_per_session=3))
    await d.turn()
    denied = 0
    for _ in range(5):
        d.now += 30
        asks = await resolve_many(d, RACERS // 2, tier="strong")
        denied += sum(a.reason == "denied:session_cap" for a in asks)
        await commit_all(racers, asks, d.now)
        await d.turn(tier="base")
    state = await d.state()
    assert state is not None and state.escalations_used == 3
    assert denied == 2 * (RACERS // 2)


async def test_share_counters_count_every_concurrent_request(
    redis_store: RedisStore, racers: list[RedisStore]
) -> None:
    d = SessionDriver(redis_store, router())
    d.scope = None
    decisions = await resolve_many(d, 50)
    results = await commit_all(racers, decisions, d.now)
    assert all(r.committed for r in results), [r.error for r in results if not r.committed]
    assert await redis_store.get("esc:share:coding:20260101:req") == b"50"
    assert await redis_store.get("esc:share:coding:20260101:spend") == b"0.5"


async def test_diagnostics_change_no_redis_state(redis_store: RedisStore, redis_url: str) -> None:
    d = SessionDriver(redis_store, router(percentile=95), workspace="default")
    await d.turn(tier="strong")
    await d.turn(strikes=[], delta=0.72)

    async def dump() -> dict[bytes, tuple[bytes | None, int]]:
        raw = aioredis.from_url(redis_url)
        try:
            keys = [k async for k in raw.scan_iter(match=redis_store.prefix + "*")]
            return {k: (await raw.get(k), int(await raw.pttl(k))) for k in keys}
        finally:
            await raw.aclose()

    before = await dump()
    assert len(before) > 3  # tier state, share buckets, histogram
    for kw in ({"tier": "base"}, {"tier": "strong"}, {"once": True}, {"delta": 0.1}):
        decision = await explain_escalation(redis_store, d.inputs(**kw))  # type: ignore[arg-type]
        assert decision.applies and decision.intents
    after = await dump()
    assert {k: v for k, (v, _) in after.items()} == {k: v for k, (v, _) in before.items()}
    for key, (_, ttl) in after.items():  # only time passed: no TTL was set again
        # (compared in ms: 10 s buckets failed whenever a TTL crossed a boundary)
        assert 0 <= before[key][1] - ttl < 5_000, key


async def test_tier_state_round_trips_and_expires_on_redis(redis_store: RedisStore) -> None:
    d = SessionDriver(redis_store, router(tier_ttl_seconds=0.3))
    await d.turn(tier="strong")
    state = await d.state()
    assert isinstance(state, TierState) and state.tier == "strong" and state.trigger == "explicit"
    await asyncio.sleep(0.4)
    assert await d.state() is None
