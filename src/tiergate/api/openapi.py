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
from tiergate.api.admin import ENDPOINTS, PREFIX
from tiergate.config import ChannelConfig, RouterConfig

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(t: str) -> Schema:
    return {"type": [t, "null"]}


def _obj(
    props: dict[str, Schema], required: list[str] | None = None, *, open_: bool = True
) -> Schema:
    out: Schema = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    if not open_:
        out["additionalProperties"] = False
    return out


def _items(item: Schema) -> Schema:
    return _obj({"items": {"type": "array", "items": item}}, ["items"])


# ---- config models from pydantic ---------------------------------------------------


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

_NUM = _nullable("number")
_STR = _nullable("string")
_INT = _nullable("integer")

ERROR = _obj(
    {
        "error": _obj(
            {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": _STR,
                "problems": {"type": "array", "items": {"type": "string"}},
            },
            ["message", "type"],
        )
    },
    ["error"],
)

KEY_VIEW = _obj(
    {
        "index": {"type": "integer"},
        "masked": {"type": "string"},
        "fingerprint": {"type": "string"},
        "source": {"type": "string"},
        "enabled": {"type": "boolean"},
        "status": {"type": "string", "enum": ["ok", "cooling_down", "auth_failed", "disabled"]},
        "cooldown_remaining_seconds": {"type": "number"},
        "consecutive_failures": {"type": "integer"},
        "last_status": _INT,
    },
    ["index", "masked", "fingerprint"],
)
CHANNEL_VIEW = _obj(
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
        "keys": {"type": "array", "items": _ref("KeyView")},
    },
    ["name", "type", "enabled", "weight", "keys"],
)
GATE = _obj(
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
    },
    ["router", "labels", "precision", "open", "reason"],
)
SHADOW_ITEM = _obj(
    {
        "id": {"type": "integer"},
        "ts": {"type": "number"},
        "router": _STR,
        "session_hash": _STR,
        "trigger": _STR,
        "evidence": {"type": "object"},
        "label": {"anyOf": [{"type": "null"}, {"type": "object"}]},
        "gate": _ref("GateStatus"),
    },
    ["id", "ts", "evidence", "label"],
)
_VERSIONED = {"version": {"type": "integer"}}

RESPONSES: dict[str, Schema] = {
    "Error": ERROR,
    "Object": {"type": "object"},
    "ConfigView": _obj(
        {"version": _INT, "persisted": {"type": "boolean"}, "config": {"type": "object"}},
        ["version", "config"],
    ),
    "VersionList": _obj(
        {"live_version": _INT, "items": {"type": "array", "items": {"type": "object"}}},
        ["items"],
    ),
    "KeyView": KEY_VIEW,
    "ChannelView": CHANNEL_VIEW,
    "ChannelList": _items(_ref("ChannelView")),
    "ChannelChange": _obj({**_VERSIONED, "channel": _ref("ChannelView")}, ["version", "channel"]),
    "KeyList": _items(_ref("KeyView")),
    "KeyChange": _obj({**_VERSIONED, "key": _ref("KeyView")}, ["version", "key"]),
    "KeyDeleted": _obj({**_VERSIONED, "deleted": {"type": "object"}}, ["version", "deleted"]),
    "KeyBody": _obj(
        {
            "key": {
                "type": "string",
                "minLength": 1,
                "description": "The provider key, or a ${ENV_VAR} reference to keep it out "
                "of the database. Never returned.",
            }
        },
        ["key"],
        open_=False,
    ),
    "RouterView": {"type": "object", "required": ["name"]},
    "RouterList": _items(_ref("RouterView")),
    "RouterChange": _obj({**_VERSIONED, "router": _ref("RouterView")}, ["version", "router"]),
    "Deleted": _obj({**_VERSIONED, "deleted": {"type": "string"}}, ["version", "deleted"]),
    "PoolList": _obj({"pools": {"type": "object"}}, ["pools"]),
    "PoolBody": _obj(
        {"models": {"type": "array", "items": {"type": "string", "minLength": 1}}},
        ["models"],
        open_=False,
    ),
    "PoolChange": _obj(
        {**_VERSIONED, "pool": {"type": "string"}, "models": {"type": "array"}},
        ["version", "pool", "models"],
    ),
    "GateStatus": GATE,
    "SessionView": _obj(
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
    "ResetResult": _obj(
        {"scope": {"type": "string"}, "routers": {"type": "array", "items": {"type": "object"}}},
        ["scope", "routers"],
    ),
    "AuditList": _items({"type": "object"}),
    "UsageList": _items({"type": "object"}),
    "ShadowItem": SHADOW_ITEM,
    "ShadowList": _items(_ref("ShadowItem")),
    "LabelBody": _obj(
        {
            "correct": {"type": "boolean"},
            "hard_turns_before": {"type": "integer", "minimum": 0, "maximum": 1000},
            "note": {"type": "string", "maxLength": 500},
        },
        ["correct"],
        open_=False,
    ),
    "TrafficStats": _obj(
        {"bucket_seconds": {"type": "integer"}, "series": {"type": "array"}}, ["series"]
    ),
    "ShareStats": _obj(
        {"routers": {"type": "array"}, "workspaces": {"type": "array"}}, ["routers"]
    ),
    "EscalationStats": _obj({"items": {"type": "array"}, "denials": {"type": "array"}}, ["items"]),
    "QualityStats": _obj({"routers": {"type": "array"}}, ["routers"]),
    "CacheStats": _obj({"channels": {"type": "array"}}, ["channels"]),
    "SavingsStats": _obj({"total": {"type": "object"}, "items": {"type": "array"}}, ["total"]),
}

QUERY_PARAMETERS: dict[str, Schema] = {
    "router": {"type": "string", "description": "Router name"},
    "workspace": {"type": "string", "description": "Workspace name"},
    "event": {
        "type": "string",
        "description": "Event kind(s), comma separated: escalated, denied_cap, de_escalated, "
        "reset, shadow, gate_forced, config_changed",
    },
    "trigger": {"type": "string"},
    "session": {"type": "string", "description": "Session hash (audit) or scope (usage)"},
    "request_id": {"type": "string"},
    "model": {"type": "string"},
    "channel": {"type": "string"},
    "tier": {"type": "string", "enum": ["base", "strong"]},
    "status": {"type": "integer", "minimum": 100, "maximum": 599},
    "since": {"type": "string", "description": "Unix seconds or ISO 8601 (inclusive)"},
    "until": {"type": "string", "description": "Unix seconds or ISO 8601 (exclusive)"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 10000},
    "offset": {"type": "integer", "minimum": 0},
    "format": {"type": "string", "enum": ["json", "csv"]},
    "bucket": {"type": "string", "enum": ["minute", "hour", "day"]},
    "labelled": {"type": "boolean"},
}

_PATH_PARAMETERS: dict[str, Schema] = {
    "index": {"type": "integer", "minimum": 0, "maximum": 10000},
    "id": {"type": "integer", "minimum": 0},
}


def _error_responses(*statuses: int) -> dict[str, Any]:
    described = {
        400: "Invalid request (problems lists each one)",
        401: "Missing or invalid token",
        404: "Unknown entity",
        409: "Conflict (exists, go-live gate closed, duplicate)",
        413: "Body too large",
        429: "Rate limited",
        503: "Disabled or a backend is unavailable",
    }
    out = {
        str(s): {"description": described.get(s, "Error"), "content": _json(_ref("Error"))}
        for s in statuses
    }
    out["default"] = {"description": "Error", "content": _json(_ref("Error"))}
    return out


def _json(schema: Schema) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _path_params(path: str) -> list[Schema]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    return [
        {
            "name": n,
            "in": "path",
            "required": True,
            "schema": _PATH_PARAMETERS.get(n, {"type": "string", "minLength": 1}),
        }
        for n in names
    ]


def _admin_paths() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for ep in ENDPOINTS:
        content = _json(_ref(ep.response))
        if ep.csv:
            content["text/csv"] = {"schema": {"type": "string"}}
        op: dict[str, Any] = {
            "summary": ep.summary,
            "tags": [f"Admin: {ep.tag}"],
            "operationId": f"admin_{ep.method.lower()}_{_slug(ep.path)}",
            "security": [{"adminToken": []}],
            "parameters": _path_params(ep.path)
            + [
                {"name": q, "in": "query", "required": False, "schema": QUERY_PARAMETERS[q]}
                for q in ep.query
            ],
            "responses": {
                str(ep.status): {"description": "Success", "content": content},
                **_error_responses(400, 401, 404, 409, 413, 503),
            },
        }
        if ep.body is not None:
            op["requestBody"] = {"required": True, "content": _json(_ref(ep.body))}
        paths.setdefault(PREFIX + ep.path, {})[ep.method.lower()] = op
    return paths


def _slug(path: str) -> str:
    return "_".join(p.strip("{}").replace("-", "_") for p in path.split("/") if p)


# ---- inbound APIs -------------------------------------------------------------------------

_MESSAGE = _obj(
    {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"anyOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}]},
        "tool_calls": {"type": "array"},
        "tool_call_id": {"type": "string"},
        "name": {"type": "string"},
    },
    ["role"],
)
INBOUND: dict[str, Schema] = {
    "ChatCompletionRequest": _obj(
        {
            "model": {
                "type": "string",
                "description": "A model name, or a router: orcarouter/<name>, router/<name>, "
                "auto:<name>",
            },
            "messages": {"type": "array", "minItems": 1, "items": _MESSAGE},
            "stream": {"type": "boolean"},
            "stream_options": {"type": "object"},
            "tools": {"type": "array"},
            "tool_choice": {},
            "max_tokens": {"type": "integer", "minimum": 1},
            "max_completion_tokens": {"type": "integer", "minimum": 1},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "user": {"type": "string"},
            "prompt_cache_key": {"type": "string"},
            "metadata": {"type": "object"},
        },
        ["model", "messages"],
    ),
    "ChatCompletion": _obj(
        {
            "id": {"type": "string"},
            "object": {"type": "string"},
            "model": {"type": "string"},
            "choices": {"type": "array"},
            "usage": {"type": "object"},
        },
        ["choices"],
    ),
    "MessagesRequest": _obj(
        {
            "model": {"type": "string"},
            "max_tokens": {"type": "integer", "minimum": 1},
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": _obj(
                    {
                        "role": {"type": "string", "enum": ["user", "assistant"]},
                        "content": {"anyOf": [{"type": "string"}, {"type": "array"}]},
                    },
                    ["role", "content"],
                ),
            },
            "system": {"anyOf": [{"type": "string"}, {"type": "array"}]},
            "stream": {"type": "boolean"},
            "tools": {"type": "array"},
            "metadata": {"type": "object"},
        },
        ["model", "max_tokens", "messages"],
    ),
    "Message": _obj(
        {"id": {"type": "string"}, "type": {"type": "string"}, "content": {"type": "array"}},
        ["content"],
    ),
    "ModelList": _obj(
        {
            "object": {"type": "string"},
            "data": {
                "type": "array",
                "items": _obj({"id": {"type": "string"}, "object": {"type": "string"}}, ["id"]),
            },
        },
        ["data"],
    ),
    "FeedbackRequest": _obj(
        {
            "request_id": {
                "type": "string",
                "pattern": "^[A-Za-z0-9_-]{1,64}$",
                "description": "The X-Orca-Request-Id response header of the rated request",
            },
            "score": {"type": "number", "minimum": 0, "maximum": 1},
        },
        ["request_id", "score"],
        open_=False,
    ),
    "FeedbackResult": _obj(
        {
            "request_id": {"type": "string"},
            "score": {"type": "number"},
            "credited": {"type": "boolean"},
            "recorded": {"type": "boolean"},
        },
        ["request_id", "score", "credited", "recorded"],
    ),
    "Explain": {"type": "object"},
    "Health": _obj({"status": {"type": "string"}}, ["status"]),
}

_ROUTING_HEADERS = [
    {"name": name, "in": "header", "required": False, "schema": schema, "description": desc}
    for name, schema, desc in (
        ("X-OrcaRouter-Session-Id", {"type": "string"}, "Session id (highest priority)"),
        (
            "X-OrcaRouter-Tier",
            {"type": "string", "enum": ["strong", "base"]},
            "strong escalates the session; base resets it",
        ),
        (
            "X-OrcaRouter-Escalate",
            {"type": "string", "enum": ["once"]},
            "Serve this one request strong",
        ),
        (
            "X-OrcaRouter-Include-Cost",
            {"type": "string", "enum": ["true", "false"]},
            "Add X-Orca-Cost (USD) to the reply",
        ),
    )
]
_REPLY_HEADERS = {
    "X-Orca-Request-Id": {"schema": {"type": "string"}},
    "X-Orca-Router": {"schema": {"type": "string"}},
    "X-Orca-Resolved-Model": {"schema": {"type": "string"}},
    "X-Orca-Session-Tier": {"schema": {"type": "string"}},
    "X-Orca-Cost": {"schema": {"type": "string"}},
}
_INBOUND_ERRORS = (400, 401, 404, 409, 413, 429, 503)


def _inbound_op(
    summary: str, body: str | None, response: str, *, stream: bool = False, secure: bool = True
) -> dict[str, Any]:
    content = _json(_ref(response))
    if stream:
        content["text/event-stream"] = {"schema": {"type": "string"}}
    op: dict[str, Any] = {
        "summary": summary,
        "tags": ["Inbound"],
        "responses": {
            "200": {"description": "Success", "content": content, "headers": _REPLY_HEADERS},
            **_error_responses(*_INBOUND_ERRORS),
        },
    }
    if secure:
        op["security"] = [{"workspaceToken": []}, {"workspaceApiKey": []}]
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(_ref(body))}
        op["parameters"] = _ROUTING_HEADERS
    return op


def _inbound_paths() -> dict[str, Any]:
    chat = _inbound_op(
        "OpenAI chat completions", "ChatCompletionRequest", "ChatCompletion", stream=True
    )
    health = {
        "summary": "Liveness",
        "tags": ["Health"],
        "responses": {"200": {"description": "Alive", "content": _json(_ref("Health"))}},
    }
    ready = {
        "summary": "Readiness: database and state store reachable",
        "tags": ["Health"],
        "responses": {
            "200": {"description": "Ready", "content": _json(_ref("Health"))},
            "503": {"description": "Not ready", "content": _json(_ref("Health"))},
        },
    }
    return {
        "/v1/chat/completions": {"post": {**chat, "operationId": "chat_completions"}},
        "/v1/messages": {
            "post": {
                **_inbound_op("Anthropic messages", "MessagesRequest", "Message", stream=True),
                "operationId": "messages",
            }
        },
        "/v1/models": {
            "get": {
                **_inbound_op("Models and routers", None, "ModelList"),
                "operationId": "list_models",
            }
        },
        "/v1/feedback": {
            "post": {
                **_inbound_op(
                    "Rate a served request (linucb credit, escalation latency)",
                    "FeedbackRequest",
                    "FeedbackResult",
                ),
                "operationId": "feedback",
            }
        },
        "/v1/orcarouter/explain": {
            "post": {
                **_inbound_op(
                    "Plan a request without sending it (read-only)",
                    "ChatCompletionRequest",
                    "Explain",
                ),
                "operationId": "explain",
            }
        },
        "/healthz": {"get": {**health, "operationId": "healthz"}},
        "/readyz": {"get": {**ready, "operationId": "readyz"}},
    }


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
        "paths": {**_inbound_paths(), **_admin_paths()},
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
