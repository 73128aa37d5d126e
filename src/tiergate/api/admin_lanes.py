"""A session's sticky-tier lanes in the admin API: list them, release one (#27).

A lane is named as a client names it: workspace, the session id of its tier
metadata (`session_tier.session`, or the roleplay shape's `session_id`) and the
lane (`main`, `delegation`, `aux`); `?kind=managed|public` narrows it to one
request kind, otherwise both are looked at. Releasing frees the lane at once,
without waiting for a crashed holder's lease to lapse (lanes/operator.py), and
is audited as `lane_released` with the actor from `X-Tiergate-Actor`.

The memory lane store belongs to one process: this reaches the lanes of the
instance that answers. SQLite and Redis are shared, so any instance will do.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tiergate.api.admin_common import (
    AdminContext,
    AdminError,
    actor_of,
    invalid,
    json_response,
    not_found,
    parse_bool,
)
from tiergate.api.admin_sessions import workspace_id
from tiergate.lanes import SessionTierError, SessionTiers, StorageUnavailable
from tiergate.lanes.metadata import LANES, Kind
from tiergate.lanes.operator import KINDS, lane_refs, lane_views, release_lane
from tiergate.routing.session import SessionId, sanitize_session_id, session_scope


def _tiers(ctx: AdminContext) -> SessionTiers:
    tiers: SessionTiers = ctx.state.gateway.lanes.tiers
    return tiers


def _ident(ctx: AdminContext, request: Request) -> tuple[str, str, dict[str, Any]]:
    """(principal, raw session id, the identification echoed in replies)."""
    ws = request.path_params["workspace"]
    if not any(w.name == ws for w in ctx.cfg.workspaces):
        raise not_found(f"workspace {ws!r}")
    session = request.path_params["session_id"]
    return workspace_id(ws), session, {"workspace": ws, "session_id": session}


def _kinds(request: Request) -> tuple[Kind, ...]:
    kind = request.query_params.get("kind")
    if kind is None:
        return KINDS
    if kind not in KINDS:
        raise invalid("kind: managed or public")
    return (kind,)


def _storage_error(err: SessionTierError) -> AdminError:
    if err.status == 409:
        return AdminError(409, "The lane kept changing; retry", "session_tier_busy")
    return AdminError(503, "The session-tier lane store is unavailable", err.code)


def _audit_hash(ctx: AdminContext, workspace: str, session: str) -> str | None:
    """The session inspector's hash of the same id, so the release shows among the
    session's recent decisions."""
    sid = sanitize_session_id(session)
    if sid is None:
        return None
    return session_scope(workspace_id(workspace), SessionId(sid, "admin", True))


async def list_lanes(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/sessions/{workspace}/{session_id}/lanes[?kind=]."""
    principal, session, ident = _ident(ctx, request)
    kinds = _kinds(request)
    tiers = _tiers(ctx)
    if tiers.store is None:
        return json_response({**ident, "enabled": False, "lanes": []})
    now = tiers.clock()
    try:
        lanes = await lane_views(tiers.store, lane_refs(principal, session, kinds=kinds), now)
    except StorageUnavailable:
        raise AdminError(
            503, "The session-tier lane store is unavailable", "session_tier_storage_unavailable"
        ) from None
    return json_response(
        {**ident, "enabled": True, "lease_seconds": tiers.settings.lease, "lanes": lanes}
    )


async def release(ctx: AdminContext, request: Request) -> Response:
    """POST .../lanes/{lane}/release[?kind=&forget=]: free the lane now; 404 if absent."""
    principal, session, ident = _ident(ctx, request)
    lane = request.path_params["lane"]
    if lane not in LANES:
        raise invalid("lane: main, delegation or aux")
    kinds = _kinds(request)
    forget = parse_bool(request.query_params.get("forget"), "forget") or False
    tiers = _tiers(ctx)
    if tiers.store is None:
        raise not_found("lane (session tiers are off)")
    now = tiers.clock()
    results = []
    for ref in lane_refs(principal, session, lanes=(lane,), kinds=kinds):
        try:
            done = await release_lane(tiers.store, ref, now, forget=forget)
        except SessionTierError as err:
            raise _storage_error(err) from None
        if done is None:
            continue
        results.append(
            {
                "kind": ref.kind,
                "scope": ref.scope,
                "was_leased": done.was_leased,
                "lease_owner": done.lease_owner,
                "forgot": done.forgot,
            }
        )
        ctx.audit(
            "lane_released",
            session_hash=_audit_hash(ctx, ident["workspace"], session),
            trigger="admin",
            detail={
                "lane": lane,
                "kind": ref.kind,
                "lane_scope": ref.scope,
                "was_leased": done.was_leased,
                "lease_owner": done.lease_owner,
                "forget": forget,
                "actor": actor_of(request),
            },
            now=time.time(),
        )
    if not results:
        raise not_found(f"lane {lane!r} of this session")
    return json_response({**ident, "lane": lane, "released": results})
