"""Budgets hold under concurrency (issue #27 item 3): each request reserves its
worst-case cost at admission and settles to the billed cost, so 50 concurrent
requests on a budget worth about 10 are served at most 11 times, on the memory
store, on Redis and on two gateways sharing one Redis. Real HTTP + simulator."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import httpx
import pytest

import servers
from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.limits import Limiter, WorkspaceLimits, budget_key
from tiergate.gateway.reservations import Reservation
from tiergate.sim.app import SimSettings, create_sim_app
from tiergate.state.base import StateStore, StateUnavailable
from tiergate.state.memory import MemoryStore, parse_number
from tiergate.state.redis import RedisStore

KEY_TOKEN = "tgk-budget-test-token"
KEY_ID = "vk_" + "b" * 16
CONCURRENT = 50
BODY = {
    "model": "openai/gpt-5-mini",
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "Summarise the budget rule in one line."}],
}


# ---- the limiter on each backend ---------------------------------------------------------


async def _race(limiters: list[Limiter], budget: float, each: float) -> list[Reservation]:
    """CONCURRENT reservations of `each` on one key budget, spread over `limiters`."""
    scope = [("vk", WorkspaceLimits(budget_usd_per_day=budget), "key")]

    async def one(i: int) -> Reservation | None:
        try:
            return await limiters[i % len(limiters)].reserve(scope, each)
        except GatewayError as err:
            assert err.status == 429 and err.code == "budget_exceeded"
            return None

    held = await asyncio.gather(*(one(i) for i in range(CONCURRENT)))
    return [h for h in held if h is not None]


async def test_concurrent_holds_stop_at_the_budget(any_store: StateStore) -> None:
    lim = Limiter(any_store)
    held = await _race([lim], budget=10 * 0.003, each=0.003)
    assert 10 <= len(held) <= 11
    for h in held:  # billed at a third of the worst case
        await lim.settle(h, 0.001)
        await lim.settle(h, 0.001)  # a second settle is a no-op
    spent = parse_number(await any_store.get(budget_key("vk", time.time())))
    assert spent == pytest.approx(0.001 * len(held))


async def test_two_instances_on_one_redis_share_the_holds(redis_store: RedisStore) -> None:
    other = RedisStore(redis_store.url, key_prefix=redis_store.prefix)
    try:
        held = await _race([Limiter(redis_store), Limiter(other)], budget=0.03, each=0.003)
        assert 10 <= len(held) <= 11
    finally:
        await other.close()


async def test_a_released_hold_leaves_no_spend(memory_store: MemoryStore) -> None:
    lim = Limiter(memory_store)
    scope = [("ws", WorkspaceLimits(budget_usd_per_day=1.0, budget_usd_per_month=5.0), "workspace")]
    hold = await lim.reserve(scope, 0.4)
    assert len(hold.held) == 2
    await lim.settle(hold, 0.0)
    assert parse_number(await memory_store.get(budget_key("ws", time.time()))) == 0


async def test_the_refusal_names_a_small_budget_in_significant_digits() -> None:
    lim = Limiter(MemoryStore())
    scope = [("vk", WorkspaceLimits(budget_usd_per_day=0.0003), "key")]
    await lim.reserve(scope, 0.0004)  # the first request is served and overshoots
    with pytest.raises(GatewayError) as err:
        await lim.reserve(scope, 0.0004)
    assert "Daily budget of $0.0003 reached for this key" in err.value.message
    assert int((err.value.headers or {})["retry-after"]) >= 1


class DownStore(MemoryStore):
    """A shared store whose increments fail as an unreachable Redis's do; its batch
    writes (the settlements) land, as they would once it is back."""

    async def incr(self, key: str, amount: float = 1.0, ttl: float | None = None) -> float:
        raise StateUnavailable("down")


async def test_with_the_shared_store_down_budgets_hold_on_this_instance() -> None:
    """They used to fail open: every request served. Now each instance holds the
    whole budget on its own counters; what it bills reaches the shared counter."""
    shared = DownStore()
    lim = Limiter(shared)
    held = await _race([lim], budget=10 * 0.003, each=0.003)
    assert 10 <= len(held) <= 11
    assert all(h.local and not h.held for h in held)
    for h in held:
        await lim.settle(h, 0.001)
    key = budget_key("vk", time.time())
    assert parse_number(await lim.local.get(key)) == pytest.approx(0.001 * len(held))
    assert parse_number(await shared.get(key)) == pytest.approx(0.001 * len(held))


# ---- over real HTTP ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    # every reply takes 300 ms, so the 50 requests are all in flight together
    with ServerThread(create_sim_app(SimSettings(latency_ms=300))) as s:
        yield s


def _cfg(sim_url: str, budget: float | None, state: dict[str, Any] | None) -> dict[str, Any]:
    cfg = gateway_config(sim_url, state=state or {"backend": "memory"})
    if budget is not None:
        cfg["workspaces"][0]["virtual_keys"] = [
            {
                "id": KEY_ID,
                "sha256": hashlib.sha256(KEY_TOKEN.encode()).hexdigest(),
                "budget_usd_per_day": budget,
            }
        ]
    return cfg


@contextlib.contextmanager
def _gateways(cfg: dict[str, Any], count: int = 1) -> Iterator[list[ServerThread]]:
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(ServerThread(create_app(parse_config(cfg)))) for _ in range(count)
        ]


def _one_request_cost(sim: ServerThread) -> float:
    """What BODY is billed, measured on a gateway without a budget."""
    with _gateways(_cfg(sim.url, None, None)) as (gw,):
        r = httpx.post(
            f"{gw.url}/v1/chat/completions",
            json=BODY,
            headers={"authorization": f"Bearer {TOKEN}", "x-orcarouter-include-cost": "true"},
            timeout=10,
        )
        assert r.status_code == 200
        return float(r.headers["x-orca-cost"])


async def _fire(urls: list[str], path: str) -> list[httpx.Response]:
    headers = {"authorization": f"Bearer {KEY_TOKEN}", "anthropic-version": "2023-06-01"}
    limits = httpx.Limits(max_connections=CONCURRENT)
    async with httpx.AsyncClient(headers=headers, timeout=20, limits=limits) as client:

        async def one(i: int) -> httpx.Response:
            body = {**BODY, "stream": i % 2 == 1}  # half streamed: both paths settle
            r = await client.post(f"{urls[i % len(urls)]}{path}", json=body)
            await r.aread()
            return r

        return await asyncio.gather(*(one(i) for i in range(CONCURRENT)))


def _spent(gw: ServerThread) -> float:
    """The key's day counter, read through the gateway's own store on its loop."""
    store = gw.app.gateway.limiter.store
    assert gw.loop is not None
    key = budget_key(KEY_ID, time.time())
    raw = asyncio.run_coroutine_threadsafe(store.get(key), gw.loop).result(5)
    return parse_number(raw)


def _check(responses: list[httpx.Response], cost: float, gw: ServerThread, fmt: str) -> None:
    served = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code != 200]
    assert 1 <= len(served) <= 11, f"{len(served)} of {CONCURRENT} served"
    for r in refused:
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        body = r.json()
        if fmt == "anthropic":
            assert body["type"] == "error" and body["error"]["code"] == "budget_exceeded"
        else:
            assert body["error"]["code"] == "budget_exceeded"
    # every hold settled to the billed cost: refused requests and holds leave nothing
    deadline = time.monotonic() + 5
    while abs(_spent(gw) - cost * len(served)) > cost / 100 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _spent(gw) == pytest.approx(cost * len(served), rel=0.01)


@pytest.fixture
def redis_state(redis_url: str) -> Iterator[dict[str, Any]]:
    prefix = f"test:{uuid4().hex}:"
    yield {"backend": "redis", "url": redis_url, "key_prefix": prefix}

    async def clean() -> None:
        store = RedisStore(redis_url, key_prefix=prefix)
        await store.delete_prefix()
        await store.close()

    asyncio.run(clean())


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_a_budget_for_ten_requests_serves_at_most_eleven_of_fifty(
    sim: ServerThread, backend: str, request: pytest.FixtureRequest
) -> None:
    cost = _one_request_cost(sim)
    state = request.getfixturevalue("redis_state") if backend == "redis" else None
    with _gateways(_cfg(sim.url, 10 * cost, state)) as (gw,):
        responses = asyncio.run(_fire([gw.url], "/v1/chat/completions"))
        _check(responses, cost, gw, "openai")


def test_two_gateways_on_one_redis_share_one_budget(
    sim: ServerThread, redis_state: dict[str, Any]
) -> None:
    cost = _one_request_cost(sim)
    with _gateways(_cfg(sim.url, 10 * cost, redis_state), count=2) as (a, b):
        # Each gateway's Redis connection is opened before the burst: what is
        # tested is one budget shared through Redis, not a first connect racing
        # 25 requests on a loaded CI machine (CI once saw it time out, and each
        # gateway then held the budget on its own counters: 20 of 50 served).
        assert _spent(a) == 0 and _spent(b) == 0
        responses = asyncio.run(_fire([a.url, b.url], "/v1/messages"))
        _check(responses, cost, a, "anthropic")


def test_a_failed_request_releases_its_hold(sim: ServerThread) -> None:
    with _gateways(_cfg(sim.url, 1.0, None)) as (gw,):
        httpx.post(f"{sim.url}/_sim/faults", json={"kind": "status", "status": 500, "count": None})
        try:
            r = httpx.post(
                f"{gw.url}/v1/chat/completions",
                json=BODY,
                headers={"authorization": f"Bearer {KEY_TOKEN}"},
                timeout=10,
            )
        finally:
            httpx.delete(f"{sim.url}/_sim/faults")
        assert r.status_code >= 500
        deadline = time.monotonic() + 5
        while _spent(gw) != 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _spent(gw) == 0


def test_a_budget_holds_on_each_gateway_while_redis_is_down(sim: ServerThread) -> None:
    """A real Redis, stopped: the gateway keeps serving (affinity degrades) and
    the key's budget still stops it at about 10 of 50, on this instance's counters."""
    cost = _one_request_cost(sim)
    with servers.private_redis() as redis:
        state = {"backend": "redis", "url": redis.url, "key_prefix": "budget-down:"}
        with _gateways(_cfg(sim.url, 10 * cost, state)) as (gw,):
            redis.stop(kill=True)
            responses = asyncio.run(_fire([gw.url], "/v1/chat/completions"))
            served = [r for r in responses if r.status_code == 200]
            assert 1 <= len(served) <= 11, f"{len(served)} of {CONCURRENT} served"
            assert {r.status_code for r in responses} <= {200, 429}
