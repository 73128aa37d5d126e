"""What a served request leaves behind: its metrics, its usage row and its
access log line (never prompt text).

The failure side of the same record is `failures.record_failure`; both build a
`UsageRecord`, so the row and the log line carry the same columns either way.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from tiergate import metrics
from tiergate.billing import uncached_cost
from tiergate.core.model import ChatResponse
from tiergate.core.upstream import Target
from tiergate.gateway.planner import RoutePlan
from tiergate.gateway.usage import UsageRecord
from tiergate.recorder import Recorder

access_log = logging.getLogger("tiergate.access")


@dataclass(frozen=True, slots=True)
class ServedRequest:
    """Who asked, by which plan, and when the request and its upstream attempt started."""

    request_id: str
    workspace: str
    virtual_key: str | None
    path: str | None
    started: float
    upstream_started: float
    plan: RoutePlan


def record_served(
    recorder: Recorder,
    who: ServedRequest,
    target: Target,
    resp: ChatResponse,
    *,
    attempts: int,
    status: int,
    stream: bool,
    cost: float,
    done: float,
) -> None:
    """Observe the request in the metrics, queue its usage row, log its line."""
    plan = who.plan
    latency_ms = (done - who.started) * 1000
    u = resp.usage
    router = plan.router.name if plan.router else None
    metrics.observe_request(router, target.model, target.channel.name, status, latency_ms / 1e3)
    metrics.observe_upstream(
        target.channel.name, target.model, done - who.upstream_started, u.cache_read_tokens
    )
    metrics.observe_usage(target.channel.name, target.model, u, cost)
    record = UsageRecord(
        request_id=who.request_id,
        ts=time.time(),
        workspace=who.workspace,
        virtual_key=who.virtual_key,
        router=router,
        model=target.model,
        channel=target.channel.name,
        key_index=target.key_index,
        tier=plan.committer.served_tier(plan, target) if plan.committer is not None else None,
        status=status,
        stream=stream,
        input_tokens=u.input_tokens,
        cache_read_tokens=u.cache_read_tokens,
        cache_write_tokens=u.cache_write_tokens,
        output_tokens=u.output_tokens,
        cost_usd=cost,
        uncached_cost_usd=uncached_cost(u, target.model_config),
        latency_ms=latency_ms,
        attempts=attempts,
        session_hash=plan.session_hash,
        error_type=None if status == 200 else "upstream",
        path=who.path,
    )
    recorder.record("usage", record.row())
    access_log.info("request", extra=record.log_fields())


async def record_served_later(
    recorder: Recorder,
    who: ServedRequest,
    target: Target,
    resp: ChatResponse,
    attempts: int,
    cost: float,
    done: float,
) -> None:
    """`record_served` for a non-streaming 200, as the response's background task
    (a coroutine on purpose: Starlette runs a plain function in a thread)."""
    record_served(
        recorder,
        who,
        target,
        resp,
        attempts=attempts,
        status=200,
        stream=False,
        cost=cost,
        done=done,
    )
