"""The dashboard's recent sessions: one line per session from the usage rows.

A bare hash says nothing to an operator; the usage rows already name the
workspace, routers, tiers and models a session used, how many requests it made
and when. Grouped in the database (two small queries over a time window), so the
page does not pull hundreds of raw rows to count them itself. Hashes only: the
raw session id is never stored.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import and_, case, func, or_, select
from starlette.requests import Request
from starlette.responses import Response

from tiergate.api.admin_common import AdminContext, json_response, parse_int, parse_time
from tiergate.db import usage_table

DEFAULT_SESSIONS = 20
MAX_SESSIONS = 200
#: the window when `since` is absent: a week of usage rows
DEFAULT_WINDOW_SECONDS = 7 * 86400


async def list_recent_sessions(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/session-scopes?workspace=&router=&since=&until=&limit=: the
    sessions with the newest requests first."""
    qp = request.query_params
    limit = parse_int(qp.get("limit"), "limit", DEFAULT_SESSIONS, 1, MAX_SESSIONS)
    since = parse_time(qp.get("since"), "since")
    until = parse_time(qp.get("until"), "until")
    u = usage_table
    conds: list[Any] = [
        u.c.session_hash.is_not(None),
        u.c.ts >= (since if since is not None else time.time() - DEFAULT_WINDOW_SECONDS),
    ]
    if until is not None:
        conds.append(u.c.ts < until)
    if qp.get("workspace"):
        conds.append(u.c.workspace == qp["workspace"])
    if qp.get("router"):
        conds.append(u.c.router == qp["router"])
    strong = func.sum(case((u.c.tier == "strong", 1), else_=0))
    errors = func.sum(case((u.c.status != 200, 1), else_=0))
    groups = (
        select(
            u.c.session_hash,
            func.count().label("requests"),
            strong.label("strong_requests"),
            errors.label("errors"),
            func.sum(u.c.cost_usd).label("cost_usd"),
            func.min(u.c.ts).label("first_seen"),
            func.max(u.c.ts).label("last_seen"),
        )
        .where(*conds)
        .group_by(u.c.session_hash)
        .order_by(func.max(u.c.ts).desc())
        .limit(limit)
    )
    engine = await ctx.fresh_engine()
    async with engine.connect() as conn:
        sessions = {r.session_hash: dict(r._mapping) for r in await conn.execute(groups)}
        if not sessions:
            return json_response({"items": [], "limit": limit})
        mine = [*conds, u.c.session_hash.in_(list(sessions))]
        used = select(u.c.session_hash, u.c.router, u.c.model).where(*mine).distinct()
        pairs = list(await conn.execute(used))
        at_last = [
            and_(u.c.session_hash == h, u.c.ts == s["last_seen"]) for h, s in sessions.items()
        ]
        newest = (
            select(u.c.session_hash, u.c.workspace, u.c.router, u.c.model, u.c.tier)
            .where(or_(*at_last))
            .order_by(u.c.id.desc())
        )
        latest: dict[str, Any] = {}
        for r in await conn.execute(newest):
            latest.setdefault(r.session_hash, r)
    return json_response({"items": _items(sessions, latest, pairs), "limit": limit})


def _items(
    sessions: dict[str, dict[str, Any]], latest: dict[str, Any], pairs: list[Any]
) -> list[dict[str, Any]]:
    """Each session's aggregate with its newest request's workspace, router, model
    and tier, and every router and model it used, newest session first."""
    items = []
    for shash, agg in sessions.items():
        last = latest.get(shash)
        items.append(
            {
                "session_hash": shash,
                "workspace": last.workspace if last is not None else None,
                "requests": int(agg["requests"]),
                "strong_requests": int(agg["strong_requests"] or 0),
                "errors": int(agg["errors"] or 0),
                "cost_usd": round(float(agg["cost_usd"] or 0.0), 8),
                "first_seen": float(agg["first_seen"]),
                "last_seen": float(agg["last_seen"]),
                "last_router": last.router if last is not None else None,
                "last_model": last.model if last is not None else None,
                "last_tier": last.tier if last is not None else None,
                "routers": sorted(
                    {p.router for p in pairs if p.session_hash == shash and p.router}
                ),
                "models": sorted({p.model for p in pairs if p.session_hash == shash and p.model}),
            }
        )
    return sorted(items, key=lambda s: s["last_seen"], reverse=True)
