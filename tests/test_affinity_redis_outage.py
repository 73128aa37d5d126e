"""Redis goes down and comes back: requests keep working, affinity degrades and resumes.

Uses a private redis-server this test starts on a free port (never the shared 6379).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from uuid import uuid4

import pytest

import servers
from servers import PrivateRedis
from tiergate import metrics
from tiergate.routing.affinity import ChannelPin, plan_pin_writes, read_pins, write_pins
from tiergate.state import RedisStore, ResilientStore, StateUnavailable

MODEL = "openai/gpt-5-mini"


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    with servers.private_redis() as server:
        yield server


def _counter(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_affinity_degrades_while_redis_is_down_and_resumes(
    private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    store = ResilientStore(
        RedisStore(f"redis://127.0.0.1:{private_redis.port}/0", key_prefix=f"t:{uuid4().hex}:"),
        retry_interval=0.05,
    )
    writes = plan_pin_writes(
        "scope",
        router="coding",
        tier="base",
        model=MODEL,
        channel_pin=ChannelPin("oa", 1),
        channel_window=300,
        long_pin_eligible=True,
        backend_is_redis=True,
    )
    try:
        assert await write_pins(store, writes)
        pins = await read_pins(store, "scope", "coding", [MODEL])
        assert pins.model == MODEL and pins.channel_for(MODEL) == ChannelPin("oa", 1)

        private_redis.stop()
        errors_before = _counter(
            "tiergate_state_store_errors_total", {"backend": "redis", "op": "get_many"}
        )
        with caplog.at_level(logging.WARNING, logger="tiergate.state.resilient"):
            started = time.monotonic()
            for _ in range(5):
                pins = await read_pins(store, "scope", "coding", [MODEL])
                assert pins.degraded and pins.model is None and not pins.channels
                assert await write_pins(store, writes) is False
                await asyncio.sleep(0.06)  # past retry_interval: each read probes Redis again
            elapsed = time.monotonic() - started
        assert elapsed < 2.5, "a dead Redis must not stall requests"
        assert store.degraded
        outage_logs = [r for r in caplog.records if "unreachable" in r.getMessage()]
        assert len(outage_logs) == 1  # logged once per interval, not once per request
        errors = _counter(
            "tiergate_state_store_errors_total", {"backend": "redis", "op": "get_many"}
        )
        assert errors - errors_before == 5
        assert _counter("tiergate_state_store_degraded", {"backend": "redis"}) == 1

        private_redis.start()  # same port; empty (no persistence)
        await asyncio.sleep(0.06)
        with caplog.at_level(logging.WARNING, logger="tiergate.state.resilient"):
            assert await write_pins(store, writes)  # redis-py reconnects by itself
        assert not store.degraded
        assert any("reachable again" in r.getMessage() for r in caplog.records)
        assert _counter("tiergate_state_store_degraded", {"backend": "redis"}) == 0
        pins = await read_pins(store, "scope", "coding", [MODEL])
        assert not pins.degraded and pins.model == MODEL
    finally:
        await store.close()


async def test_fail_fast_inside_retry_interval(private_redis: PrivateRedis) -> None:
    store = ResilientStore(
        RedisStore(f"redis://127.0.0.1:{private_redis.port}/0", key_prefix="ff:"),
        retry_interval=60,
    )
    try:
        private_redis.stop()
        before = _counter("tiergate_state_store_errors_total", {"backend": "redis", "op": "get"})
        for _ in range(3):
            with pytest.raises(StateUnavailable):
                await store.get("k")
        after = _counter("tiergate_state_store_errors_total", {"backend": "redis", "op": "get"})
        assert after - before == 1  # only the first call reached the dead backend
        private_redis.start()
        assert await store.ping() is True  # health probes bypass the fail-fast window
        assert not store.degraded
        assert await store.get("k") is None
    finally:
        await store.close()
