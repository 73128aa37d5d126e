"""Scale-out on a real Redis Cluster (three primaries started here): sessions spread
over the primaries by their hash tags, each session's tier state, strikes and pins
in one slot, the commit split per slot (the guarded session write first, then
the router's and workspace's counters), and the commit races of
test_escalation_redis.py run again on the cluster backend."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar

import pytest
from redis.crc import key_slot

import test_escalation_redis as races
from escalation_support import REQ_STRIKE, SessionDriver, make_router
from redis_cluster_support import cli, keys_on, primaries
from test_escalation_redis import (  # the same races, on the cluster backend
    test_racing_identical_escalations_merge_into_one_ratchet,
    test_ratchets_never_exceed_max_per_session_under_races,
    test_share_counters_count_every_concurrent_request,
    test_stale_transitions_after_an_escalation_are_dropped,
    test_stale_writers_cannot_clobber_a_committed_escalation,
    test_tier_state_round_trips_and_expires_on_redis,
)
from tiergate.routing.affinity import channel_pin_key, model_pin_key
from tiergate.routing.caps import counters_from_values, router_share_keys, workspace_share_keys
from tiergate.routing.session import SessionId, session_scope
from tiergate.routing.tier_state import tier_state_key
from tiergate.state.base import Incr, TransactFn, Write
from tiergate.state.cluster_keys import key_tag
from tiergate.state.redis_cluster import RedisClusterStore

T = TypeVar("T")
SESSIONS = 48

__all__ = [
    "test_racing_identical_escalations_merge_into_one_ratchet",
    "test_ratchets_never_exceed_max_per_session_under_races",
    "test_share_counters_count_every_concurrent_request",
    "test_stale_transitions_after_an_escalation_are_dropped",
    "test_stale_writers_cannot_clobber_a_committed_escalation",
    "test_tier_state_round_trips_and_expires_on_redis",
]


def new_store(cluster: list[int], prefix: str, seed: int = 0) -> RedisClusterStore:
    return RedisClusterStore(
        f"redis://127.0.0.1:{cluster[seed % len(cluster)]}",
        prefix,
        connect_timeout=5.0,
        socket_timeout=5.0,
    )


@pytest.fixture
async def redis_store(cluster: list[int]) -> AsyncIterator[RedisClusterStore]:
    """Overrides conftest's: the escalation races imported above run on the cluster."""
    store = new_store(cluster, f"t{uuid.uuid4().hex[:8]}:")
    try:
        yield store
    finally:
        await store.delete_prefix()
        await store.close()


class CountingClusterStore(RedisClusterStore):
    """Counts transaction bodies into the races module's counter (its assertions read it)."""

    async def transact(self, keys: Sequence[str], fn: TransactFn[T], retries: int = 16) -> T:
        def counted(values: list[bytes | None]) -> Any:
            races.CountingRedisStore.runs += 1
            return fn(values)

        return await super().transact(keys, counted, retries)


@pytest.fixture
async def racers(
    redis_store: RedisClusterStore, cluster: list[int]
) -> AsyncIterator[list[RedisClusterStore]]:
    """Overrides the races module's: RACERS cluster clients, seeded from every node."""
    races.CountingRedisStore.runs = 0
    stores = [
        CountingClusterStore(
            f"redis://127.0.0.1:{cluster[i % len(cluster)]}",
            redis_store.key_prefix,
            connect_timeout=5.0,
            socket_timeout=5.0,
        )
        for i in range(races.RACERS)
    ]
    yield stores
    await asyncio.gather(*(s.close() for s in stores))


def scope_of(i: int) -> str:
    return session_scope("w1", SessionId(f"session-{i}", "header", True))


def per_node(cluster: list[int], prefix: str) -> dict[int, list[str]]:
    return {p: keys_on(p, prefix + "{*") for p in primaries(cluster)}


async def test_sessions_spread_over_every_primary(redis_store: RedisClusterStore) -> None:
    """Many sessions' tier state (with strikes) and pins, through the real commit:
    keys on all three primaries, each session's keys in one slot, counters exact."""
    router = make_router("auto", max_per_session=1)
    drivers = []
    for i in range(SESSIONS):
        d = SessionDriver(redis_store, router, scope=scope_of(i), workspace="w1")
        await d.turn()
        if i % 3 == 0:
            await d.turn(tier="strong")  # explicit escalation
        elif i % 3 == 1:
            await d.turn(strikes=[REQ_STRIKE])
            await d.turn(strikes=[REQ_STRIKE])  # two strikes: escalates by strikes
        drivers.append(d)
    for i, d in enumerate(drivers):
        state = await d.state()
        assert state is not None
        want = {0: ("strong", "explicit"), 1: ("strong", "strikes"), 2: ("base", None)}[i % 3]
        assert (state.tier, state.trigger) == want, i
        assert len(state.seen_turns) == 1 + (i % 3 == 0) + 2 * (i % 3 == 1)

    turns = sum(len(d.history) for d in drivers)
    strong = sum(t.commit.tier == "strong" for d in drivers for t in d.history)
    now = drivers[0].now
    values = await redis_store.get_many(router_share_keys("coding", now, 2))
    c = counters_from_values(values)
    assert (c.requests, c.strong_requests) == (turns, strong)
    wvalues = await redis_store.get_many(workspace_share_keys("w1", now, 2))
    assert counters_from_values(wvalues).requests == turns


async def test_keys_land_on_every_primary_and_sessions_keep_one_slot(
    redis_store: RedisClusterStore, cluster: list[int]
) -> None:
    router = make_router("auto")
    for i in range(SESSIONS):
        scope = scope_of(i)
        d = SessionDriver(redis_store, router, scope=scope, workspace="w1")
        await d.turn(tier="strong" if i % 2 else None)
        pins = [
            Write(model_pin_key(scope, "coding"), b"openai/gpt-5-mini", 300),
            Write(channel_pin_key(scope, "openai/gpt-5-mini"), b'["oa",1,"x"]', 300),
        ]
        await redis_store.set_many(pins)
    nodes = per_node(cluster, redis_store.key_prefix)
    assert len(nodes) == 3 and all(nodes.values()), {p: len(k) for p, k in nodes.items()}
    # every session's tier state and pins share one tag, so one slot (Redis checks it)
    families: dict[str, set[str]] = {}
    for keys in nodes.values():
        for k in keys:
            tag, _, logical = k[len(redis_store.key_prefix) + 1 :].partition("}:")
            families.setdefault(tag, set()).add(logical.split(":")[0] + ":" + logical.split(":")[1])
    sessions = {t: f for t, f in families.items() if t.startswith("s:")}
    assert len(sessions) == SESSIONS
    assert all(f == {"esc:tier", "aff:m", "aff:c"} for f in sessions.values())
    assert "r:coding" in families and "w:w1" in families  # counters in their own slots
    # the slot the server computes is the one the store groups by
    key = tier_state_key(scope_of(0), "coding")
    physical = redis_store._k(key)
    assert int(cli(cluster[0], "CLUSTER", "KEYSLOT", physical)) == redis_store.slot_of(key)
    assert key_slot(physical.encode()) == redis_store.slot_of(model_pin_key(scope_of(0), "coding"))


async def test_a_request_read_spans_slots_in_one_call(redis_store: RedisClusterStore) -> None:
    scope = scope_of(1)
    keys = [
        tier_state_key(scope, "coding"),
        *router_share_keys("coding", 0.0, 2),
        *workspace_share_keys("w1", 0.0, 2),
        "config:version",
    ]
    assert len({redis_store.slot_of(k) for k in keys}) == 4
    await redis_store.set_many([Write(k, str(i).encode()) for i, k in enumerate(keys)])
    assert await redis_store.get_many(keys) == [str(i).encode() for i in range(len(keys))]
    backwards = await redis_store.get_many(list(reversed(keys)))
    assert backwards == [str(i).encode() for i in reversed(range(len(keys)))]


async def test_split_commit_guard_first_then_counters(redis_store: RedisClusterStore) -> None:
    scope = scope_of(2)
    tier = tier_state_key(scope, "coding")
    pin = model_pin_key(scope, "coding")
    share = "esc:share:coding:20260101:req"
    wshare = "esc:wshare:w1:20260101:req"
    incrs = [Incr(share, 1.0, 60), Incr(wshare, 1.0, 60)]
    assert {key_tag(share), key_tag(wshare), key_tag(tier)} == {"r:coding", "w:w1", key_tag(pin)}

    # the guard fails: nothing is applied in any slot
    await redis_store.set(tier, b"v1")
    assert not await redis_store.apply_batch(
        [Write(tier, b"v2"), Write(pin, b"m")], incrs, (tier, b"v0")
    )
    assert await redis_store.get_many([tier, pin, share, wshare]) == [b"v1", None, None, None]

    # the guard holds: the session's slot atomically, then the counters' slots
    assert await redis_store.apply_batch(
        [Write(tier, b"v2"), Write(pin, b"m")], incrs, (tier, b"v1")
    )
    assert await redis_store.get_many([tier, pin, share, wshare]) == [b"v2", b"m", b"1", b"1"]

    # a counter slot failing after the guarded write: the session write stands,
    # the call still reports it, the failed counter is not applied (under-count)
    await redis_store.set(wshare, b"not a number")
    ok = await redis_store.apply_batch([Write(tier, b"v3")], incrs, (tier, b"v2"))
    assert ok
    assert await redis_store.get_many([tier, share, wshare]) == [b"v3", b"2", b"not a number"]

    # without a guard a failing part is raised (after the other parts were applied)
    with pytest.raises(ValueError):
        await redis_store.apply_batch([], incrs)
    assert await redis_store.get(share) == b"3"


async def test_transact_refuses_keys_of_several_slots(redis_store: RedisClusterStore) -> None:
    keys = [tier_state_key(scope_of(3), "coding"), "esc:share:coding:20260101:req"]

    def fn(values: list[bytes | None]) -> tuple[list[Write], None]:
        return [Write(k, b"x") for k in keys], None

    with pytest.raises(ValueError, match="slots"):
        await redis_store.transact(keys, fn)
    assert await redis_store.transact(keys[:1], lambda v: ([Write(keys[0], b"y")], 7)) == 7
    assert await redis_store.get(keys[0]) == b"y"


async def test_delete_prefix_clears_every_node(
    cluster: list[int], redis_store: RedisClusterStore
) -> None:
    other = new_store(cluster, f"o{uuid.uuid4().hex[:8]}:")
    try:
        keys = [tier_state_key(scope_of(i), "coding") for i in range(30)] + ["config:version"]
        await redis_store.set_many([Write(k, b"1") for k in keys])
        await other.set("config:version", b"keep")
        assert await redis_store.delete_prefix() == len(keys)
        assert not any(per_node(cluster, redis_store.key_prefix).values())
        assert await other.get("config:version") == b"keep"
    finally:
        await other.delete_prefix()
        await other.close()
