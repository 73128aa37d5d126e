"""Virtual keys: workspace tokens issued, listed and revoked through the admin API.

A key lives in the `virtual_keys` table, apart from the config document, so no
YAML seed can delete it (tiergate.virtual_keys_store). Every instance reads the
table's counter every 50 ms, so a key created or revoked on one instance is
known to all within about 100 ms. Each change has an audit event. Only a keyed
hash of the token and its first characters are stored; the token is in the
create response and nowhere else. Spend shown per key is read from the
limiter's counters (tiergate.gateway.limits), so it is exact only for keys with
a budget. See docs/virtual-keys.md.
"""

from __future__ import annotations

import contextlib
import math
import secrets
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
    read_body,
)
from tiergate.gateway.limits import budget_key, month_budget_key
from tiergate.state.memory import parse_number
from tiergate.virtual_keys_store import VirtualKey, VirtualKeys, token_digest

TOKEN_PREFIX = "tgk-"
SHOWN_CHARACTERS = 10  # "tgk-" and six random characters: enough to tell keys apart
_LIMIT_FIELDS = ("rate_limit_rpm", "budget_usd_per_day", "budget_usd_per_month")
MAX_NAME = 128


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def keys_of(ctx: AdminContext) -> VirtualKeys:
    keys = ctx.state.gateway.tokens.keys
    if keys is None:
        raise AdminError(503, "Virtual keys are not available here", "unavailable")
    return keys


def limits_of(body: dict[str, Any]) -> dict[str, Any]:
    """The limit fields of a create body, validated (400 listing every problem)."""
    problems = []
    out: dict[str, Any] = {}
    rpm = body.get("rate_limit_rpm")
    if rpm is not None and (isinstance(rpm, bool) or not isinstance(rpm, int) or rpm < 1):
        problems.append("rate_limit_rpm: an integer, at least 1")
    else:
        out["rate_limit_rpm"] = rpm
    for name in ("budget_usd_per_day", "budget_usd_per_month"):
        value = body.get(name)
        ok = value is None or (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        )
        if not ok:
            problems.append(f"{name}: a number of USD, at least 0")
        else:
            out[name] = None if value is None else float(value)
    if problems:
        raise invalid("Invalid virtual key", problems)
    return out


# ---- views ------------------------------------------------------------------------------


async def _views(ctx: AdminContext, workspace: str | None) -> list[dict[str, Any]]:
    now = time.time()
    keys = keys_of(ctx)
    with contextlib.suppress(Exception):  # read your writes from another instance
        await keys.refresh()
    found = sorted(
        (vk for vk in keys.by_id.values() if workspace is None or vk.workspace == workspace),
        key=lambda vk: (vk.created, vk.id),
    )
    counters = [k for vk in found for k in (budget_key(vk.id, now), month_budget_key(vk.id, now))]
    raw = await ctx.state.store.get_many(counters) if counters else []
    return [
        _view(vk, parse_number(raw[2 * i]), parse_number(raw[2 * i + 1]))
        for i, vk in enumerate(found)
    ]


def _view(vk: VirtualKey, today: float, month: float) -> dict[str, Any]:
    return {
        "id": vk.id,
        "workspace": vk.workspace,
        "name": vk.name,
        "prefix": vk.prefix,
        "created": vk.created,
        "revoked": vk.revoked,
        "active": vk.revoked is None,
        "rate_limit_rpm": vk.rate_limit_rpm,
        "budget_usd_per_day": vk.budget_usd_per_day,
        "budget_usd_per_month": vk.budget_usd_per_month,
        # the limiter counts spend only where there is a budget to enforce
        "spend_today_usd": today if vk.budget_usd_per_day is not None else None,
        "spend_month_usd": month if vk.budget_usd_per_month is not None else None,
    }


async def _one(ctx: AdminContext, key_id: str) -> dict[str, Any]:
    views = [v for v in await _views(ctx, None) if v["id"] == key_id]
    if not views:
        raise not_found(f"virtual key {key_id!r}")
    return views[0]


def _audit(ctx: AdminContext, request: Request, op: str, vk: VirtualKey) -> None:
    actor = actor_of(request)
    ctx.audit(
        "config_changed",
        trigger=op,
        detail={"version": vk.seq, "op": op, "target": vk.id, "actor": actor},
        now=time.time(),
    )


# ---- endpoints --------------------------------------------------------------------------


async def list_keys(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/virtual-keys[?workspace=]: every key, revoked ones included."""
    return json_response({"items": await _views(ctx, request.query_params.get("workspace"))})


async def create_key(ctx: AdminContext, request: Request) -> Response:
    """POST /admin/api/virtual-keys: a new token, returned this once."""
    body = await read_body(request)
    workspace, name = body.get("workspace"), body.get("name", "")
    if not isinstance(workspace, str) or not workspace:
        raise invalid("workspace: the name of an existing workspace")
    if not isinstance(name, str) or len(name) > MAX_NAME:
        raise invalid(f"name: a string of at most {MAX_NAME} characters")
    unknown = sorted(set(body) - {"workspace", "name", *_LIMIT_FIELDS})
    if unknown:
        raise invalid("Unknown fields", [f"{k}: not a virtual key field" for k in unknown])
    if all(w.name != workspace for w in ctx.cfg.workspaces):
        raise not_found(f"workspace {workspace!r}")
    limits = limits_of(body)
    keys = keys_of(ctx)
    token = new_token()
    made = await keys.create(
        VirtualKey(
            id="vk_" + secrets.token_hex(8),
            workspace=workspace,
            token_hash=token_digest(keys.secret, token),
            name=name,
            prefix=token[:SHOWN_CHARACTERS],
            created=time.time(),
            **limits,
        )
    )
    _audit(ctx, request, "create_virtual_key", made)
    view = await _one(ctx, made.id)
    return json_response({"version": made.seq, "key": view, "token": token}, 201)


async def revoke_key(ctx: AdminContext, request: Request) -> Response:
    """POST /admin/api/virtual-keys/{id}/revoke: refused from now on, everywhere."""
    key_id = request.path_params["id"]
    done = await keys_of(ctx).revoke(key_id, time.time())
    if done is None:
        raise not_found(f"virtual key {key_id!r}")
    _audit(ctx, request, "revoke_virtual_key", done)
    return json_response({"version": done.seq, "key": await _one(ctx, key_id)})
