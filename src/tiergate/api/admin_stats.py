"""The JSON the dashboard draws: traffic, escalated share, escalations by
trigger, shadow precision with escalation latency, cache hit rates, savings.

Sources: usage rows (traffic, spend, cache, savings), audit rows (escalations,
shadow decisions), shadow labels and client feedback (precision, latency), and
the state store's share-cap day buckets (the very counters the cap reads, so
the dashboard shows what the engine sees). Every endpoint takes `since` and
`until` (default: the last 24 h; `quality` defaults to the gate window).
Response shapes are documented with examples in docs/operator.md.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, and_, case, cast, func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import Response

from tiergate import metrics
from tiergate.api.admin_common import AdminContext, invalid, json_response, parse_time
from tiergate.api.admin_sessions import workspace_id
from tiergate.api.masking import mask_secret
from tiergate.api.shadow import gate_state, gate_summary, live_percent, router_gate
from tiergate.config import GatewayConfig
from tiergate.db import audit_table, feedback_table, shadow_labels_table, usage_table
from tiergate.routing.affinity import key_fingerprint
from tiergate.routing.caps import (
    ShareBasis,
    counters_from_values,
    router_share_keys,
    share_exceeded,
    workspace_share_keys,
)
from tiergate.routing.escalation import escalation_applies
from tiergate.routing.tier_state import session_hash
from tiergate.state.base import StateStore

_DAY = 86400.0
#: A client feedback score below this marks the served turn as one the model
#: struggled with: a hard turn, for escalation latency.
HARD_FEEDBACK_BELOW = 0.5
BUCKETS = {"minute": 60, "hour": 3600, "day": 86400}
MAX_POINTS = 5000
ESCALATION_EVENTS = (
    "escalated",
    "denied_cap",
    "shadow",
    "de_escalated",
    "reset",
    "strong_served",
)


def _window(request: Request, default_seconds: float = _DAY) -> tuple[float, float]:
    now = time.time()
    qp = request.query_params
    until = parse_time(qp.get("until"), "until")
    until = now if until is None else until  # until=0 is a time, not "unset"
    since = parse_time(qp.get("since"), "since")
    since = until - default_seconds if since is None else since
    if since >= until:
        raise invalid("since must be before until")
    return since, until


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


# ---- traffic -------------------------------------------------------------------------


def _bucket_expr(engine: AsyncEngine, seconds: int) -> Any:
    """Bucket index of a row's ts; SQLite truncates (= floor for positive ts)."""
    col = usage_table.c.ts
    if engine.dialect.name == "postgresql":
        return cast(func.floor(col / seconds), Integer)
    return cast(col / seconds, Integer)


async def traffic(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/stats/traffic: requests, errors and spend per router, tier, bucket."""
    since, until = _window(request)
    raw_bucket = request.query_params.get("bucket", "hour")
    seconds = BUCKETS.get(raw_bucket)
    if seconds is None:
        raise invalid("bucket: minute, hour or day")
    if (until - since) / seconds > MAX_POINTS:
        raise invalid(f"too many points: at most {MAX_POINTS} buckets per series")
    engine = await ctx.fresh_engine()
    u = usage_table
    bucket = _bucket_expr(engine, seconds).label("bucket")
    conds = [u.c.ts >= since, u.c.ts < until]
    if request.query_params.get("router"):
        conds.append(u.c.router == request.query_params["router"])
    q = (
        select(
            u.c.router,
            u.c.tier,
            bucket,
            func.count().label("requests"),
            func.sum(case((u.c.status != 200, 1), else_=0)).label("errors"),
            func.coalesce(func.sum(u.c.cost_usd), 0.0).label("spend"),
        )
        .where(*conds)
        .group_by(u.c.router, u.c.tier, bucket)
        .order_by(u.c.router, u.c.tier, bucket)
    )
    series: dict[tuple[str | None, str | None], list[dict[str, Any]]] = defaultdict(list)
    async with engine.connect() as conn:
        for r in await conn.execute(q):
            series[(r.router, r.tier)].append(
                {
                    "t": int(r.bucket) * seconds,
                    "requests": int(r.requests),
                    "errors": int(r.errors or 0),
                    "spend_usd": float(r.spend or 0.0),
                }
            )
    items = [
        {
            "router": router,
            "tier": tier,
            "points": points,
            "requests": sum(p["requests"] for p in points),
            "spend_usd": sum(p["spend_usd"] for p in points),
        }
        for (router, tier), points in series.items()
    ]
    return json_response(
        {"since": since, "until": until, "bucket_seconds": seconds, "series": items}
    )


# ---- escalated share vs cap ----------------------------------------------------------------


async def share_status(cfg: GatewayConfig, store: StateStore, now: float) -> dict[str, Any]:
    """Every escalating router's (and workspace's) trailing-window share against its
    cap, from the day buckets the cap itself reads. Also refreshes the gauges."""
    routers = [r for r in cfg.routers if escalation_applies(r)]
    ws_days = max((r.escalation.share_window_days for r in routers), default=2)
    keys: list[str] = []
    for r in routers:
        keys += router_share_keys(r.name, now, r.escalation.share_window_days)
    for w in cfg.workspaces:
        keys += workspace_share_keys(workspace_id(w.name), now, ws_days)
    values = await store.get_many(keys) if keys else []
    out_routers, i = [], 0
    for r in routers:
        esc = r.escalation
        n = len(router_share_keys(r.name, now, esc.share_window_days))
        c = counters_from_values(values[i : i + n])
        i += n
        share = c.share(esc.share_cap_basis)
        util = _ratio((share or 0.0) * 100.0, esc.share_cap_percent)
        metrics.ESCALATED_SHARE.labels(r.name).set(share or 0.0)
        metrics.SHARE_CAP_UTILISATION.labels(r.name).set(util or 0.0)
        out_routers.append(
            {
                "router": r.name,
                "basis": esc.share_cap_basis,
                "share": share,
                "request_share": c.request_share,
                "spend_share": c.spend_share,
                "cap_percent": esc.share_cap_percent,
                "utilisation": util,
                "capped": share_exceeded(
                    c, esc.share_cap_percent, esc.share_cap_basis, esc.share_warmup_requests
                ),
                "warming_up": c.requests < esc.share_warmup_requests,
                "requests": c.requests,
                "strong_requests": c.strong_requests,
                "spend_usd": c.spend,
                "strong_spend_usd": c.strong_spend,
                "window_days": esc.share_window_days,
                "live_percent": live_percent(r),
            }
        )
    # The workspace cap is checked on each router's basis; shown on the one they
    # share (the default, requests, when they differ).
    bases = {r.escalation.share_cap_basis for r in routers}
    ws_basis: ShareBasis = bases.pop() if len(bases) == 1 else "requests"
    out_ws = []
    for w in cfg.workspaces:
        n = len(workspace_share_keys(workspace_id(w.name), now, ws_days))
        c = counters_from_values(values[i : i + n])
        i += n
        share = c.share(ws_basis)
        out_ws.append(
            {
                "workspace": w.name,
                "basis": ws_basis,
                "share": share,
                "request_share": c.request_share,
                "spend_share": c.spend_share,
                "cap_percent": w.escalation_share_cap_percent,
                "utilisation": _ratio((share or 0.0) * 100.0, w.escalation_share_cap_percent),
                "requests": c.requests,
                "window_days": ws_days,
            }
        )
    return {"ts": now, "routers": out_routers, "workspaces": out_ws}


async def share(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/stats/share: escalated share against its cap, right now."""
    return json_response(await share_status(ctx.cfg, ctx.state.store, time.time()))


# ---- escalations by trigger -------------------------------------------------------------------


async def escalations(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/stats/escalations: audit events by router, kind and trigger,
    and cap denials by reason."""
    since, until = _window(request)
    a = audit_table
    conds = [a.c.ts >= since, a.c.ts < until, a.c.event.in_(ESCALATION_EVENTS)]
    if request.query_params.get("router"):
        conds.append(a.c.router == request.query_params["router"])
    grouped = (
        select(a.c.router, a.c.event, a.c.trigger, func.count().label("n"))
        .where(*conds)
        .group_by(a.c.router, a.c.event, a.c.trigger)
        .order_by(a.c.router, a.c.event, a.c.trigger)
    )
    denied = select(a.c.router, a.c.detail).where(and_(*conds, a.c.event == "denied_cap"))
    engine = await ctx.fresh_engine()
    denials: dict[tuple[str, str], int] = defaultdict(int)
    async with engine.connect() as conn:
        items = [
            {"router": r.router, "event": r.event, "trigger": r.trigger, "count": int(r.n)}
            for r in await conn.execute(grouped)
        ]
        for r in await conn.execute(denied):
            header = (r.detail or {}).get("header") or ""
            denials[(r.router, header.rpartition("denied:")[2] or "unknown")] += 1
    return json_response(
        {
            "since": since,
            "until": until,
            "items": items,
            "denials": [
                {"router": router, "reason": reason, "count": n}
                for (router, reason), n in sorted(denials.items())
            ],
        }
    )


# ---- shadow precision, gate and escalation latency --------------------------------------------


@dataclass(frozen=True, slots=True)
class FeedbackTurn:
    router: str
    session: str  # audit-style session hash
    ts: float
    score: float


def escalation_latency(
    escalated_at: dict[tuple[str, str], float], turns: Iterable[FeedbackTurn]
) -> dict[str, dict[str, Any]]:
    """Per router: hard turns served on base before the ratchet (report §7).

    A session counts as measured when it escalated and the client rated at
    least one of its base turns before the escalation; its latency is the
    number of those turns rated below HARD_FEEDBACK_BELOW. Sessions with hard
    base turns that never escalated are reported beside it (missed, or still
    accumulating evidence).
    """
    by_session: dict[tuple[str, str], list[FeedbackTurn]] = defaultdict(list)
    for t in turns:
        by_session[(t.router, t.session)].append(t)
    out: dict[str, dict[str, Any]] = {}

    def entry(router: str) -> dict[str, Any]:
        return out.setdefault(
            router,
            {
                "sessions_escalated": 0,
                "sessions_measured": 0,
                "mean_hard_turns": None,
                "distribution": {},
                "hard_sessions_not_escalated": 0,
            },
        )

    totals: dict[str, list[int]] = defaultdict(list)
    for (router, session), at in escalated_at.items():
        e = entry(router)
        e["sessions_escalated"] += 1
        before = [t for t in by_session.get((router, session), ()) if t.ts < at]
        if not before:
            continue
        hard = sum(1 for t in before if t.score < HARD_FEEDBACK_BELOW)
        totals[router].append(hard)
        label = str(hard) if hard < 3 else "3+"
        e["distribution"][label] = e["distribution"].get(label, 0) + 1
    for (router, session), ts in by_session.items():
        if (router, session) not in escalated_at and any(t.score < HARD_FEEDBACK_BELOW for t in ts):
            entry(router)["hard_sessions_not_escalated"] += 1
    for router, values in totals.items():
        out[router]["sessions_measured"] = len(values)
        out[router]["mean_hard_turns"] = sum(values) / len(values)
    return out


async def _feedback_latency(
    engine: AsyncEngine, since: float, until: float
) -> dict[str, dict[str, Any]]:
    a, u, f = audit_table, usage_table, feedback_table
    esc_q = (
        select(a.c.router, a.c.session_hash, func.min(a.c.ts).label("at"))
        .where(a.c.event == "escalated", a.c.ts >= since, a.c.ts < until)
        .group_by(a.c.router, a.c.session_hash)
    )
    turn_q = (
        select(u.c.router, u.c.session_hash, u.c.ts, f.c.score)
        .select_from(u.join(f, f.c.request_id == u.c.request_id))
        .where(
            u.c.tier == "base",
            u.c.status == 200,
            u.c.router.is_not(None),
            u.c.session_hash.is_not(None),
            u.c.ts >= since - _DAY,  # base turns shortly before the window's ratchets
            u.c.ts < until,
        )
    )
    async with engine.connect() as conn:
        esc_rows = [(r.router, r.session_hash, float(r.at)) for r in await conn.execute(esc_q)]
        turns = [
            FeedbackTurn(r.router, r.session_hash, float(r.ts), float(r.score))
            for r in await conn.execute(turn_q)
        ]
    # audit rows carry the usage rows' session_hash (the scope); rows written before
    # that carry session_hash(scope), mapped back through the turns' scopes
    legacy = {session_hash(t.session): t.session for t in turns}
    escalated: dict[tuple[str, str], float] = {}
    for router, shash, at in esc_rows:
        key = (router, legacy.get(shash, shash))
        escalated[key] = min(at, escalated.get(key, at))
    return escalation_latency(escalated, turns)


async def _label_latency(engine: AsyncEngine, since: float, until: float) -> dict[str, Any]:
    s = shadow_labels_table
    q = (
        select(s.c.router, func.count().label("n"), func.avg(s.c.hard_turns_before).label("mean"))
        .where(
            s.c.correct.is_(True),
            s.c.hard_turns_before.is_not(None),
            s.c.event_ts >= since,
            s.c.event_ts < until,
        )
        .group_by(s.c.router)
    )
    async with engine.connect() as conn:
        return {
            r.router: {"labels": int(r.n), "mean_hard_turns": float(r.mean)}
            for r in await conn.execute(q)
        }


async def quality(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/stats/quality: per router, labelled shadow precision and the
    go-live gate next to the escalation latency (report §7: publish both)."""
    since, until = _window(request, default_seconds=30 * _DAY)
    engine = await ctx.fresh_engine()
    routers = [r for r in ctx.cfg.routers if escalation_applies(r)]
    if request.query_params.get("router"):
        routers = [r for r in routers if r.name == request.query_params["router"]]
    from_feedback = await _feedback_latency(engine, since, until)
    from_labels = await _label_latency(engine, since, until)
    items = []
    for r in routers:
        gate = await router_gate(engine, r, until)
        live = live_percent(r)
        items.append(
            {
                "router": r.name,
                "mode": r.escalation.mode,
                "rollout_percent": r.escalation.rollout_percent,
                "live_percent": live,
                "precision": gate.precision,
                "gate": {
                    **gate.as_dict(),
                    "state": gate_state(gate, live),
                    "summary": gate_summary(gate, live),
                },
                "escalation_latency": {
                    "feedback": from_feedback.get(r.name),
                    "labels": from_labels.get(r.name),
                },
            }
        )
    return json_response({"since": since, "until": until, "routers": items})


# ---- cache hit rate and savings ----------------------------------------------------------------


async def cache(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/stats/cache: prompt-cache hit rate per channel and key index."""
    since, until = _window(request)
    u = usage_table
    q = (
        select(
            u.c.channel,
            u.c.key_index,
            func.count().label("requests"),
            func.coalesce(func.sum(u.c.input_tokens), 0).label("input"),
            func.coalesce(func.sum(u.c.cache_read_tokens), 0).label("cache_read"),
            func.coalesce(func.sum(u.c.cache_write_tokens), 0).label("cache_write"),
        )
        .where(u.c.ts >= since, u.c.ts < until, u.c.channel.is_not(None), u.c.status == 200)
        .group_by(u.c.channel, u.c.key_index)
        .order_by(u.c.channel, u.c.key_index)
    )
    keys = {ch.name: ch.keys for ch in ctx.cfg.channels}
    engine = await ctx.fresh_engine()
    channels: dict[str, dict[str, Any]] = {}
    async with engine.connect() as conn:
        for r in await conn.execute(q):
            ch = channels.setdefault(
                r.channel,
                {
                    "channel": r.channel,
                    "requests": 0,
                    "input_tokens": 0,
                    "cache_read_tokens": 0,
                    "keys": [],
                },
            )
            live = keys.get(r.channel) or []
            key = live[r.key_index] if r.key_index is not None and r.key_index < len(live) else None
            ch["requests"] += int(r.requests)
            ch["input_tokens"] += int(r.input)
            ch["cache_read_tokens"] += int(r.cache_read)
            ch["keys"].append(
                {
                    "key_index": r.key_index,
                    "masked": mask_secret(key) if key else None,
                    "fingerprint": key_fingerprint(key) if key else None,
                    "requests": int(r.requests),
                    "input_tokens": int(r.input),
                    "cache_read_tokens": int(r.cache_read),
                    "cache_write_tokens": int(r.cache_write),
                    "hit_rate": _ratio(int(r.cache_read), int(r.input)),
                }
            )
    for ch in channels.values():
        ch["hit_rate"] = _ratio(ch["cache_read_tokens"], ch["input_tokens"])
    return json_response({"since": since, "until": until, "channels": list(channels.values())})


async def savings(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/stats/savings: what the prompt cache saved (uncached price
    of the same tokens minus the billed cost), per router and channel."""
    since, until = _window(request)
    u = usage_table
    q = (
        select(
            u.c.router,
            u.c.channel,
            func.count().label("requests"),
            func.coalesce(func.sum(u.c.cost_usd), 0.0).label("cost"),
            func.coalesce(func.sum(u.c.uncached_cost_usd), 0.0).label("uncached"),
        )
        .where(u.c.ts >= since, u.c.ts < until, u.c.status == 200)
        .group_by(u.c.router, u.c.channel)
        .order_by(u.c.router, u.c.channel)
    )
    engine = await ctx.fresh_engine()
    async with engine.connect() as conn:
        items = [
            {
                "router": r.router,
                "channel": r.channel,
                "requests": int(r.requests),
                "cost_usd": float(r.cost),
                "uncached_cost_usd": float(r.uncached),
                "saved_usd": float(r.uncached) - float(r.cost),
                "saved_fraction": _ratio(float(r.uncached) - float(r.cost), float(r.uncached)),
            }
            for r in await conn.execute(q)
        ]
    cost = sum(i["cost_usd"] for i in items)
    uncached = sum(i["uncached_cost_usd"] for i in items)
    return json_response(
        {
            "since": since,
            "until": until,
            "total": {
                "cost_usd": cost,
                "uncached_cost_usd": uncached,
                "saved_usd": uncached - cost,
                "saved_fraction": _ratio(uncached - cost, uncached),
            },
            "items": items,
        }
    )
