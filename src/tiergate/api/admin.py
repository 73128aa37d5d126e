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
    admin_key_usage,
    admin_keys,
    admin_lanes,
    admin_recent_sessions,
    admin_records,
    admin_sessions,
    admin_stats,
    admin_value,
    shadow,
)
from tiergate.api.admin_common import MAX_CSV_ROWS, MAX_LIMIT, AdminContext, guarded

PREFIX = "/admin/api"
Handler = Callable[[AdminContext, Request], Awaitable[Response]]
RouteHandler = Callable[[Request], Awaitable[Response]]


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
    max_limit: int = MAX_LIMIT  # the `limit` query parameter's maximum, if it has one

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"


_LIST = ("since", "until", "limit", "offset", "format")
_WINDOW = ("since", "until")
C, K, R, S, V = "Channels", "Keys", "Routers", "Sessions", "Virtual keys"


ENDPOINTS: tuple[Endpoint, ...] = (
    # config
    Endpoint(
        "GET",
        "/config",
        admin_config.get_config,
        "The live config, secrets masked",
        "Config",
        response="ConfigView",
    ),
    Endpoint(
        "GET",
        "/config/versions",
        admin_config.list_versions,
        "Stored config versions",
        "Config",
        response="VersionList",
        query=("limit",),
        max_limit=admin_config.MAX_VERSIONS,
    ),
    # channels
    Endpoint(
        "GET",
        "/channels",
        admin_config.list_channels,
        "List channels with live health",
        C,
        response="ChannelList",
    ),
    Endpoint(
        "POST",
        "/channels",
        admin_config.create_channel,
        "Create a channel",
        C,
        body="ChannelConfig",
        response="ChannelChange",
        status=201,
    ),
    Endpoint(
        "GET",
        "/channels/{name}",
        admin_config.get_channel,
        "One channel",
        C,
        response="ChannelView",
    ),
    Endpoint(
        "PATCH",
        "/channels/{name}",
        admin_config.patch_channel,
        "Update a channel",
        C,
        body="ChannelPatch",
        response="ChannelChange",
    ),
    Endpoint(
        "DELETE",
        "/channels/{name}",
        admin_config.delete_channel,
        "Delete a channel",
        C,
        response="Deleted",
    ),
    *(
        Endpoint(
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
    Endpoint(
        "GET",
        "/channels/{name}/keys",
        admin_config.list_keys,
        "A channel's keys, masked",
        K,
        response="KeyList",
    ),
    Endpoint(
        "POST",
        "/channels/{name}/keys",
        admin_config.add_key,
        "Add a key (write-only)",
        K,
        body="KeyBody",
        response="KeyChange",
        status=201,
    ),
    Endpoint(
        "PUT",
        "/channels/{name}/keys/{index}",
        admin_config.replace_key,
        "Rotate a key in place",
        K,
        body="KeyBody",
        response="KeyChange",
    ),
    Endpoint(
        "DELETE",
        "/channels/{name}/keys/{index}",
        admin_config.delete_key,
        "Remove a key (later keys shift down)",
        K,
        response="KeyDeleted",
    ),
    *(
        Endpoint(
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
    Endpoint(
        "GET", "/routers", admin_config.list_routers, "List routers", R, response="RouterList"
    ),
    Endpoint(
        "POST",
        "/routers",
        admin_config.create_router,
        "Create a router (go-live gate)",
        R,
        body="RouterCreate",
        response="RouterChange",
        status=201,
    ),
    Endpoint(
        "GET", "/routers/{name}", admin_config.get_router, "One router", R, response="RouterView"
    ),
    Endpoint(
        "PATCH",
        "/routers/{name}",
        admin_config.patch_router,
        "Update a router (raising rollout_percent passes the go-live gate)",
        R,
        body="RouterPatch",
        response="RouterChange",
    ),
    Endpoint(
        "DELETE",
        "/routers/{name}",
        admin_config.delete_router,
        "Delete a router",
        R,
        response="Deleted",
    ),
    *(
        Endpoint(
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
    Endpoint(
        "GET",
        "/routers/{name}/gate",
        shadow.router_gate_handler,
        "The router's go-live gate status",
        R,
        response="GateStatus",
    ),
    Endpoint(
        "GET",
        "/routers/{name}/pools",
        admin_config.list_pools,
        "A router's pools",
        R,
        response="PoolList",
    ),
    Endpoint(
        "PUT",
        "/routers/{name}/pools/{pool}",
        admin_config.put_pool,
        "Create or replace a named pool",
        R,
        body="PoolBody",
        response="PoolChange",
    ),
    Endpoint(
        "DELETE",
        "/routers/{name}/pools/{pool}",
        admin_config.delete_pool,
        "Delete a named pool",
        R,
        response="Deleted",
    ),
    # sessions
    Endpoint(
        "GET",
        "/sessions/{workspace}/{session_id}",
        admin_sessions.get_session,
        "Inspect a session: tier state, pins, recent decisions",
        S,
        response="SessionView",
        query=("router",),
    ),
    Endpoint(
        "POST",
        "/sessions/{workspace}/{session_id}/reset",
        admin_sessions.reset_session,
        "Reset a session's tier to base (audited; the per-session cap is not refunded)",
        S,
        response="ResetResult",
        query=("router",),
    ),
    Endpoint(
        "GET",
        "/sessions/{workspace}/{session_id}/lanes",
        admin_lanes.list_lanes,
        "A session's sticky-tier lanes: binding and lease holder",
        S,
        response="LaneList",
        query=("kind",),
    ),
    Endpoint(
        "POST",
        "/sessions/{workspace}/{session_id}/lanes/{lane}/release",
        admin_lanes.release,
        "Release a lane's lease now, e.g. after a crash (audited lane_released)",
        S,
        response="LaneReleased",
        query=("kind", "forget"),
    ),
    Endpoint(
        "GET",
        "/session-scopes",
        admin_recent_sessions.list_recent_sessions,
        "Recent sessions from the usage rows: workspace, routers, models, tiers, requests",
        S,
        response="RecentSessionList",
        max_limit=admin_recent_sessions.MAX_SESSIONS,
        query=("workspace", "router", "since", "until", "limit"),
    ),
    Endpoint(
        "GET",
        "/session-scopes/{scope}",
        admin_sessions.get_session,
        "Inspect a session by scope (usage rows' session_hash)",
        S,
        response="SessionView",
        query=("router",),
    ),
    Endpoint(
        "POST",
        "/session-scopes/{scope}/reset",
        admin_sessions.reset_session,
        "Reset a session's tier by scope",
        S,
        response="ResetResult",
        query=("router",),
    ),
    # virtual keys: workspace tokens issued here (docs/virtual-keys.md)
    Endpoint(
        "GET",
        "/virtual-keys",
        admin_keys.list_keys,
        "Virtual keys with their limits and spend",
        V,
        response="VirtualKeyList",
        query=("workspace",),
    ),
    Endpoint(
        "POST",
        "/virtual-keys",
        admin_keys.create_key,
        "Issue a virtual key (the token is returned once)",
        V,
        body="VirtualKeyBody",
        response="VirtualKeyCreated",
        status=201,
    ),
    Endpoint(
        "POST",
        "/virtual-keys/{id}/revoke",
        admin_keys.revoke_key,
        "Revoke a virtual key on every instance",
        V,
        response="VirtualKeyChange",
    ),
    Endpoint(
        "GET",
        "/virtual-keys/{id}/usage",
        admin_key_usage.key_usage,
        "A virtual key's requests, tokens and cost per day or hour",
        V,
        response="VirtualKeyUsage",
        query=("bucket", *_WINDOW),
    ),
    # records
    Endpoint(
        "GET",
        "/audit",
        admin_records.list_audit,
        "Audit events (JSON or CSV)",
        "Records",
        response="AuditList",
        csv=True,
        max_limit=MAX_CSV_ROWS,
        query=("router", "workspace", "event", "trigger", "session", "request_id", *_LIST),
    ),
    Endpoint(
        "GET",
        "/usage",
        admin_records.list_usage,
        "Usage rows (JSON or CSV)",
        "Records",
        response="UsageList",
        csv=True,
        max_limit=MAX_CSV_ROWS,
        query=(
            "router",
            "workspace",
            "model",
            "channel",
            "tier",
            "status",
            "session",
            "request_id",
            "virtual_key",
            *_LIST,
        ),
    ),
    # shadow labelling
    Endpoint(
        "GET",
        "/shadow",
        shadow.list_shadow,
        "Shadow decisions with evidence and label",
        "Shadow",
        response="ShadowList",
        query=("router", "labelled", "since", "until", "limit", "offset"),
    ),
    Endpoint(
        "POST",
        "/shadow/{id}/label",
        shadow.label_shadow,
        "Label a shadow decision correct or not",
        "Shadow",
        body="LabelBody",
        response="ShadowItem",
    ),
    # stats for the dashboard
    Endpoint(
        "GET",
        "/stats/traffic",
        admin_stats.traffic,
        "Requests, errors and spend over time by router and tier",
        "Stats",
        response="TrafficStats",
        query=("router", "bucket", *_WINDOW),
    ),
    Endpoint(
        "GET",
        "/stats/share",
        admin_stats.share,
        "Escalated share against its cap",
        "Stats",
        response="ShareStats",
    ),
    Endpoint(
        "GET",
        "/stats/escalations",
        admin_stats.escalations,
        "Escalation events by trigger and cap denials by reason",
        "Stats",
        response="EscalationStats",
        query=("router", *_WINDOW),
    ),
    Endpoint(
        "GET",
        "/stats/quality",
        admin_stats.quality,
        "Shadow precision, go-live gate and escalation latency",
        "Stats",
        response="QualityStats",
        query=("router", *_WINDOW),
    ),
    Endpoint(
        "GET",
        "/stats/cache",
        admin_stats.cache,
        "Prompt-cache hit rate per channel and key",
        "Stats",
        response="CacheStats",
        query=_WINDOW,
    ),
    Endpoint(
        "GET",
        "/stats/savings",
        admin_stats.savings,
        "Cost saved by the prompt cache",
        "Stats",
        response="SavingsStats",
        query=_WINDOW,
    ),
    Endpoint(
        "GET",
        "/stats/escalation-value",
        admin_value.escalation_value,
        "Counterfactual escalation value per router, from posted session outcomes",
        "Stats",
        response="EscalationValueStats",
        query=("router", "workspace", "odds", *_WINDOW),
    ),
)


def admin_routes(ctx: AdminContext) -> list[Route]:
    """Starlette routes for every admin endpoint, each behind the admin token.

    One route per path, dispatching on the method, so a 405 names every method
    the path supports in its Allow header (not only those of the first match).
    """
    by_path: dict[str, dict[str, RouteHandler]] = {}
    for ep in ENDPOINTS:
        by_path.setdefault(PREFIX + ep.path, {})[ep.method] = guarded(ctx, ep.handler, ep.name)
    return [
        Route(path, _by_method(handlers), methods=list(handlers))
        for path, handlers in by_path.items()
    ]


def _by_method(handlers: dict[str, RouteHandler]) -> RouteHandler:
    async def endpoint(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method](request)

    return endpoint
