"""On a shared store a non-streaming reply leaves once its commit has been *sent*,
not acknowledged: the store's round trip is off the reply's path, and a fleet's
next turn still finds the writes, because Redis holds them before the client
has the reply (tiergate/gateway/commits.py).

A private redis-server is paused for writes (`CLIENT PAUSE ... WRITE`): reads
are served, the commit's EVALSHA is held by Redis. The reply must arrive while
it is held; before this change it waited for the pause to end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

import servers
from escalation_support import coding_router
from servers import TOKEN, PrivateRedis, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.core.model import ChatResponse, TextPart, Usage
from tiergate.formats.openai import parse_request
from tiergate.gateway.auth import TokenTable
from tiergate.gateway.commits import SessionCommits
from tiergate.gateway.planner import Outcome, Planner
from tiergate.routing.distributor import Distributor
from tiergate.sim.app import SimSettings, create_sim_app
from tiergate.state.base import Incr
from tiergate.state.redis import RedisStore
from tiergate.state.resilient import ResilientStore

PAUSE_MS = 400  # below the store's 0.5 s socket timeout: a waiting reply would get its ack
HEADERS = {"authorization": f"Bearer {TOKEN}", "x-orcarouter-session-id": "sent-first"}


@pytest.fixture
def private() -> Iterator[PrivateRedis]:
    with servers.private_redis() as server:
        yield server


def _body(turn: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(turn):
        messages += [
            {"role": "user", "content": f"step {i}: fix the failing test"},
            {"role": "assistant", "content": "done"},
        ]
    messages.append({"role": "user", "content": f"step {turn}: run the tests again"})
    return {"model": "orcarouter/coding", "messages": messages}


def _evalsha_calls(client: redis.Redis) -> int:
    stats: dict[str, Any] = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def test_the_reply_leaves_with_the_commit_sent_but_not_acknowledged(
    private: PrivateRedis,
) -> None:
    state = {"backend": "redis", "url": private.url, "key_prefix": "sent:"}
    router = coding_router(mode="auto")
    admin = redis.Redis(port=private.port)
    with (
        ServerThread(create_sim_app(SimSettings())) as sim,
        ServerThread(
            create_app(parse_config(gateway_config(sim.url, routers=[router], state=state)))
        ) as gw,
        httpx.Client(base_url=gw.url, headers=HEADERS, timeout=10) as client,
    ):
        first = client.post("/v1/chat/completions", json=_body(0))
        assert first.status_code == 200  # the store's connection is open, the script cached
        committed = _evalsha_calls(admin)
        assert committed >= 1

        admin.execute_command("CLIENT", "PAUSE", PAUSE_MS, "WRITE")
        started = time.monotonic()
        second = client.post("/v1/chat/completions", json=_body(1))
        elapsed = time.monotonic() - started
        held = admin.info("clients")["blocked_clients"]
        still_paused = time.monotonic() - started < PAUSE_MS / 1000 * 0.8

        assert second.status_code == 200
        assert still_paused, f"the reply took {elapsed:.3f} s: it waited for the store"
        assert held == 1, "the commit had not reached Redis when the reply did"
        assert _evalsha_calls(admin) == committed  # held, not yet run

        deadline = time.monotonic() + 3
        while _evalsha_calls(admin) == committed and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _evalsha_calls(admin) == committed + 1  # ran once the pause ended
        third = client.post("/v1/chat/completions", json=_body(2))
        assert third.status_code == 200
        assert third.headers["x-orca-resolved-model"] == second.headers["x-orca-resolved-model"]


# ---- the ordering itself: what the transport had written when spawn_sent returned ----


class Wire:
    """Records every write on the store's one connection, as it happens."""

    def __init__(self, store: RedisStore) -> None:
        conn = store._fast._conn if store._fast is not None else None
        assert conn is not None and conn.transport is not None, "connect the store first"
        self.written: list[bytes] = []
        transport, write = conn.transport, conn.transport.write

        def recording(data: Any) -> None:
            self.written.append(bytes(data))
            write(data)

        transport.write = recording  # type: ignore[method-assign]

    def sent(self, command: bytes) -> bool:
        return any(command in data for data in self.written)


async def test_a_planned_commit_is_written_when_spawn_sent_returns(
    redis_store: RedisStore,
) -> None:
    """The real commit path (planner, escalation, resilient store) has no wait
    before its EVALSHA; a wait added there would let the reply overtake it."""
    cfg = parse_config(gateway_config("http://x", routers=[coding_router(mode="auto")]))
    store = ResilientStore(redis_store)
    planner = Planner(cfg, Distributor.from_config(cfg), store)
    ws = TokenTable(cfg.workspaces).lookup(TOKEN)
    assert ws is not None and await redis_store.ping()  # connected
    wire = Wire(redis_store)
    body = _body(0)
    plan = await planner.plan(parse_request(body), body, HEADERS, ws, "r1")
    target = next(planner.distributor.attempts(plan.models, plan.channel_pin))
    reply = ChatResponse("id", target.model, [TextPart("ok")], usage=Usage(100, 10))
    assert not wire.sent(b"EVALSHA")
    await planner.commits.spawn_sent(plan.scope, plan.commit(Outcome(True, target, reply, 0.001)))
    assert wire.sent(b"EVALSHA")
    await planner.commits.drain()


async def test_a_commit_queued_behind_calls_in_flight_is_written_too(
    redis_store: RedisStore,
) -> None:
    """Under load the client batches commands queued while others are in flight
    into one write at the end of the loop turn: spawn_sent waits for that write."""
    assert await redis_store.ping()
    wire = Wire(redis_store)
    commits = SessionCommits()
    reads = [asyncio.ensure_future(redis_store.get_many(["a", "b"])) for _ in range(3)]
    await asyncio.sleep(0)  # the first read is written, the others queued behind it

    async def commit() -> None:
        await redis_store.apply_batch([], [Incr("n", 1.0)])

    await commits.spawn_sent("s", commit())
    assert wire.sent(b"EVALSHA")
    await asyncio.gather(*reads)
    await commits.drain()
