"""The session inspector: tier state, pins and recent decisions of one session,
and an operator reset of its tier.

A session is named by workspace and session id (the id a client sends in
`X-OrcaRouter-Session-Id` or the body), or directly by its scope (the hash in
usage rows' `session_hash`), which also reaches fingerprinted sessions. Keys and
audit rows hold hashes only, so the raw id is needed to compute them and is
never stored.

The reset goes through the escalation state machinery: the `Reset` intent of
`tier_state.apply_intents` inside `store.transact`, exactly as a client's
`X-OrcaRouter-Tier: base` (tier back to base, evidence cleared, epoch bumped,
ratchets used NOT refunded), and is audited as a `reset` with trigger `admin`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict
from typing import Any

from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import Response

from tiergate.api.admin_common import (
    AdminContext,
    AdminError,
    actor_of,
    invalid,
    json_response,
    not_found,
)
from tiergate.config import RouterConfig
from tiergate.db import audit_table, usage_table
from tiergate.routing import affinity
from tiergate.routing.escalation import escalation_applies
from tiergate.routing.session import SessionId, sanitize_session_id, session_scope
from tiergate.routing.tier_state import (
    Reset,
    TierState,
    TurnOutcome,
    apply_intents,
    session_hash,
    tier_state_key,
)
from tiergate.state.base import Write

RECENT_ROWS = 50


def workspace_id(name: str) -> str:
    """The workspace's id in state keys (tiergate.gateway.auth.TokenTable)."""
    return hashlib.sha256(b"ws:" + name.encode()).hexdigest()[:16]


def _scope_from_path(ctx: AdminContext, request: Request) -> tuple[str, dict[str, Any]]:
    params = request.path_params
    if "scope" in params:
        scope = params["scope"]
        if not (len(scope) == 32 and all(c in "0123456789abcdef" for c in scope)):
            raise invalid("scope: 32 lowercase hex characters (usage rows' session_hash)")
        return scope, {"scope": scope}
    ws = params["workspace"]
    if not any(w.name == ws for w in ctx.cfg.workspaces):
        raise not_found(f"workspace {ws!r}")
    sid = sanitize_session_id(params["session_id"])
    if sid is None:
        raise invalid("session_id: empty after sanitising")
    scope = session_scope(workspace_id(ws), SessionId(sid, "admin", True))
    return scope, {"workspace": ws, "session_id": sid, "scope": scope}


def _routers(ctx: AdminContext, request: Request) -> list[RouterConfig]:
    name = request.query_params.get("router")
    if not name:
        return list(ctx.cfg.routers)
    router = ctx.cfg.router(name)
    if router is None:
        raise not_found(f"router {name!r}")
    return [router]


def tier_state_view(
    state: TierState | None, router: RouterConfig, now: float
) -> dict[str, Any] | None:
    if state is None:
        return None
    esc = router.escalation
    out = asdict(state)
    out["live_strikes"] = len(state.live_strikes(now, esc.strike_decay_seconds))
    out["ratchets_left"] = max(esc.max_per_session - state.escalations_used, 0)
    out["expires_at"] = state.last_seen + esc.tier_ttl_seconds
    del out["seen_turns"]  # turn-id hashes: noise for an operator
    return out


async def _recent(
    ctx: AdminContext, scope: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if ctx.engine is None:
        return [], []
    engine = await ctx.fresh_engine()
    a, u = audit_table, usage_table
    qa = (
        select(a)
        # the scope since audit rows share the usage rows' hash; session_hash(scope)
        # finds the rows written before that
        .where(a.c.session_hash.in_([scope, session_hash(scope)]))
        .order_by(a.c.ts.desc())
        .limit(RECENT_ROWS)
    )
    qu = select(u).where(u.c.session_hash == scope).order_by(u.c.ts.desc()).limit(RECENT_ROWS)
    async with engine.connect() as conn:
        events = [dict(r._mapping) for r in await conn.execute(qa)]
        requests = [dict(r._mapping) for r in await conn.execute(qu)]
    return events, requests


async def get_session(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/sessions/{workspace}/{session_id}[?router=] (or /session-scopes/{scope})."""
    scope, ident = _scope_from_path(ctx, request)
    routers = _routers(ctx, request)
    models = list(ctx.cfg.exposed_models())
    keys: list[str] = []
    for r in routers:
        keys += [
            tier_state_key(scope, r.name),
            affinity.model_pin_key(scope, r.name, affinity.BASE_TIER),
            affinity.model_pin_key(scope, r.name, affinity.STRONG_TIER),
        ]
    keys += [affinity.channel_pin_key(scope, m) for m in models]
    values = await ctx.state.store.get_many(keys)
    now = time.time()
    out_routers = []
    for i, r in enumerate(routers):
        raw_state, base_pin, strong_pin = values[3 * i : 3 * i + 3]
        out_routers.append(
            {
                "router": r.name,
                "escalation_mode": r.escalation.mode if escalation_applies(r) else "off",
                "tier_state": tier_state_view(TierState.from_bytes(raw_state), r, now),
                "model_pins": {
                    "base": base_pin.decode() if base_pin else None,
                    "strong": strong_pin.decode() if strong_pin else None,
                },
            }
        )
    channel_pins = {}
    for model, raw in zip(models, values[3 * len(routers) :], strict=True):
        pin = affinity.decode_channel_pin(raw)
        if pin is not None:
            channel_pins[model] = {"channel": pin.channel, "key_index": pin.key_index}
    events, recent = await _recent(ctx, scope)
    return json_response(
        {
            **ident,
            "session_hash": scope,
            "routers": out_routers,
            "channel_pins": channel_pins,
            "recent_events": events,
            "recent_requests": recent,
        }
    )


async def reset_session(ctx: AdminContext, request: Request) -> Response:
    """POST .../reset[?router=]: the session's tier back to base on every (or one) router."""
    scope, ident = _scope_from_path(ctx, request)
    routers = [r for r in _routers(ctx, request) if escalation_applies(r)]
    if request.query_params.get("router") and not routers:
        raise AdminError(409, "Escalation is off for this router: no tier to reset", "no_tier")
    results = []
    now = time.time()
    shash = scope  # the usage rows' and escalation audit events' session_hash
    for r in routers:
        key, esc = tier_state_key(scope, r.name), r.escalation

        def reset(
            values: list[bytes | None],
        ) -> tuple[list[Write], tuple[TierState, TierState] | None]:
            state = TierState.from_bytes(values[0])
            if state is None:
                return [], None
            outcome = TurnOutcome(success=True, served_tier="base")
            new, _ = apply_intents(state, [Reset(state.epoch)], outcome, esc, now)  # noqa: B023
            return [Write(key, new.to_bytes(), esc.tier_ttl_seconds)], (state, new)  # noqa: B023

        change = await ctx.state.store.transact([key], reset)
        if change is None:
            results.append(
                {"router": r.name, "changed": False, "tier_before": None, "tier_after": None}
            )
            continue
        before, after = change
        results.append(
            {
                "router": r.name,
                "changed": True,
                "tier_before": before.tier,
                "tier_after": after.tier,
                "escalations_used": after.escalations_used,
            }
        )
        ctx.audit(
            "reset",
            router=r.name,
            session_hash=shash,
            trigger="admin",
            detail={
                "header": None,
                "tier_before": before.tier,
                "tier_after": after.tier,
                "difficulty_streak": before.difficulty_streak,
                "strike_count": len(before.live_strikes(now, esc.strike_decay_seconds)),
                "escalations_used": after.escalations_used,
                "actor": actor_of(request),
            },
            now=now,
        )
    return json_response({**ident, "session_hash": shash, "routers": results})
