"""Per-workspace rate limits and budgets: shared across instances through the store."""

from __future__ import annotations

import pytest

from tiergate.gateway.errors import GatewayError
from tiergate.gateway.limits import Limiter, WorkspaceLimits, seconds_to_next_minute
from tiergate.state.base import StateStore, StateUnavailable
from tiergate.state.memory import MemoryStore
from tiergate.state.redis import RedisStore


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def test_rate_limit_per_minute_with_retry_after() -> None:
    clock = Clock(1_800_000_030.0)  # 30 s into a minute
    lim = Limiter(MemoryStore(), clock)
    limits = WorkspaceLimits(rate_limit_rpm=3)
    for _ in range(3):
        await lim.admit("ws", limits)
    with pytest.raises(GatewayError) as err:
        await lim.admit("ws", limits)
    assert err.value.status == 429 and err.value.code == "rate_limit_exceeded"
    assert err.value.headers == {"retry-after": "30"}
    await lim.admit("other-ws", limits)  # workspaces are independent
    clock.t += 30  # next minute
    await lim.admit("ws", limits)


async def test_budget_refuses_after_spend_until_next_day() -> None:
    clock = Clock(1_800_000_000.0)
    lim = Limiter(MemoryStore(), clock)
    scope = [("ws", WorkspaceLimits(budget_usd_per_day=0.01), "workspace")]
    await lim.settle(await lim.reserve(scope, 0.001), 0.006)
    await lim.settle(await lim.reserve(scope, 0.001), 0.006)
    with pytest.raises(GatewayError) as err:
        await lim.reserve(scope, 0.001)
    assert err.value.code == "budget_exceeded"
    assert 0 < int(err.value.headers["retry-after"]) <= 86400  # type: ignore[index]
    clock.t += 86400
    await lim.reserve(scope, 0.001)


async def test_limits_hold_across_instances_sharing_redis(redis_store: RedisStore) -> None:
    clock = Clock(1_800_000_000.0)
    a, b = Limiter(redis_store, clock), Limiter(redis_store, clock)
    limits = WorkspaceLimits(rate_limit_rpm=4)
    for lim in (a, b, a, b):
        await lim.admit("ws", limits)
    for lim in (a, b):
        with pytest.raises(GatewayError):
            await lim.admit("ws", limits)


class DownStore(MemoryStore):
    async def incr(self, key: str, amount: float = 1.0, ttl: float | None = None) -> float:
        raise StateUnavailable("down")

    async def get(self, key: str) -> bytes | None:
        raise StateUnavailable("down")


async def test_rate_limits_fail_open_and_budgets_hold_locally_when_the_store_is_down() -> None:
    store: StateStore = DownStore()
    lim = Limiter(store)
    limits = WorkspaceLimits(rate_limit_rpm=1, budget_usd_per_day=2.5)
    for _ in range(3):
        await lim.admit("ws", limits)  # the rate limit fails open
    for _ in range(3):  # the budget holds on this instance's own counters
        await lim.settle(await lim.reserve([("ws", limits, "workspace")], 1.0), 1.0)
    with pytest.raises(GatewayError) as err:
        await lim.reserve([("ws", limits, "workspace")], 1.0)
    assert err.value.code == "budget_exceeded"


def test_retry_after_never_zero() -> None:
    assert seconds_to_next_minute(120.0) == 60
    assert seconds_to_next_minute(179.999) == 1


def test_rate_limit_over_http_in_each_format() -> None:
    import httpx

    from servers import TOKEN, ServerThread, gateway_config
    from tiergate.app import create_app
    from tiergate.config_load import parse_config
    from tiergate.sim.app import create_sim_app

    with ServerThread(create_sim_app()) as sim:
        cfg = gateway_config(sim.url)
        cfg["workspaces"][0]["rate_limit_rpm"] = 2
        with (
            ServerThread(create_app(parse_config(cfg))) as gw,
            httpx.Client(headers={"authorization": f"Bearer {TOKEN}"}, timeout=10) as c,
        ):
            body = {
                "model": "openai/gpt-5-mini",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
            }
            codes = [
                c.post(f"{gw.url}/v1/chat/completions", json=body).status_code for _ in range(2)
            ]
            assert codes == [200, 200]
            r = c.post(f"{gw.url}/v1/chat/completions", json=body)
            assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
            assert r.json()["error"]["code"] == "rate_limit_exceeded"
            r = c.post(f"{gw.url}/v1/messages", json=body)
            assert r.status_code == 429 and r.json()["type"] == "error"
