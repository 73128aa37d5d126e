"""The admin API's route table: one row per endpoint, read by the router and by
the OpenAPI document (tiergate.api.openapi), so the two cannot drift apart.

Every admin endpoint lives under /admin/api, needs the admin token, and
answers JSON errors `{"error": {"message", "type", "code"}}` (400 validation
with `problems`, 401 token, 404 unknown entity, 409 conflict or gate, 503
admin disabled or a backend down). Operator guide: docs/operator.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tiergate.api import (
    admin_config,
    admin_records,
    admin_sessions,
    admin_stats,
    shadow,
)
from tiergate.api.admin_common import AdminContext, guarded

PREFIX = "/admin/api"
Handler = Callable[[AdminContext, Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One admin endpoint and what its OpenAPI entry needs to say about it."""

    method: str
    path: str  # below PREFIX
    handler: Handler
    summary: str
    tag: str
    body: str | None = None  # components/schemas name of the JSON body
    response: str = "Object"  # components/schemas name of the success body
    status: int = 200
    query: tuple[str, ...] = ()  # names in tiergate.api.openapi.QUERY_PARAMETERS
    csv: bool = False

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"


_LIST = ("since", "until", "limit", "offset", "format")
_WINDOW = ("since", "until")
C, K, R, S = "Channels", "Keys", "Routers", "Sessions"


def _ep(*args: object, **kw: object) -> Endpoint:
    return Endpoint(*args, **kw)  # type: ignore[arg-type]


ENDPOINTS: tuple[Endpoint, ...] = (
    # config
    _ep(
        "GET",
        "/config",
        admin_config.get_config,
        "The live config, secrets masked",
        "Config",
        response="ConfigView",
    ),
    _ep(
        "GET",
        "/config/versions",
        admin_config.list_versions,
        "Stored config versions",
        "Config",
        response="VersionList",
        query=("limit",),
    ),
    # channels
    _ep(
        "GET",
        "/channels",
        admin_config.list_channels,
        "List channels with live health",
        C,
        response="ChannelList",
    ),
    _ep(
        "POST",
        "/channels",
        admin_config.create_channel,
        "Create a channel",
        C,
        body="ChannelConfig",
        response="ChannelChange",
        status=201,
    ),
    _ep(
        "GET",
        "/channels/{name}",
        admin_config.get_channel,
        "One channel",
        C,
        response="ChannelView",
    ),
    _ep(
        "PATCH",
        "/channels/{name}",
        admin_config.patch_channel,
        "Update a channel",
        C,
        body="ChannelPatch",
        response="ChannelChange",
    ),
    _ep(
        "DELETE",
        "/channels/{name}",
        admin_config.delete_channel,
        "Delete a channel",
        C,
        response="Deleted",
    ),
    *(
        _ep(
            "POST",
            f"/channels/{{name}}/{action}",
            partial(admin_config.channel_action, action=action),
            summary,
            C,
            response="ChannelChange",
        )
        for action, summary in (
            ("enable", "Enable a channel"),
            ("disable", "Disable a channel"),
            ("drain", "Drain a channel (weight 0: used only when nothing else can serve)"),
        )
    ),
    # keys
    _ep(
        "GET",
        "/channels/{name}/keys",
        admin_config.list_keys,
        "A channel's keys, masked",
        K,
        response="KeyList",
    ),
    _ep(
        "POST",
        "/channels/{name}/keys",
        admin_config.add_key,
        "Add a key (write-only)",
        K,
        body="KeyBody",
        response="KeyChange",
        status=201,
    ),
    _ep(
        "PUT",
        "/channels/{name}/keys/{index}",
        admin_config.replace_key,
        "Rotate a key in place",
        K,
        body="KeyBody",
        response="KeyChange",
    ),
    _ep(
        "DELETE",
        "/channels/{name}/keys/{index}",
        admin_config.delete_key,
        "Remove a key (later keys shift down)",
        K,
        response="KeyDeleted",
    ),
    *(
        _ep(
            "POST",
            f"/channels/{{name}}/keys/{{index}}/{action}",
            partial(admin_config.key_action, action=action),
            summary,
            K,
            response="KeyChange",
        )
        for action, summary in (
            ("enable", "Enable a key (also clears a runtime 401/403 disable)"),
            ("disable", "Disable a key"),
        )
    ),
    # routers and pools
    _ep("GET", "/routers", admin_config.list_routers, "List routers", R, response="RouterList"),
    _ep(
        "POST",
        "/routers",
        admin_config.create_router,
        "Create a router (go-live gate)",
        R,
        body="RouterCreate",
        response="RouterChange",
        status=201,
    ),
    _ep("GET", "/routers/{name}", admin_config.get_router, "One router", R, response="RouterView"),
    _ep(
        "PATCH",
        "/routers/{name}",
        admin_config.patch_router,
        "Update a router (raising rollout_percent passes the go-live gate)",
        R,
        body="RouterPatch",
        response="RouterChange",
    ),
    _ep(
        "DELETE",
        "/routers/{name}",
        admin_config.delete_router,
        "Delete a router",
        R,
        response="Deleted",
    ),
    *(
        _ep(
            "POST",
            f"/routers/{{name}}/{action}",
            partial(admin_config.router_action, action=action),
            summary,
            R,
            response="RouterChange",
        )
        for action, summary in (
            ("enable", "Enable a router"),
            ("disable", "Disable a router (requests get 503 router_disabled)"),
        )
    ),
    _ep(
        "GET",
        "/routers/{name}/gate",
        shadow.router_gate_handler,
        "The router's go-live gate status",
        R,
        response="GateStatus",
    ),
    _ep(
        "GET",
        "/routers/{name}/pools",
        admin_config.list_pools,
        "A router's pools",
        R,
        response="PoolList",
    ),
    _ep(
        "PUT",
        "/routers/{name}/pools/{pool}",
        admin_config.put_pool,
        "Create or replace a named pool",
        R,
        body="PoolBody",
        response="PoolChange",
    ),
    _ep(
        "DELETE",
        "/routers/{name}/pools/{pool}",
        admin_config.delete_pool,
        "Delete a named pool",
        R,
        response="Deleted",
    ),
    # sessions
    _ep(
        "GET",
        "/sessions/{workspace}/{session_id}",
        admin_sessions.get_session,
        "Inspect a session: tier state, pins, recent decisions",
        S,
        response="SessionView",
        query=("router",),
    ),
    _ep(
        "POST",
        "/sessions/{workspace}/{session_id}/reset",
        admin_sessions.reset_session,
        "Reset a session's tier to base (audited; the per-session cap is not refunded)",
        S,
        response="ResetResult",
        query=("router",),
    ),
    _ep(
        "GET",
        "/session-scopes/{scope}",
        admin_sessions.get_session,
        "Inspect a session by scope (usage rows' session_hash)",
        S,
        response="SessionView",
        query=("router",),
    ),
    _ep(
        "POST",
        "/session-scopes/{scope}/reset",
        admin_sessions.reset_session,
        "Reset a session's tier by scope",
        S,
        response="ResetResult",
        query=("router",),
    ),
    # records
    _ep(
        "GET",
        "/audit",
        admin_records.list_audit,
        "Audit events (JSON or CSV)",
        "Records",
        response="AuditList",
        csv=True,
        query=("router", "workspace", "event", "trigger", "session", "request_id", *_LIST),
    ),
    _ep(
        "GET",
        "/usage",
        admin_records.list_usage,
        "Usage rows (JSON or CSV)",
        "Records",
        response="UsageList",
        csv=True,
        query=(
            "router",
            "workspace",
            "model",
            "channel",
            "tier",
            "status",
            "session",
            "request_id",
            *_LIST,
        ),
    ),
    # shadow labelling
    _ep(
        "GET",
        "/shadow",
        shadow.list_shadow,
        "Shadow decisions with evidence and label",
        "Shadow",
        response="ShadowList",
        query=("router", "labelled", "since", "until", "limit", "offset"),
    ),
    _ep(
        "POST",
        "/shadow/{id}/label",
        shadow.label_shadow,
        "Label a shadow decision correct or not",
        "Shadow",
        body="LabelBody",
        response="ShadowItem",
    ),
    # stats for the dashboard
    _ep(
        "GET",
        "/stats/traffic",
        admin_stats.traffic,
        "Requests, errors and spend over time by router and tier",
        "Stats",
        response="TrafficStats",
        query=("router", "bucket", *_WINDOW),
    ),
    _ep(
        "GET",
        "/stats/share",
        admin_stats.share,
        "Escalated share against its cap",
        "Stats",
        response="ShareStats",
    ),
    _ep(
        "GET",
        "/stats/escalations",
        admin_stats.escalations,
        "Escalation events by trigger and cap denials by reason",
        "Stats",
        response="EscalationStats",
        query=("router", *_WINDOW),
    ),
    _ep(
        "GET",
        "/stats/quality",
        admin_stats.quality,
        "Shadow precision, go-live gate and escalation latency",
        "Stats",
        response="QualityStats",
        query=("router", *_WINDOW),
    ),
    _ep(
        "GET",
        "/stats/cache",
        admin_stats.cache,
        "Prompt-cache hit rate per channel and key",
        "Stats",
        response="CacheStats",
        query=_WINDOW,
    ),
    _ep(
        "GET",
        "/stats/savings",
        admin_stats.savings,
        "Cost saved by the prompt cache",
        "Stats",
        response="SavingsStats",
        query=_WINDOW,
    ),
)


def admin_routes(ctx: AdminContext) -> list[Route]:
    """Starlette routes for every admin endpoint, each behind the admin token."""
    routes = []
    for ep in ENDPOINTS:
        routes.append(
            Route(PREFIX + ep.path, guarded(ctx, ep.handler, ep.name), methods=[ep.method])
        )
    return routes
