"""Virtual keys: workspace tokens issued, listed and revoked through the admin API.

A key lives in its workspace's `virtual_keys` in the shared config document,
so it reaches every instance the way any config change does (ConfigSync,
within a poll interval) and each change is a config version with an audit
event. Only the token's SHA-256 and its first characters are stored; the
token is in the create response and nowhere else. Spend shown per key is
read from the limiter's counters (tiergate.gateway.limits), so it is exact
only for keys with a budget. See docs/virtual-keys.md.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tiergate.api.admin_common import AdminContext, invalid, json_response, not_found, read_body
from tiergate.api.admin_config import _change
from tiergate.config import VirtualKeyConfig
from tiergate.gateway.limits import budget_key, month_budget_key
from tiergate.state.memory import parse_number

TOKEN_PREFIX = "tgk-"
SHOWN_CHARACTERS = 10  # "tgk-" and six random characters: enough to tell keys apart
_LIMIT_FIELDS = ("rate_limit_rpm", "budget_usd_per_day", "budget_usd_per_month")

Doc = dict[str, Any]


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def key_record(name: str, token: str, limits: dict[str, Any], now: float) -> dict[str, Any]:
    """The stored form of a new key: its hash, never the token."""
    return {
        "id": "vk_" + secrets.token_hex(8),
        "name": name,
        "sha256": hashlib.sha256(token.encode()).hexdigest(),
        "prefix": token[:SHOWN_CHARACTERS],
        "created": now,
        **{k: v for k, v in limits.items() if v is not None},
    }


# ---- edits of the config document (pure) -----------------------------------------------


def _workspaces(doc: Doc) -> list[dict[str, Any]]:
    items = doc.get("workspaces")
    return [w for w in items if isinstance(w, dict)] if isinstance(items, list) else []


def add_virtual_key(doc: Doc, workspace: str, record: dict[str, Any]) -> None:
    for ws in _workspaces(doc):
        if ws.get("name") == workspace:
            ws.setdefault("virtual_keys", []).append(record)
            return
    raise not_found(f"workspace {workspace!r}")


def revoke_virtual_key(doc: Doc, key_id: str, now: float) -> str:
    """Mark the key revoked (kept, so its id stays in audit and lists); its workspace."""
    for ws in _workspaces(doc):
        for vk in ws.get("virtual_keys") or []:
            if isinstance(vk, dict) and vk.get("id") == key_id:
                if vk.get("revoked") is None:
                    vk["revoked"] = now
                return str(ws.get("name"))
    raise not_found(f"virtual key {key_id!r}")


# ---- views ------------------------------------------------------------------------------


async def _views(ctx: AdminContext, workspace: str | None) -> list[dict[str, Any]]:
    now = time.time()
    found = [
        (w.name, vk)
        for w in ctx.cfg.workspaces
        if workspace is None or w.name == workspace
        for vk in w.virtual_keys
    ]
    counters = [
        k for _, vk in found for k in (budget_key(vk.id, now), month_budget_key(vk.id, now))
    ]
    raw = await ctx.state.store.get_many(counters) if counters else []
    return [
        _view(ws, vk, parse_number(raw[2 * i]), parse_number(raw[2 * i + 1]))
        for i, (ws, vk) in enumerate(found)
    ]


def _view(workspace: str, vk: VirtualKeyConfig, today: float, month: float) -> dict[str, Any]:
    return {
        "id": vk.id,
        "workspace": workspace,
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
    if not isinstance(name, str):
        raise invalid("name: a string")
    unknown = sorted(set(body) - {"workspace", "name", *_LIMIT_FIELDS})
    if unknown:
        raise invalid("Unknown fields", [f"{k}: not a virtual key field" for k in unknown])
    token = new_token()
    record = key_record(name, token, {k: body.get(k) for k in _LIMIT_FIELDS}, time.time())
    row, _ = await _change(
        ctx,
        request,
        lambda d: add_virtual_key(d, workspace, record),
        "create_virtual_key",
        record["id"],
    )
    view = await _one(ctx, record["id"])
    return json_response({"version": row.version, "key": view, "token": token}, 201)


async def revoke_key(ctx: AdminContext, request: Request) -> Response:
    """POST /admin/api/virtual-keys/{id}/revoke: refused from now on, everywhere."""
    key_id = request.path_params["id"]
    row, _ = await _change(
        ctx,
        request,
        lambda d: revoke_virtual_key(d, key_id, time.time()),
        "revoke_virtual_key",
        key_id,
    )
    return json_response({"version": row.version, "key": await _one(ctx, key_id)})
