"""The inbound APIs in the OpenAPI document: the OpenAI (chat completions and
responses) and Anthropic formats,
models, feedback, the explain diagnostic and health. Request schemas are exact
where a fuzzer needs them and open where providers add fields."""

from __future__ import annotations

from typing import Any

from tiergate.api.openapi_bodies import (
    CHAT_COMPLETION_REQUEST,
    COUNT_TOKENS_REQUEST,
    EMBEDDINGS_REQUEST,
    MESSAGES_REQUEST,
)
from tiergate.api.openapi_responses import RESPONSES_EVENT, RESPONSES_REQUEST
from tiergate.api.openapi_schema import (
    Schema,
    error_responses,
    json_content,
    obj,
    ref,
)
from tiergate.replay.counterfactual import OUTCOME_WORDS

INBOUND: dict[str, Schema] = {
    "ChatCompletionRequest": CHAT_COMPLETION_REQUEST,
    "ChatCompletion": obj(
        {
            "id": {"type": "string"},
            "object": {"type": "string"},
            "model": {"type": "string"},
            "choices": {"type": "array"},
            "usage": {"type": "object"},
        },
        ["choices"],
    ),
    "ResponsesRequest": RESPONSES_REQUEST,
    "Response": obj(
        {
            "id": {"type": "string"},
            "object": {"type": "string", "const": "response"},
            "status": {"type": "string"},
            "output": {"type": "array"},
            "usage": {"type": ["object", "null"]},
        },
        ["id", "object", "status", "output"],
    ),
    "MessagesRequest": MESSAGES_REQUEST,
    "Message": obj(
        {"id": {"type": "string"}, "type": {"type": "string"}, "content": {"type": "array"}},
        ["content"],
    ),
    "CountTokensRequest": COUNT_TOKENS_REQUEST,
    "TokenCount": obj({"input_tokens": {"type": "integer", "minimum": 0}}, ["input_tokens"]),
    "EmbeddingsRequest": EMBEDDINGS_REQUEST,
    "EmbeddingList": obj(
        {
            "object": {"type": "string"},
            "data": {"type": "array"},
            "model": {"type": "string"},
            "usage": {"type": "object"},
        },
        ["data"],
    ),
    "ModelList": obj(
        {
            "object": {"type": "string"},
            "data": {
                "type": "array",
                "items": obj({"id": {"type": "string"}, "object": {"type": "string"}}, ["id"]),
            },
            "models": {
                "type": "array",
                "description": "Codex CLI's model catalog (ModelInfo objects): only with "
                "client_version and server.codex_instructions_file set (docs/agents.md)",
                "items": obj({"slug": {"type": "string"}}, ["slug"]),
            },
        },
        ["data"],
    ),
    "FeedbackRequest": obj(
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
    "FeedbackResult": obj(
        {
            "request_id": {"type": "string"},
            "score": {"type": "number"},
            "credited": {"type": "boolean"},
            "recorded": {"type": "boolean"},
        },
        ["request_id", "score", "credited", "recorded"],
    ),
    "OutcomeRequest": {
        **obj(
            {
                "session_id": {
                    "oneOf": [
                        {"type": "string", "pattern": "^[ -~]*[!-~][ -~]*$", "maxLength": 256},
                        {"type": "integer"},
                    ],
                    "description": "The session id the agent sent (X-OrcaRouter-Session-Id)",
                },
                "session_hash": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
                "request_id": {
                    "type": "string",
                    "pattern": "^[A-Za-z0-9_-]{1,64}$",
                    "description": "The X-Orca-Request-Id of any request of the session",
                },
                "resolved": {
                    "oneOf": [
                        {"type": "boolean"},
                        {"type": "number", "minimum": 0, "maximum": 1},
                        {"type": "string", "enum": sorted(OUTCOME_WORDS)},
                    ],
                    "description": "Did the agent resolve its task (CI passed, PR merged)?",
                },
                "strong_odds": {"type": "number", "minimum": 0, "maximum": 1},
                "task": {"type": "string", "pattern": "^[A-Za-z0-9._:/@#+=\\-]{1,200}$"},
            },
            ["resolved"],
            open_=False,
        ),
        "oneOf": [{"required": [k]} for k in ("session_id", "session_hash", "request_id")],
    },
    "OutcomeResult": obj(
        {
            "session_hash": {"type": "string"},
            "resolved": {"type": "number"},
            "strong_odds": {"type": ["number", "null"]},
            "task": {"type": ["string", "null"]},
            "replaced": {"type": "boolean"},
        },
        ["session_hash", "resolved", "strong_odds", "task", "replaced"],
    ),
    "Explain": {"type": "object"},
    "Health": obj(
        {
            "status": {"type": "string"},
            # /readyz: database and state; state_nodes per primary on a Redis Cluster
            "checks": {"type": "object", "additionalProperties": {"type": "string"}},
            "state_nodes": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        ["status"],
    ),
}

#: Values are case-insensitive; any other value is ignored, as an unknown header is.
_ROUTING_HEADERS = [
    {"name": name, "in": "header", "required": False, "schema": schema, "description": desc}
    for name, schema, desc in (
        ("X-OrcaRouter-Session-Id", {"type": "string"}, "Session id (highest priority)"),
        (
            "X-OrcaRouter-Tier",
            {"type": "string", "examples": ["strong", "base"]},
            "strong escalates the session; base resets it",
        ),
        (
            "X-OrcaRouter-Escalate",
            {"type": "string", "examples": ["once"]},
            "once: serve this one request strong",
        ),
        (
            "X-OrcaRouter-Include-Cost",
            {"type": "string", "examples": ["true"]},
            "true: add X-Orca-Cost (USD) to the reply",
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


#: One server-sent event of a streamed reply (OpenAPI 3.1: the schema of a
#: text/event-stream describes each event). OpenAI sends `data` only, ending
#: with `data: [DONE]`; Anthropic names every event. A `: x-orca-cost=...`
#: comment line may close the stream (X-OrcaRouter-Include-Cost).
OPENAI_EVENT = obj(
    {"data": {"type": "string", "description": "A chat.completion.chunk as JSON, or [DONE]"}},
    ["data"],
)
ANTHROPIC_EVENT = obj(
    {
        "event": {
            "type": "string",
            "enum": [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
                "ping",
                "error",
            ],
        },
        "data": {"type": "string", "description": "The event's JSON object"},
    },
    ["event", "data"],
)


def _inbound_op(
    summary: str,
    body: str | None,
    response: str,
    *,
    stream: Schema | None = None,
    secure: bool = True,
) -> dict[str, Any]:
    content = json_content(ref(response))
    if stream is not None:
        content["text/event-stream"] = {"schema": stream}
    op: dict[str, Any] = {
        "summary": summary,
        "tags": ["Inbound"],
        "responses": {
            "200": {"description": "Success", "content": content, "headers": _REPLY_HEADERS},
            **error_responses(*_INBOUND_ERRORS),
        },
    }
    if secure:
        op["security"] = [{"workspaceToken": []}, {"workspaceApiKey": []}]
    if body is not None:
        op["requestBody"] = {"required": True, "content": json_content(ref(body))}
        op["parameters"] = _ROUTING_HEADERS
    return op


def _without_routing(op: dict[str, Any]) -> dict[str, Any]:
    """An operation that is not a conversation turn: the session headers do not apply."""
    return {k: v for k, v in op.items() if k != "parameters"}


def inbound_paths() -> dict[str, Any]:
    chat = _inbound_op(
        "OpenAI chat completions", "ChatCompletionRequest", "ChatCompletion", stream=OPENAI_EVENT
    )
    health = {
        "summary": "Liveness",
        "tags": ["Health"],
        "responses": {"200": {"description": "Alive", "content": json_content(ref("Health"))}},
    }
    ready = {
        "summary": "Readiness: database and state store (every cluster primary) reachable",
        "tags": ["Health"],
        "responses": {
            "200": {"description": "Ready", "content": json_content(ref("Health"))},
            "503": {"description": "Not ready", "content": json_content(ref("Health"))},
        },
    }
    return {
        "/v1/chat/completions": {"post": {**chat, "operationId": "chat_completions"}},
        "/v1/responses": {
            "post": {
                **_inbound_op(
                    "OpenAI responses (Codex CLI)",
                    "ResponsesRequest",
                    "Response",
                    stream=RESPONSES_EVENT,
                ),
                "operationId": "responses",
            }
        },
        "/v1/messages": {
            "post": {
                **_inbound_op(
                    "Anthropic messages", "MessagesRequest", "Message", stream=ANTHROPIC_EVENT
                ),
                "operationId": "messages",
            }
        },
        "/v1/messages/count_tokens": {
            "post": {
                **_without_routing(
                    _inbound_op(
                        "Estimate a Messages body's input tokens (tiergate's tokenizer)",
                        "CountTokensRequest",
                        "TokenCount",
                    )
                ),
                "operationId": "count_tokens",
            }
        },
        "/v1/embeddings": {
            "post": {
                **_without_routing(
                    _inbound_op(
                        "OpenAI embeddings, passed through to an OpenAI-type channel",
                        "EmbeddingsRequest",
                        "EmbeddingList",
                    )
                ),
                "operationId": "embeddings",
            }
        },
        "/v1/models": {
            "get": {
                **_inbound_op("Models and routers", None, "ModelList"),
                "operationId": "list_models",
                "parameters": [
                    {
                        "name": "client_version",
                        "in": "query",
                        "required": False,
                        "description": "Sent by Codex CLI: adds its model catalog",
                        "schema": {"type": "string"},
                    }
                ],
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
        "/v1/outcomes": {
            "post": {
                **_inbound_op(
                    "Report how a session ended (counterfactual escalation value)",
                    "OutcomeRequest",
                    "OutcomeResult",
                ),
                "operationId": "outcomes",
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
