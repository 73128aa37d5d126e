"""apply_batch: the one-round-trip guarded commit, same contract on every backend."""

from __future__ import annotations

import asyncio

import pytest

from tiergate.state.base import Incr, StateStore, Write
from tiergate.state.redis import RedisStore


async def test_batch_applies_writes_deletes_and_increments(any_store: StateStore) -> None:
    await any_store.set("gone", b"x")
    ok = await any_store.apply_batch(
        [Write("a", b"1", 60), Write("gone", None)], [Incr("n", 2.5, 60), Incr("n", 1.0, 60)]
    )
    assert ok
    assert await any_store.get_many(["a", "gone"]) == [b"1", None]
    assert await any_store.incr("n", 0.0) == pytest.approx(3.5)


async def test_guard_blocks_everything_when_the_value_moved(any_store: StateStore) -> None:
    await any_store.set("state", b"v2")
    ok = await any_store.apply_batch(
        [Write("state", b"v3"), Write("pin", b"p")], [Incr("c", 1.0)], guard=("state", b"v1")
    )
    assert not ok
    assert await any_store.get_many(["state", "pin", "c"]) == [b"v2", None, None]
    assert await any_store.apply_batch([Write("state", b"v3")], guard=("state", b"v2"))
    assert await any_store.get("state") == b"v3"


async def test_guard_on_an_absent_key(any_store: StateStore) -> None:
    assert await any_store.apply_batch([Write("k", b"1")], guard=("k", None))
    assert not await any_store.apply_batch([Write("k", b"2")], guard=("k", None))
    assert await any_store.get("k") == b"1"


async def test_batch_is_one_round_trip_on_redis(redis_store: RedisStore) -> None:
    calls = 0
    real = redis_store._wire.evalsha

    async def counting(*a: object, **kw: object) -> object:
        nonlocal calls
        calls += 1
        return await real(*a, **kw)  # type: ignore[arg-type]

    redis_store._wire.evalsha = counting  # type: ignore[method-assign]
    await redis_store.apply_batch(
        [Write(f"w{i}", b"x", 30) for i in range(5)],
        [Incr(f"i{i}", 1.0, 30) for i in range(5)],
        guard=("g", None),
    )
    assert calls == 1


async def test_racing_guarded_batches_only_one_wins(redis_store: RedisStore) -> None:
    await redis_store.set("state", b"v0")
    results = await asyncio.gather(
        *(
            redis_store.apply_batch(
                [Write("state", f"v{i}".encode())], [Incr("wins", 1.0)], guard=("state", b"v0")
            )
            for i in range(1, 9)
        )
    )
    assert sum(results) == 1
    assert await redis_store.incr("wins", 0.0) == 1.0
