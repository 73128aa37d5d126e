"""Admin endpoints for channels, keys, routers, pools and the config itself.

Every write goes through `ConfigSync.change`: edit the newest stored document,
validate it exactly as a file is validated at load (400 listing every
problem), store it as a new version, publish the version, go live here at
once; every other instance follows within a poll interval. Keys are
write-only: responses show them masked with a fingerprint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tiergate.api import config_edits as edits
from tiergate.api.admin_common import (
    AdminContext,
    AdminError,
    actor_of,
    json_response,
    not_found,
    parse_int,
    read_body,
)
from tiergate.api.masking import key_view, masked_config
from tiergate.api.shadow import (
    GateStatus,
    gate_status,
    label_counts,
    live_percent,
    raises_rollout,
)
from tiergate.config import ChannelConfig, EscalationConfig, GatewayConfig, RouterConfig
from tiergate.config_store import ConfigVersion
from tiergate.routing.affinity import key_fingerprint

DEFAULT_GATE_WINDOW_DAYS = EscalationConfig().gate_window_days
#: Versions hold whole config documents: a page of them stays small.
MAX_VERSIONS = 1000

Edit = Callable[[dict[str, Any]], Any]
Check = Callable[[GatewayConfig | None, GatewayConfig], None]


async def _change(
    ctx: AdminContext,
    request: Request,
    edit: Edit,
    op: str,
    target: str,
    *,
    check: Check | None = None,
    reenable: list[list[str]] | None = None,
    router: str | None = None,
) -> tuple[ConfigVersion, Any]:
    """Apply one admin edit everywhere, and audit it (never with secret values)."""
    actor = actor_of(request)
    change: dict[str, Any] = {"op": op, "target": target}
    if reenable:
        change["reenable_keys"] = reenable
    row, result = await ctx.sync.change(edit, change=change, actor=actor, check=check)
    ctx.audit(
        "config_changed",
        router=router,
        trigger=op,
        detail={"version": row.version, "op": op, "target": target, "actor": actor},
        now=row.ts,
    )
    return row, result


# ---- views ---------------------------------------------------------------------------


def _raw_channel(ctx: AdminContext, name: str) -> dict[str, Any]:
    for ch in ctx.sync.document.get("channels") or []:
        if isinstance(ch, dict) and ch.get("name") == name:
            return ch
    return {}


def channel_view(ctx: AdminContext, ch: ChannelConfig) -> dict[str, Any]:
    """A channel as configured, with its live health here and masked keys."""
    dist = ctx.state.gateway.distributor
    runtime = dist.channel(ch.name)
    now = dist.clock()
    raw_keys = _raw_channel(ctx, ch.name).get("keys") or []
    return {
        "name": ch.name,
        "type": ch.type,
        "base_url": ch.resolved_base_url(),
        "enabled": ch.enabled,
        "weight": ch.weight,
        "priority": ch.priority,
        "drained": ch.weight <= 0,
        "healthy": runtime.healthy(now) if runtime is not None else False,
        "cache_window_seconds": ch.cache_window_seconds,
        "models": {name: m.model_dump(mode="json") for name, m in ch.models.items()},
        "keys": [
            key_view(
                runtime, i, k, raw_keys[i] if i < len(raw_keys) else None, ch.disabled_keys, now
            )
            for i, k in enumerate(ch.keys)
        ],
    }


def router_view(ctx: AdminContext, r: RouterConfig) -> dict[str, Any]:
    out = r.model_dump(mode="json")
    pools = ctx.state.gateway.planner.tier_pools.get(r.name)
    out["tiers"] = {"base": list(pools.base), "strong": list(pools.strong)} if pools else None
    out["live_percent"] = live_percent(r)
    return out


def _channel(ctx: AdminContext, name: str) -> ChannelConfig:
    for ch in ctx.cfg.channels:
        if ch.name == name:
            return ch
    raise not_found(f"channel {name!r}")


def _router(ctx: AdminContext, name: str) -> RouterConfig:
    router = ctx.cfg.router(name)
    if router is None:
        raise not_found(f"router {name!r}")
    return router


def _index(request: Request) -> int:
    return parse_int(request.path_params["index"], "index", 0, 0, 10_000)


# ---- config --------------------------------------------------------------------------


async def get_config(ctx: AdminContext, request: Request) -> Response:
    """GET /admin/api/config: the live config, secrets masked, and its version."""
    return json_response(
        {
            "version": ctx.sync.version,
            "persisted": ctx.sync.repo.persistent,
            "config": masked_config(ctx.cfg, ctx.sync.document),
        }
    )


async def list_versions(ctx: AdminContext, request: Request) -> Response:
    limit = parse_int(request.query_params.get("limit"), "limit", 50, 1, MAX_VERSIONS)
    rows = await ctx.sync.repo.history(limit)
    return json_response({"live_version": ctx.sync.version, "items": [r.summary() for r in rows]})


# ---- channels ------------------------------------------------------------------------


async def list_channels(ctx: AdminContext, request: Request) -> Response:
    return json_response({"items": [channel_view(ctx, ch) for ch in ctx.cfg.channels]})


async def get_channel(ctx: AdminContext, request: Request) -> Response:
    return json_response(channel_view(ctx, _channel(ctx, request.path_params["name"])))


async def create_channel(ctx: AdminContext, request: Request) -> Response:
    body = await read_body(request)
    row, name = await _change(
        ctx, request, lambda d: edits.add_channel(d, body), "create_channel", str(body.get("name"))
    )
    return json_response(
        {"version": row.version, "channel": channel_view(ctx, _channel(ctx, name))}, 201
    )


async def patch_channel(ctx: AdminContext, request: Request) -> Response:
    name = request.path_params["name"]
    body = await read_body(request)
    row, _ = await _change(
        ctx, request, lambda d: edits.patch_channel(d, name, body), "update_channel", name
    )
    return json_response(
        {"version": row.version, "channel": channel_view(ctx, _channel(ctx, name))}
    )


async def delete_channel(ctx: AdminContext, request: Request) -> Response:
    name = request.path_params["name"]
    row, _ = await _change(
        ctx, request, lambda d: edits.delete_channel(d, name), "delete_channel", name
    )
    return json_response({"version": row.version, "deleted": name})


_CHANNEL_ACTIONS: dict[str, tuple[str, Any]] = {
    "enable": ("enabled", True),
    "disable": ("enabled", False),
    "drain": ("weight", 0),
}


async def channel_action(ctx: AdminContext, request: Request, action: str) -> Response:
    """POST /admin/api/channels/{name}/{enable|disable|drain}."""
    name = request.path_params["name"]
    field, value = _CHANNEL_ACTIONS[action]
    row, _ = await _change(
        ctx,
        request,
        lambda d: edits.set_channel_field(d, name, field, value),
        f"{action}_channel",
        name,
    )
    return json_response(
        {"version": row.version, "channel": channel_view(ctx, _channel(ctx, name))}
    )


# ---- keys ------------------------------------------------------------------------------


def _key_response(
    ctx: AdminContext, row: ConfigVersion, name: str, index: int, status: int = 200
) -> Response:
    view = channel_view(ctx, _channel(ctx, name))
    return json_response({"version": row.version, "key": view["keys"][index]}, status)


async def list_keys(ctx: AdminContext, request: Request) -> Response:
    return json_response(
        {"items": channel_view(ctx, _channel(ctx, request.path_params["name"]))["keys"]}
    )


async def add_key(ctx: AdminContext, request: Request) -> Response:
    name = request.path_params["name"]
    body = await read_body(request)
    row, index = await _change(
        ctx, request, lambda d: edits.add_key(d, name, body), "add_key", name
    )
    return _key_response(ctx, row, name, index, 201)


async def replace_key(ctx: AdminContext, request: Request) -> Response:
    name, index = request.path_params["name"], _index(request)
    body = await read_body(request)
    row, _ = await _change(
        ctx,
        request,
        lambda d: edits.replace_key(d, name, index, body),
        "rotate_key",
        f"{name}[{index}]",
    )
    return _key_response(ctx, row, name, index)


async def delete_key(ctx: AdminContext, request: Request) -> Response:
    name, index = request.path_params["name"], _index(request)
    row, removed = await _change(
        ctx, request, lambda d: edits.delete_key(d, name, index), "delete_key", f"{name}[{index}]"
    )
    return json_response(
        {
            "version": row.version,
            "deleted": {"index": index, "fingerprint": key_fingerprint(removed)},
        }
    )


async def key_action(ctx: AdminContext, request: Request, action: str) -> Response:
    """POST .../keys/{index}/{enable|disable}. Enabling also clears a runtime
    401/403 disable on every instance (the operator fixed the key)."""
    name, index = request.path_params["name"], _index(request)
    channel = _channel(ctx, name)
    if not 0 <= index < len(channel.keys):
        raise not_found(f"key {index} of channel {name!r}")
    enabled = action == "enable"
    reenable = [[name, key_fingerprint(channel.keys[index])]] if enabled else None
    row, _ = await _change(
        ctx,
        request,
        lambda d: edits.set_key_enabled(d, name, index, enabled),
        f"{action}_key",
        f"{name}[{index}]",
        reenable=reenable,
    )
    return _key_response(ctx, row, name, index)


# ---- routers -----------------------------------------------------------------------------


async def list_routers(ctx: AdminContext, request: Request) -> Response:
    return json_response({"items": [router_view(ctx, r) for r in ctx.cfg.routers]})


async def get_router(ctx: AdminContext, request: Request) -> Response:
    return json_response(router_view(ctx, _router(ctx, request.path_params["name"])))


def _pop_force(body: dict[str, Any]) -> bool:
    force = body.pop("force", False)
    if not isinstance(force, bool):
        raise AdminError(
            400, "force: true or false", "invalid_request", ["force: expected a boolean"]
        )
    return force


async def _gated_router_change(
    ctx: AdminContext, request: Request, name: str, edit: Edit, op: str, force: bool
) -> ConfigVersion:
    """A router change that may take auto escalation live passes the go-live gate.

    The labels are counted before the change (the check itself must not do I/O);
    a router created under a new name is counted over the default window.
    """
    current = ctx.cfg.router(name)
    window_days = current.escalation.gate_window_days if current else DEFAULT_GATE_WINDOW_DAYS
    counts = (0, 0)
    if ctx.engine is not None:
        counts = await label_counts(ctx.engine, name, time.time() - window_days * 86400.0)
    forced: list[tuple[float, float, GateStatus]] = []

    def check(old: GatewayConfig | None, new: GatewayConfig) -> None:
        router = new.router(name)
        before = old.router(name) if old is not None else None
        if router is None or not raises_rollout(before, router):
            return
        gate = gate_status(router, *counts)
        if gate.open:
            return
        if not force:
            raise AdminError(
                409,
                f"Go-live gate closed for router {name!r}: {gate.reason}. Auto escalation "
                f"needs labelled shadow precision >= {gate.min_precision:.0%} over at least "
                f"{gate.min_labels} labels before rollout_percent rises above 0; send "
                '"force": true to override (audited).',
                "gate_closed",
            )
        forced.append((live_percent(before), live_percent(router), gate))

    row, _ = await _change(ctx, request, edit, op, name, check=check, router=name)
    for before, after, gate in forced:
        ctx.audit(
            "gate_forced",
            router=name,
            trigger="force",
            detail={
                "version": row.version,
                "from_percent": before,
                "to_percent": after,
                "labels": gate.labels,
                "precision": gate.precision,
                "min_labels": gate.min_labels,
                "min_precision": gate.min_precision,
                "actor": actor_of(request),
            },
            now=row.ts,
        )
    return row


async def create_router(ctx: AdminContext, request: Request) -> Response:
    body = await read_body(request)
    force = _pop_force(body)
    name = str(body.get("name"))
    row = await _gated_router_change(
        ctx, request, name, lambda d: edits.add_router(d, body), "create_router", force
    )
    return json_response(
        {"version": row.version, "router": router_view(ctx, _router(ctx, name))}, 201
    )


async def patch_router(ctx: AdminContext, request: Request) -> Response:
    name = request.path_params["name"]
    body = await read_body(request)
    force = _pop_force(body)
    row = await _gated_router_change(
        ctx, request, name, lambda d: edits.patch_router(d, name, body), "update_router", force
    )
    return json_response({"version": row.version, "router": router_view(ctx, _router(ctx, name))})


async def delete_router(ctx: AdminContext, request: Request) -> Response:
    name = request.path_params["name"]
    row, _ = await _change(
        ctx, request, lambda d: edits.delete_router(d, name), "delete_router", name, router=name
    )
    return json_response({"version": row.version, "deleted": name})


async def router_action(ctx: AdminContext, request: Request, action: str) -> Response:
    """POST /admin/api/routers/{name}/{enable|disable}; a disabled router answers 503."""
    name = request.path_params["name"]
    enabled = action == "enable"
    row, _ = await _change(
        ctx,
        request,
        lambda d: edits.set_router_enabled(d, name, enabled),
        f"{action}_router",
        name,
        router=name,
    )
    return json_response({"version": row.version, "router": router_view(ctx, _router(ctx, name))})


# ---- pools ---------------------------------------------------------------------------------


async def list_pools(ctx: AdminContext, request: Request) -> Response:
    r = _router(ctx, request.path_params["name"])
    return json_response(
        {
            "pools": r.pools,
            "weak_pool": r.weak_pool,
            "mid_pool": r.mid_pool,
            "strong_pool": r.strong_pool,
        }
    )


async def put_pool(ctx: AdminContext, request: Request) -> Response:
    name, pool = request.path_params["name"], request.path_params["pool"]
    body = await read_body(request)
    row, _ = await _change(
        ctx,
        request,
        lambda d: edits.put_pool(d, name, pool, body),
        "put_pool",
        f"{name}/{pool}",
        router=name,
    )
    return json_response(
        {"version": row.version, "pool": pool, "models": _router(ctx, name).pools[pool]}
    )


async def delete_pool(ctx: AdminContext, request: Request) -> Response:
    name, pool = request.path_params["name"], request.path_params["pool"]
    row, _ = await _change(
        ctx,
        request,
        lambda d: edits.delete_pool(d, name, pool),
        "delete_pool",
        f"{name}/{pool}",
        router=name,
    )
    return json_response({"version": row.version, "deleted": pool})
