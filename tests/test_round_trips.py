"""The hot path's state budget: at most two store round trips per request (one
read while planning, one guarded commit), for a router with affinity and
escalation on, on real Redis."""

from __future__ import annotations

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
