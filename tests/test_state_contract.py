"""The StateStore contract: every backend must pass the same tests (memory, Redis)."""

from __future__ import annotations

import asyncio

import orjson
import pytest
import redis as sync_redis

from tiergate.config import StateConfig
from tiergate.state import (
    MemoryStore,
    RedisStore,
    ResilientStore,
    StateStore,
    TransactionConflict,
    Write,
    make_store,
)

SHORT = 0.05  # seconds; Redis PEXPIRE handles 50 ms exactly


async def test_get_set_delete(any_store: StateStore) -> None:
    assert await any_store.get("a") is None
    await any_store.set("a", b"1")
    assert await any_store.get("a") == b"1"
    await any_store.set("a", b"\x00\xff binary")
    assert await any_store.get("a") == b"\x00\xff binary"
    await any_store.delete("a")
    assert await any_store.get("a") is None
    await any_store.delete("never-existed")  # deleting a missing key is fine


async def test_ttl_expiry(any_store: StateStore) -> None:
    await any_store.set("short", b"x", ttl=SHORT)
    await any_store.set("long", b"y", ttl=60)
    await any_store.set("forever", b"z")
    assert await any_store.get("short") == b"x"
    await asyncio.sleep(SHORT * 2)
    assert await any_store.get_many(["short", "long", "forever"]) == [None, b"y", b"z"]


async def test_set_without_ttl_clears_previous_ttl(any_store: StateStore) -> None:
    await any_store.set("k", b"1", ttl=SHORT)
    await any_store.set("k", b"2")
    await asyncio.sleep(SHORT * 2)
    assert await any_store.get("k") == b"2"


async def test_nonpositive_ttl_deletes(any_store: StateStore) -> None:
    await any_store.set("k", b"1")
    await any_store.set("k", b"2", ttl=0)
    assert await any_store.get("k") is None


async def test_get_many_order_and_missing(any_store: StateStore) -> None:
    await any_store.set("x", b"1")
    await any_store.set("z", b"3")
    assert await any_store.get_many(["z", "y", "x", "z"]) == [b"3", None, b"1", b"3"]
    assert await any_store.get_many([]) == []


async def test_set_many_with_delete_and_ttl(any_store: StateStore) -> None:
    await any_store.set("gone", b"old")
    await any_store.set_many(
        [Write("a", b"1"), Write("b", b"2", ttl=SHORT), Write("gone", None), Write("c", b"3", 60)]
    )
    assert await any_store.get_many(["a", "b", "gone", "c"]) == [b"1", b"2", None, b"3"]
    await asyncio.sleep(SHORT * 2)
    assert await any_store.get_many(["a", "b", "c"]) == [b"1", None, b"3"]
    await any_store.set_many([])  # no-op


async def test_incr_counts_and_expires(any_store: StateStore) -> None:
    assert await any_store.incr("n") == 1.0
    assert await any_store.incr("n", 2.5) == 3.5
    assert await any_store.incr("n", -0.5) == 3.0
    assert float(await any_store.get("n") or b"nan") == 3.0
    assert await any_store.incr("t", 1, ttl=SHORT) == 1.0
    assert await any_store.incr("t", 1, ttl=SHORT) == 2.0  # refreshes the TTL
    await asyncio.sleep(SHORT * 2)
    assert await any_store.get("t") is None
    assert await any_store.incr("t", 1, ttl=SHORT) == 1.0  # starts again after expiry


async def test_incr_without_ttl_keeps_existing_expiry(any_store: StateStore) -> None:
    await any_store.incr("k", 1, ttl=SHORT)
    await any_store.incr("k", 1)
    await asyncio.sleep(SHORT * 2)
    assert await any_store.get("k") is None


async def test_incr_on_non_number_is_value_error(any_store: StateStore) -> None:
    await any_store.set("s", b"not a number")
    with pytest.raises(ValueError):
        await any_store.incr("s")
    assert await any_store.get("s") == b"not a number"
    await any_store.set("n", b"1")
    with pytest.raises(ValueError):
        await any_store.incr("n", float("inf"))
    assert await any_store.get("n") == b"1"


async def test_compare_and_set(any_store: StateStore) -> None:
    # expected None = "only if absent"
    assert await any_store.compare_and_set("k", None, b"v1")
    assert not await any_store.compare_and_set("k", None, b"other")
    assert not await any_store.compare_and_set("k", b"wrong", b"v2")
    assert await any_store.get("k") == b"v1"
    assert await any_store.compare_and_set("k", b"v1", b"v2", ttl=SHORT)
    assert await any_store.get("k") == b"v2"
    await asyncio.sleep(SHORT * 2)
    assert await any_store.get("k") is None
    # value None deletes on match
    await any_store.set("d", b"x")
    assert await any_store.compare_and_set("d", b"x", None)
    assert await any_store.get("d") is None
    # the empty value is a value, distinct from absent
    assert await any_store.compare_and_set("e", None, b"")
    assert not await any_store.compare_and_set("e", None, b"again")
    assert await any_store.compare_and_set("e", b"", b"filled")


async def test_transact_reads_fresh_values_and_applies_writes(any_store: StateStore) -> None:
    await any_store.set("a", b"1")
    seen: list[list[bytes | None]] = []

    def swap(values: list[bytes | None]) -> tuple[list[Write], str]:
        seen.append(values)
        return [Write("a", values[1]), Write("b", values[0], ttl=60)], "done"

    assert await any_store.transact(["a", "b"], swap) == "done"
    assert seen[-1] == [b"1", None]
    assert await any_store.get_many(["a", "b"]) == [None, b"1"]


async def test_transact_without_writes_returns_result(any_store: StateStore) -> None:
    await any_store.set("a", b"1")
    assert await any_store.transact(["a"], lambda v: ([], v[0])) == b"1"
    assert await any_store.get("a") == b"1"


async def test_transact_concurrent_increments_are_not_lost(any_store: StateStore) -> None:
    """A real race on Redis: many tasks read-modify-write one JSON counter via WATCH."""
    calls = 0

    def bump(values: list[bytes | None]) -> tuple[list[Write], int]:
        nonlocal calls
        calls += 1
        count = orjson.loads(values[0])["n"] + 1 if values[0] is not None else 1
        return [Write("counter", orjson.dumps({"n": count}), ttl=60)], count

    tasks = 16
    results = await asyncio.gather(
        *(any_store.transact(["counter"], bump, retries=64) for _ in range(tasks))
    )
    final = orjson.loads(await any_store.get("counter") or b"{}")
    assert final == {"n": tasks}
    assert sorted(results) == list(range(1, tasks + 1))  # each task saw a distinct count
    if any_store.name == "redis":
        assert calls > tasks  # the race really happened and was retried


async def test_ping_and_close(any_store: StateStore) -> None:
    assert await any_store.ping() is True


# ---- backend-specific behaviour ------------------------------------------------


async def test_redis_transact_gives_up_under_constant_conflict(
    redis_store: RedisStore, redis_url: str
) -> None:
    """A writer that always sneaks in between read and EXEC exhausts the retries."""
    other = sync_redis.Redis.from_url(redis_url)
    calls = 0

    def interfere(values: list[bytes | None]) -> tuple[list[Write], None]:
        nonlocal calls
        calls += 1
        other.set(redis_store.prefix + "hot", str(calls))  # invalidates the WATCH
        return [Write("hot", b"mine")], None

    try:
        with pytest.raises(TransactionConflict):
            await redis_store.transact(["hot"], interfere, retries=3)
    finally:
        other.close()
    assert calls == 3
    assert await redis_store.get("hot") == b"3"  # our write never landed


async def test_redis_keys_are_prefixed(redis_store: RedisStore, redis_url: str) -> None:
    await redis_store.set("k", b"v", ttl=60)
    other = sync_redis.Redis.from_url(redis_url)
    try:
        assert other.get(redis_store.prefix + "k") == b"v"
        assert 0 < int(other.pttl(redis_store.prefix + "k")) <= 60_000
    finally:
        other.close()


async def test_memory_injectable_clock_and_pruning() -> None:
    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0], prune_batch=4)
    for i in range(10):
        await store.set(f"k{i}", b"v", ttl=10)
    await store.set("keep", b"v", ttl=100)
    now[0] += 9.999
    assert await store.get("k0") == b"v"
    now[0] += 0.001
    assert await store.get("k0") is None  # lazy expiry at exactly the deadline
    assert len(store) == 10
    # Each write pops at most prune_batch heap entries; k0's (already gone) is one of them.
    await store.set("trigger", b"v")
    assert len(store) == 10 + 1 - 3
    await store.set("trigger", b"v")
    await store.set("trigger", b"v")
    assert len(store) == 2  # keep + trigger
    assert await store.get("keep") == b"v"


async def test_memory_rewritten_key_is_not_pruned_by_its_old_expiry() -> None:
    now = [0.0]
    store = MemoryStore(clock=lambda: now[0])
    await store.set("k", b"old", ttl=1)
    await store.set("k", b"new", ttl=100)
    now[0] = 50
    await store.set("other", b"x")  # prunes the stale heap entry for k
    assert await store.get("k") == b"new"


async def test_memory_expiry_heap_stays_bounded() -> None:
    store = MemoryStore(clock=lambda: 0.0)
    for _ in range(10_000):
        await store.set("hot", b"v", ttl=3600)  # refreshed pin: one live key
    assert len(store._expiries) <= 2 * len(store) + 1024


def test_make_store_picks_backend() -> None:
    assert isinstance(make_store(StateConfig()), MemoryStore)
    store = make_store(StateConfig(backend="redis", url="redis://127.0.0.1:1/0", key_prefix="p:"))
    assert isinstance(store, ResilientStore)
    assert store.name == "redis"
    assert isinstance(store.inner, RedisStore) and store.inner.prefix == "p:"
