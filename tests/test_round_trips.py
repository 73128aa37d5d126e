"""The hot path's state budget: at most two store round trips per request (one
read while planning, one guarded commit), for a router with affinity and
escalation on, on real Redis."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from escalation_support import coding_router
from servers import gateway_config
from tiergate.config_load import parse_config
from tiergate.core.model import ChatResponse, TextPart, Usage
from tiergate.formats.openai import parse_request
from tiergate.gateway.auth import TokenTable
from tiergate.gateway.planner import Outcome, Planner
from tiergate.routing.distributor import Distributor
from tiergate.state.redis import RedisStore

ROUTER = coding_router(mode="auto", percentile=95)


class Counting:
    """Counts every store call; each one is one network round trip on Redis."""

    def __init__(self, inner: RedisStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.name = inner.name

    def __getattr__(self, op: str) -> Any:
        fn = getattr(self.inner, op)

        async def call(*a: Any, **kw: Any) -> Any:
            self.calls[op] += 1
            return await fn(*a, **kw)

        return call


@pytest.mark.parametrize("tier_header", [None, "strong"])
async def test_two_round_trips_per_request(
    redis_store: RedisStore, tier_header: str | None
) -> None:
    cfg = parse_config(gateway_config("http://x", routers=[ROUTER]))
    store = Counting(redis_store)
    distributor = Distributor.from_config(cfg)
    planner = Planner(cfg, distributor, store)  # type: ignore[arg-type]
    ws = TokenTable(cfg.workspaces).lookup("tg-test-token")
    assert ws is not None
    headers = {"x-orcarouter-session-id": "rt"}
    if tier_header:
        headers["x-orcarouter-tier"] = tier_header
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}]
    for turn in range(4):
        messages.append({"role": "user", "content": f"turn {turn}"})
        body = {"model": "orcarouter/coding", "messages": messages}
        store.calls.clear()
        plan = await planner.plan(parse_request(body), body, headers, ws, f"r{turn}")
        target = next(distributor.attempts(plan.models, plan.channel_pin))
        resp = ChatResponse("id", target.model, [TextPart("ok")], usage=Usage(100, 10))
        await plan.commit(Outcome(True, target, resp, cost=0.001))
        assert sum(store.calls.values()) <= 2, (turn, dict(store.calls))
        assert store.calls["get_many"] == 1 and store.calls["apply_batch"] == 1
        messages.append({"role": "assistant", "content": "ok"})


def _planner(store: Any, **overrides: Any) -> tuple[Planner, Any]:
    cfg = parse_config({**gateway_config("http://x", routers=[ROUTER]), **overrides})
    planner = Planner(cfg, Distributor.from_config(cfg), store)
    ws = TokenTable(cfg.workspaces).lookup("tg-test-token")
    assert ws is not None
    return planner, ws


BODY: dict[str, Any] = {
    "model": "orcarouter/coding",
    "messages": [{"role": "system", "content": "agent"}, {"role": "user", "content": "go"}],
}
HEADERS = {"x-orcarouter-session-id": "overlap"}


async def test_the_read_is_on_the_wire_while_the_transcript_is_summarised(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The round trip overlaps the planning work that does not need it: the
    store has been asked before the transcript summary starts (docs/performance.md,
    session 24)."""
    store = Counting(redis_store)
    planner, ws = _planner(store)
    summarize = planner.transcripts.summarize
    asked: list[int] = []

    def watching(key: str | None, req: Any) -> Any:
        asked.append(store.calls["get_many"])
        return summarize(key, req)

    monkeypatch.setattr(planner.transcripts, "summarize", watching)
    plan = await planner.plan(parse_request(BODY), BODY, HEADERS, ws, "r1")
    assert asked == [1] and store.calls["get_many"] == 1
    assert plan.models  # the read's pins and snapshot were used as before


class Held(Counting):
    """A store whose reads wait for `gate`: a read still in flight, on demand."""

    def __init__(self, inner: RedisStore) -> None:
        super().__init__(inner)
        self.gate = asyncio.Event()
        self.gate.set()

    async def get_many(self, keys: Any) -> Any:
        self.calls["get_many"] += 1
        await self.gate.wait()
        return await self.inner.get_many(keys)


async def test_a_failure_before_the_read_is_awaited_leaves_nothing_running(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Held(redis_store)
    planner, ws = _planner(store)
    summarize = planner.transcripts.summarize
    await planner.plan(parse_request(BODY), BODY, HEADERS, ws, "r0")  # connected
    store.gate.clear()  # the next read stays in flight until the plan has failed

    def failing(key: str | None, req: Any) -> Any:
        raise RuntimeError("summary broke")

    monkeypatch.setattr(planner.transcripts, "summarize", failing)
    with pytest.raises(RuntimeError, match="summary broke"):
        await planner.plan(parse_request(BODY), BODY, HEADERS, ws, "r1")
    for _ in range(3):
        await asyncio.sleep(0)  # a cancelled task finishes on its next step
    reads = [
        t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__name__", "") == "_fetch_state"
    ]
    assert reads == []  # cancelled, not left waiting
    store.gate.set()
    monkeypatch.setattr(planner.transcripts, "summarize", summarize)
    plan = await planner.plan(parse_request(BODY), BODY, HEADERS, ws, "r2")
    assert plan.models  # the connection still answers in order


async def test_a_request_that_reads_nothing_starts_no_read(redis_store: RedisStore) -> None:
    """No affinity and no escalation: nothing to read, no round trip, no task."""
    store = Counting(redis_store)
    planner, ws = _planner(store, routers=[coding_router(mode="off")], affinity={"enabled": False})
    plan = await planner.plan(parse_request(BODY), BODY, {}, ws, "r1")
    assert plan.models and store.calls["get_many"] == 0
