"""One virtual key's usage history: requests, tokens and cost per day (or hour).

Read from the usage table's `virtual_key` column (the key's public id; every
request the key authenticated has a row, served or refused), so it covers the
key's whole life, not only the budget windows the limiter counts, and it is
the same on every instance. Rows written before the column existed (an older
release) have no key and are not counted. See docs/virtual-keys.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, select
from starlette.requests import Request
from starlette.responses import Response

from tiergate.api.admin_common import AdminContext, invalid, json_response, not_found
from tiergate.api.admin_stats import BUCKETS, MAX_POINTS, _bucket_expr, _window
from tiergate.db import usage_table

_DAY = 86400.0
DEFAULT_WINDOW_DAYS = 30
#: What one point sums, in the order the response lists them.
SUMS = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost_usd",
)


def key_summary(ctx: AdminContext, key_id: str) -> dict[str, Any] | None:
    """The key's public fields (never its hash), or None if no such key exists."""
    keys = ctx.state.gateway.tokens.keys
    vk = keys.by_id.get(key_id) if keys is not None else None
    if vk is None:
        return None
    return {
        "id": vk.id,
        "workspace": vk.workspace,
        "name": vk.name,
        "prefix": vk.prefix,
        "active": vk.revoked is None,
    }


def totals(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The window's sums over its points."""
    out: dict[str, Any] = {
        "requests": sum(p["requests"] for p in points),
        "errors": sum(p["errors"] for p in points),
    }
    for name in SUMS:
        out[name] = sum(p[name] for p in points)
    return out


async def key_usage(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/virtual-keys/{id}/usage?since=&until=&bucket=day|hour|minute
    (default: the last 30 days by UTC day)."""
    key = key_summary(ctx, request.path_params["id"])
    if key is None:
        raise not_found(f"virtual key {request.path_params['id']!r}")
    since, until = _window(request, default_seconds=DEFAULT_WINDOW_DAYS * _DAY)
    seconds = BUCKETS.get(request.query_params.get("bucket", "day"))
    if seconds is None:
        raise invalid("bucket: minute, hour or day")
    if (until - since) / seconds > MAX_POINTS:
        raise invalid(f"too many points: at most {MAX_POINTS} buckets")
    engine = await ctx.fresh_engine()
    u = usage_table
    bucket = _bucket_expr(engine, seconds).label("bucket")
    q = (
        select(
            bucket,
            func.count().label("requests"),
            func.sum(case((u.c.status != 200, 1), else_=0)).label("errors"),
            *(func.coalesce(func.sum(u.c[name]), 0).label(name) for name in SUMS),
        )
        .where(u.c.virtual_key == key["id"], u.c.ts >= since, u.c.ts < until)
        .group_by(bucket)
        .order_by(bucket)
    )
    async with engine.connect() as conn:
        points = [
            {
                "t": int(r.bucket) * seconds,
                "requests": int(r.requests),
                "errors": int(r.errors or 0),
                **{name: int(r._mapping[name]) for name in SUMS if name != "cost_usd"},
                "cost_usd": float(r.cost_usd or 0.0),
            }
            for r in await conn.execute(q)
        ]
    return json_response(
        {
            "key": key,
            "since": since,
            "until": until,
            "bucket_seconds": seconds,
            "points": points,
            "total": totals(points),
        }
    )
