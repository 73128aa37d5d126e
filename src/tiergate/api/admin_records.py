"""Audit events and usage rows: filtered listing and CSV export.

Filters: router, workspace (by name; audit rows written by the escalation
engine carry the workspace's id, which matches too), event or status, session,
time range (`since` inclusive, `until` exclusive; unix seconds or ISO 8601).
Newest first. `?format=csv` returns the same rows as a CSV attachment (up to
MAX_CSV_ROWS; `detail` as a JSON column).
"""

from __future__ import annotations

import csv
import io
import time
from typing import Any

import orjson
from sqlalchemy import Table, or_, select
from starlette.requests import Request
from starlette.responses import Response

from tiergate.api.admin_common import (
    DEFAULT_LIMIT,
    MAX_CSV_ROWS,
    MAX_LIMIT,
    MAX_OFFSET,
    AdminContext,
    invalid,
    json_response,
    parse_int,
    parse_time,
)
from tiergate.api.admin_sessions import workspace_id
from tiergate.db import audit_table, usage_table

TIERS = ("base", "strong")


def _common_filters(table: Table, request: Request) -> list[Any]:
    qp = request.query_params
    conds: list[Any] = []
    if qp.get("router"):
        conds.append(table.c.router == qp["router"])
    if qp.get("workspace"):
        ws = qp["workspace"]
        conds.append(or_(table.c.workspace == ws, table.c.workspace == workspace_id(ws)))
    if qp.get("session"):
        conds.append(table.c.session_hash == qp["session"])
    if qp.get("request_id"):
        conds.append(table.c.request_id == qp["request_id"])
    since, until = parse_time(qp.get("since"), "since"), parse_time(qp.get("until"), "until")
    if since is not None:
        conds.append(table.c.ts >= since)
    if until is not None:
        conds.append(table.c.ts < until)
    return conds


def _audit_filters(request: Request) -> list[Any]:
    conds = _common_filters(audit_table, request)
    events = [e for raw in request.query_params.getlist("event") for e in raw.split(",") if e]
    if events:
        conds.append(audit_table.c.event.in_(events))
    if request.query_params.get("trigger"):
        conds.append(audit_table.c.trigger == request.query_params["trigger"])
    return conds


def _usage_filters(request: Request) -> list[Any]:
    t, qp = usage_table, request.query_params
    conds = _common_filters(t, request)
    for name in ("model", "channel", "virtual_key"):
        if qp.get(name):
            conds.append(t.c[name] == qp[name])
    if "tier" in qp:
        if qp["tier"] not in TIERS:  # a typo must not read as "no such rows"
            raise invalid("tier: base or strong")
        conds.append(t.c.tier == qp["tier"])
    if "status" in qp:
        status = parse_int(qp["status"], "status", 0, 100, 599)
        conds.append(t.c.status == status)
    return conds


def _csv(rows: list[dict[str, Any]], columns: list[str], name: str) -> Response:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(columns)
    for r in rows:
        writer.writerow(
            [
                orjson.dumps(r[c]).decode() if isinstance(r[c], dict | list) else r[c]
                for c in columns
            ]
        )
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return Response(
        buf.getvalue(),
        200,
        {"content-disposition": f'attachment; filename="tiergate-{name}-{stamp}.csv"'},
        media_type="text/csv",
    )


async def _listing(
    ctx: AdminContext, request: Request, table: Table, conds: list[Any], name: str
) -> Response:
    qp = request.query_params
    fmt = qp.get("format", "json")
    if fmt not in ("json", "csv"):
        raise invalid("format: json or csv")
    cap = MAX_CSV_ROWS if fmt == "csv" else MAX_LIMIT
    default = MAX_CSV_ROWS if fmt == "csv" else DEFAULT_LIMIT
    limit = parse_int(qp.get("limit"), "limit", default, 1, cap)
    offset = parse_int(qp.get("offset"), "offset", 0, 0, MAX_OFFSET)
    q = (
        select(table)
        .where(*conds)
        .order_by(table.c.ts.desc(), table.c.id.desc())
        .limit(limit)
        .offset(offset)
    )
    engine = await ctx.fresh_engine()
    async with engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(q)]
    if fmt == "csv":
        return _csv(rows, [c.name for c in table.columns], name)
    names = {workspace_id(w.name): w.name for w in ctx.cfg.workspaces}
    for row in rows:  # escalation audit rows carry the workspace's id: name it
        row["workspace_name"] = names.get(row["workspace"], row["workspace"])
    return json_response({"items": rows, "limit": limit, "offset": offset})


async def list_audit(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/audit?router=&workspace=&event=&trigger=&session=&since=&until="""
    return await _listing(ctx, request, audit_table, _audit_filters(request), "audit")


async def list_usage(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/usage?router=&workspace=&model=&channel=&tier=&status=&virtual_key=
    &since=&until="""
    return await _listing(ctx, request, usage_table, _usage_filters(request), "usage")
