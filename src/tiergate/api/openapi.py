"""GET /openapi.json: an OpenAPI 3.1 document of the inbound and admin APIs.

Admin paths come from the route table (tiergate.api.admin.ENDPOINTS) and the
config bodies from the pydantic config models, so neither can drift from the
code. Schemas are exact where a fuzzer (schemathesis) needs them to generate
valid requests and to check responses, and open (`additionalProperties`)
where the wire formats carry provider-specific fields.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from pydantic import BaseModel

from tiergate import __version__
from tiergate.api.admin import ENDPOINTS, PREFIX, Endpoint
from tiergate.api.admin_common import MAX_CSV_ROWS, MAX_LIMIT, MAX_OFFSET
from tiergate.api.openapi_inbound import INBOUND, inbound_paths
from tiergate.api.openapi_schema import (
    ERROR,
    Schema,
    error_responses,
    json_content,
    list_of,
    nullable,
    obj,
    ref,
)
from tiergate.config import MAX_KEY_LENGTH, ChannelConfig, RouterConfig

# ---- config models from pydantic ---------------------------------------------------

#: RouterConfig's name validator, as a JSON Schema pattern.
ROUTER_NAME = r"^[A-Za-z0-9_.\-]+$"
_KEYS = (
    "Provider keys, or ${ENV_VAR} references to keep them out of the database. "
    "Write-only: never returned."
)


def _model_schemas(model: type[BaseModel], defs: dict[str, Schema]) -> Schema:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    defs.update(schema.pop("$defs", {}))
    return schema


def _without_required(schema: Schema, drop: tuple[str, ...] = ()) -> Schema:
    out = copy.deepcopy(schema)
    out.pop("required", None)
    for name in drop:
        out["properties"].pop(name, None)
    return out


def _config_schemas() -> dict[str, Schema]:
    defs: dict[str, Schema] = {}
    channel = _model_schemas(ChannelConfig, defs)
    router = _model_schemas(RouterConfig, defs)
    # What the validators check beyond the field types (tiergate.config):
    channel["properties"]["name"]["minLength"] = 1
    channel["properties"]["keys"].update(
        minItems=1,
        items={"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH},
        description=_KEYS,
    )
    channel["properties"]["models"]["minProperties"] = 1
    router["properties"]["name"]["pattern"] = ROUTER_NAME
    router_create = copy.deepcopy(router)
    router_create["properties"]["force"] = {
        "type": "boolean",
        "description": "Override a closed go-live gate (audited as gate_forced).",
    }
    router_patch = _without_required(router_create)
    return {
        **defs,
        "ChannelConfig": channel,
        "ChannelPatch": _without_required(channel, ("name", "keys", "disabled_keys")),
        "RouterConfig": router,
        "RouterCreate": router_create,
        "RouterPatch": router_patch,
    }


# ---- response and body schemas ---------------------------------------------------------

_NUM = nullable("number")
_STR = nullable("string")
_INT = nullable("integer")

KEY_VIEW = obj(
    {
        "index": {"type": "integer"},
        "masked": {"type": "string"},
        "fingerprint": {"type": "string"},
        "source": {"type": "string"},
        "enabled": {"type": "boolean"},
        "status": {"type": "string", "enum": ["ok", "cooling_down", "auth_failed", "disabled"]},
        "cooldown_remaining_seconds": {"type": "number"},
        "ejected": {"type": "boolean"},
        "consecutive_failures": {"type": "integer"},
        "last_status": _INT,
    },
    ["index", "masked", "fingerprint"],
)
CHANNEL_VIEW = obj(
    {
        "name": {"type": "string"},
        "type": {"type": "string"},
        "base_url": {"type": "string"},
        "enabled": {"type": "boolean"},
        "weight": {"type": "number"},
        "priority": {"type": "integer"},
        "drained": {"type": "boolean"},
        "healthy": {"type": "boolean"},
        "models": {"type": "object"},
        "keys": {"type": "array", "items": ref("KeyView")},
    },
    ["name", "type", "enabled", "weight", "keys"],
)
GATE = obj(
    {
        "router": {"type": "string"},
        "labels": {"type": "integer"},
        "correct": {"type": "integer"},
        "precision": _NUM,
        "min_labels": {"type": "integer"},
        "min_precision": {"type": "number"},
        "window_days": {"type": "integer"},
        "open": {"type": "boolean"},
        "reason": {"type": "string"},
        "state": {"type": "string", "enum": ["live", "open", "closed"]},
        "summary": {"type": "string"},
    },
    ["router", "labels", "precision", "open", "reason"],
)
SHADOW_ITEM = obj(
    {
        "id": {"type": "integer"},
        "ts": {"type": "number"},
        "router": _STR,
        "session_hash": _STR,
        "trigger": _STR,
        "evidence": {"type": "object"},
        "label": {"anyOf": [{"type": "null"}, {"type": "object"}]},
        "gate": ref("GateStatus"),
    },
    ["id", "ts", "evidence", "label"],
)
_VERSIONED = {"version": {"type": "integer"}}
VIRTUAL_KEY_VIEW = obj(
    {
        "id": {"type": "string"},
        "workspace": {"type": "string"},
        "name": {"type": "string"},
        "prefix": {"type": "string", "description": "The token's first characters"},
        "created": {"type": "number"},
        "revoked": _NUM,
        "active": {"type": "boolean"},
        "rate_limit_rpm": _INT,
        "budget_usd_per_day": _NUM,
        "budget_usd_per_month": _NUM,
        "spend_today_usd": _NUM,
        "spend_month_usd": _NUM,
    },
    ["id", "workspace", "prefix", "active"],
)

#: One bucket of a key's usage (and, without `t`, the window's total).
KEY_USAGE_POINT = obj(
    {
        "t": {"type": "integer", "description": "Bucket start, unix seconds (UTC)"},
        "requests": {"type": "integer", "description": "Served and refused alike"},
        "errors": {"type": "integer", "description": "Requests answered other than 200"},
        "input_tokens": {"type": "integer", "description": "Whole prompts, cached included"},
        "cache_read_tokens": {"type": "integer"},
        "cache_write_tokens": {"type": "integer"},
        "output_tokens": {"type": "integer"},
        "cost_usd": {"type": "number"},
    },
    ["requests", "input_tokens", "cache_read_tokens", "output_tokens", "cost_usd"],
)

RESPONSES: dict[str, Schema] = {
    "Error": ERROR,
    "Object": {"type": "object"},
    "ConfigView": obj(
        {"version": _INT, "persisted": {"type": "boolean"}, "config": {"type": "object"}},
        ["version", "config"],
    ),
    "VersionList": obj(
        {"live_version": _INT, "items": {"type": "array", "items": {"type": "object"}}},
        ["items"],
    ),
    "KeyView": KEY_VIEW,
    "ChannelView": CHANNEL_VIEW,
    "ChannelList": list_of(ref("ChannelView")),
    "ChannelChange": obj({**_VERSIONED, "channel": ref("ChannelView")}, ["version", "channel"]),
    "KeyList": list_of(ref("KeyView")),
    "KeyChange": obj({**_VERSIONED, "key": ref("KeyView")}, ["version", "key"]),
    "KeyDeleted": obj({**_VERSIONED, "deleted": {"type": "object"}}, ["version", "deleted"]),
    "KeyBody": obj(
        {
            "key": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_KEY_LENGTH,
                "description": "The provider key, or a ${ENV_VAR} reference to keep it out "
                "of the database. Never returned.",
            }
        },
        ["key"],
        open_=False,
    ),
    "RouterView": {"type": "object", "required": ["name"]},
    "RouterList": list_of(ref("RouterView")),
    "RouterChange": obj({**_VERSIONED, "router": ref("RouterView")}, ["version", "router"]),
    "Deleted": obj({**_VERSIONED, "deleted": {"type": "string"}}, ["version", "deleted"]),
    "PoolList": obj({"pools": {"type": "object"}}, ["pools"]),
    "PoolBody": obj(
        {"models": {"type": "array", "items": {"type": "string", "minLength": 1}}},
        ["models"],
        open_=False,
    ),
    "PoolChange": obj(
        {**_VERSIONED, "pool": {"type": "string"}, "models": {"type": "array"}},
        ["version", "pool", "models"],
    ),
    "GateStatus": GATE,
    "SessionView": obj(
        {
            "scope": {"type": "string"},
            "session_hash": {"type": "string"},
            "routers": {"type": "array", "items": {"type": "object"}},
            "channel_pins": {"type": "object"},
            "recent_events": {"type": "array", "items": {"type": "object"}},
            "recent_requests": {"type": "array", "items": {"type": "object"}},
        },
        ["scope", "session_hash", "routers", "channel_pins"],
    ),
    "RecentSessionList": obj(
        {
            "items": {
                "type": "array",
                "items": obj(
                    {
                        "session_hash": {"type": "string"},
                        "workspace": _STR,
                        "requests": {"type": "integer"},
                        "strong_requests": {"type": "integer"},
                        "errors": {"type": "integer"},
                        "cost_usd": {"type": "number"},
                        "first_seen": {"type": "number"},
                        "last_seen": {"type": "number"},
                        "last_router": _STR,
                        "last_model": _STR,
                        "last_tier": _STR,
                        "routers": {"type": "array", "items": {"type": "string"}},
                        "models": {"type": "array", "items": {"type": "string"}},
                    },
                    ["session_hash", "requests", "last_seen", "routers", "models"],
                ),
            },
            "limit": {"type": "integer"},
        },
        ["items", "limit"],
    ),
    "LaneList": obj(
        {
            "workspace": {"type": "string"},
            "session_id": {"type": "string"},
            "enabled": {"type": "boolean", "description": "false: session tiers are off"},
            "lease_seconds": {"type": "integer"},
            "lanes": {"type": "array", "items": {"type": "object"}},
        },
        ["workspace", "session_id", "enabled", "lanes"],
    ),
    "LaneReleased": obj(
        {
            "workspace": {"type": "string"},
            "session_id": {"type": "string"},
            "lane": {"type": "string"},
            "released": {"type": "array", "items": {"type": "object"}},
        },
        ["workspace", "session_id", "lane", "released"],
    ),
    "ResetResult": obj(
        {"scope": {"type": "string"}, "routers": {"type": "array", "items": {"type": "object"}}},
        ["scope", "routers"],
    ),
    "VirtualKeyView": VIRTUAL_KEY_VIEW,
    "VirtualKeyList": list_of(ref("VirtualKeyView")),
    "VirtualKeyCreated": obj(
        {
            **_VERSIONED,
            "key": ref("VirtualKeyView"),
            "token": {"type": "string", "description": "The token. Shown this once only."},
        },
        ["version", "key", "token"],
    ),
    "VirtualKeyChange": obj({**_VERSIONED, "key": ref("VirtualKeyView")}, ["version", "key"]),
    "VirtualKeyBody": obj(
        {
            "workspace": {"type": "string", "minLength": 1},
            "name": {"type": "string", "maxLength": 128},
            "rate_limit_rpm": {"type": ["integer", "null"], "minimum": 1},
            "budget_usd_per_day": {"type": ["number", "null"], "minimum": 0},
            "budget_usd_per_month": {"type": ["number", "null"], "minimum": 0},
        },
        ["workspace"],
        open_=False,
    ),
    "VirtualKeyUsage": obj(
        {
            "key": obj(
                {
                    "id": {"type": "string"},
                    "workspace": {"type": "string"},
                    "name": {"type": "string"},
                    "prefix": {"type": "string"},
                    "active": {"type": "boolean"},
                },
                ["id", "workspace", "active"],
            ),
            "since": {"type": "number"},
            "until": {"type": "number"},
            "bucket_seconds": {"type": "integer"},
            "points": {"type": "array", "items": KEY_USAGE_POINT},
            "total": KEY_USAGE_POINT,
        },
        ["key", "points", "total"],
    ),
    "AuditList": list_of({"type": "object"}),
    "UsageList": list_of({"type": "object"}),
    "ShadowItem": SHADOW_ITEM,
    "ShadowList": list_of(ref("ShadowItem")),
    "LabelBody": obj(
        {
            "correct": {"type": "boolean"},
            "hard_turns_before": {"type": "integer", "minimum": 0, "maximum": 1000},
            "note": {"type": "string", "maxLength": 500},
        },
        ["correct"],
        open_=False,
    ),
    "TrafficStats": obj(
        {"bucket_seconds": {"type": "integer"}, "series": {"type": "array"}}, ["series"]
    ),
    "ShareStats": obj({"routers": {"type": "array"}, "workspaces": {"type": "array"}}, ["routers"]),
    "EscalationStats": obj({"items": {"type": "array"}, "denials": {"type": "array"}}, ["items"]),
    "QualityStats": obj({"routers": {"type": "array"}}, ["routers"]),
    "CacheStats": obj({"channels": {"type": "array"}}, ["channels"]),
    "SavingsStats": obj({"total": {"type": "object"}, "items": {"type": "array"}}, ["total"]),
    "EscalationValueStats": obj(
        {
            "since": {"type": "number"},
            "until": {"type": "number"},
            "default_odds": {"type": "number"},
            "sessions_without_outcome": {"type": "integer"},
            "routers": {"type": "array", "items": {"type": "object"}},
        },
        ["since", "until", "default_odds", "sessions_without_outcome", "routers"],
    ),
}

#: A time in a query: unix seconds, or ISO 8601 (a time without a zone is UTC).
_TIME: Schema = {"anyOf": [{"type": "number"}, {"type": "string", "format": "date-time"}]}
_CSV_LIMIT = (
    f"At most {MAX_LIMIT} rows with format=json, {MAX_CSV_ROWS} with format=csv "
    "(default: all of them up to that)"
)

QUERY_PARAMETERS: dict[str, Schema] = {
    "router": {"type": "string", "description": "Router name"},
    "workspace": {"type": "string", "description": "Workspace name"},
    "event": {
        "type": "string",
        "description": "Event kind(s), comma separated: escalated, denied_cap, de_escalated, "
        "reset, shadow, strong_served, gate_forced, config_changed, lane_released",
    },
    "trigger": {"type": "string"},
    "session": {"type": "string", "description": "Session hash (its scope, in audit and usage)"},
    "request_id": {"type": "string"},
    "virtual_key": {"type": "string", "description": "A virtual key's id (vk_...)"},
    "model": {"type": "string"},
    "channel": {"type": "string"},
    "tier": {"type": "string", "enum": ["base", "strong"]},
    "status": {"type": "integer", "minimum": 100, "maximum": 599},
    "since": {**_TIME, "description": "Unix seconds or ISO 8601 (inclusive)"},
    "until": {**_TIME, "description": "Unix seconds or ISO 8601 (exclusive)"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    "offset": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
    "format": {"type": "string", "enum": ["json", "csv"]},
    "bucket": {"type": "string", "enum": ["minute", "hour", "day"]},
    "odds": {
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "description": "Strong odds p for sessions whose outcome gives none (default 1)",
    },
    "labelled": {"type": "boolean"},
    "kind": {
        "type": "string",
        "enum": ["managed", "public"],
        "description": "Lane kind: managed (router models) or public (roleplay); default both",
    },
    "forget": {"type": "boolean", "description": "Also delete the lane's binding"},
}

_PATH_PARAMETERS: dict[str, Schema] = {
    "index": {"type": "integer", "minimum": 0, "maximum": 10000},
    "id": {"type": "integer", "minimum": 0},
    "lane": {"type": "string", "enum": ["main", "delegation", "aux"]},
    "scope": {
        "type": "string",
        "pattern": "^[0-9a-f]{32}$",
        "description": "The session's scope: usage rows' session_hash",
    },
}


#: A virtual key's id is a string (vk_ and 16 hex digits), not a row number.
_VIRTUAL_KEY_ID: Schema = {"type": "string", "minLength": 1, "description": "vk_..."}


def _path_params(path: str) -> list[Schema]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    keyed = path.startswith("/virtual-keys/")
    return [
        {
            "name": n,
            "in": "path",
            "required": True,
            "schema": _VIRTUAL_KEY_ID
            if keyed and n == "id"
            else _PATH_PARAMETERS.get(n, {"type": "string", "minLength": 1}),
        }
        for n in names
    ]


def _query_param(ep: Endpoint, name: str) -> Schema:
    schema = QUERY_PARAMETERS[name]
    if name == "limit":
        schema = {**schema, "maximum": ep.max_limit}
        if ep.csv:
            schema["description"] = _CSV_LIMIT
    return {"name": name, "in": "query", "required": False, "schema": schema}


def _admin_paths() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for ep in ENDPOINTS:
        content = json_content(ref(ep.response))
        if ep.csv:
            content["text/csv"] = {"schema": {"type": "string"}}
        op: dict[str, Any] = {
            "summary": ep.summary,
            "tags": [f"Admin: {ep.tag}"],
            "operationId": f"admin_{ep.method.lower()}_{_slug(ep.path)}",
            "security": [{"adminToken": []}],
            "parameters": _path_params(ep.path) + [_query_param(ep, q) for q in ep.query],
            "responses": {
                str(ep.status): {"description": "Success", "content": content},
                **error_responses(400, 401, 404, 409, 413, 503),
            },
        }
        if ep.body is not None:
            op["requestBody"] = {"required": True, "content": json_content(ref(ep.body))}
        paths.setdefault(PREFIX + ep.path, {})[ep.method.lower()] = op
    return paths


def _slug(path: str) -> str:
    return "_".join(p.strip("{}").replace("-", "_") for p in path.split("/") if p)


@cache
def openapi_document() -> dict[str, Any]:
    """The whole document (built once; it depends only on code)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "tiergate",
            "version": __version__,
            "description": "OpenAI- and Anthropic-compatible LLM gateway with session "
            "affinity and frontier escalation. Admin API: docs/operator.md.",
        },
        "paths": {**inbound_paths(), **_admin_paths()},
        "components": {
            "securitySchemes": {
                "workspaceToken": {"type": "http", "scheme": "bearer"},
                "workspaceApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "adminToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "TIERGATE_ADMIN_TOKEN or server.admin_token",
                },
            },
            "schemas": {**_config_schemas(), **RESPONSES, **INBOUND},
        },
    }
