"""Request bodies of the inbound APIs for the OpenAPI document: OpenAI chat
completions and Anthropic messages, exactly as the gateway's own codecs
(tiergate.formats.openai.request, tiergate.formats.anthropic.request) accept
them.

Exact, so that a fuzzer's schema-valid body passes the gateway's validation
and a schema-violating one is refused: every field the codecs read is typed
as they check it (an explicit null counts as absent where they allow it), and
objects stay open because unknown fields are forwarded, not refused. What a
schema cannot say is in the descriptions: a `tool` message or `tool_result`
block must answer a tool call of the previous assistant turn, and the model
must exist (404 otherwise); the upstream provider may still refuse a body for
its own reasons, and its 4xx is passed through.
"""

from __future__ import annotations

from tiergate.api.openapi_schema import Schema, array, const, nullable, obj, or_null
from tiergate.formats import INT_CEILING

_STR = {"type": "string"}
_OBJECT = {"type": "object"}
_CACHE = {"cache_control": or_null(_OBJECT)}
_MODEL = {
    "type": "string",
    "description": "A model name, or a router: orcarouter/<name>, router/<name>, auto:<name>",
    "examples": ["openai/gpt-5-mini", "orcarouter/coding"],
}


def _role(*roles: str) -> Schema:
    return {"type": "string", "enum": list(roles)}


# ---- OpenAI chat completions --------------------------------------------------------

_OA_TEXT = obj({"type": const("text"), "text": _STR, **_CACHE}, ["type", "text"])
_OA_IMAGE = obj(
    {
        "type": const("image_url"),
        "image_url": {
            "anyOf": [_STR, obj({"url": _STR}, ["url"])],
            "description": "An http(s) URL, or a data:<media type>;base64,<data> URL",
        },
    },
    ["type", "image_url"],
)
_OA_REFUSAL = obj({"type": const("refusal"), "refusal": _STR}, ["type", "refusal"])
_OA_TEXT_CONTENT = {"anyOf": [_STR, array(_OA_TEXT), {"type": "null"}]}
_OA_TOOL_CALL = obj(
    {
        "id": _STR,
        "type": const("function"),
        "function": obj(
            {"name": _STR, "arguments": {"anyOf": [_STR, _OBJECT]}},
            ["name"],
        ),
    },
    ["id", "function"],
)

OPENAI_MESSAGE: Schema = {
    "oneOf": [
        obj({"role": _role("system", "developer"), "content": _OA_TEXT_CONTENT}, ["role"]),
        obj(
            {
                "role": _role("user"),
                "content": {"anyOf": [_STR, array({"anyOf": [_OA_TEXT, _OA_IMAGE]})]},
                "name": nullable("string"),
            },
            ["role", "content"],
        ),
        obj(
            {
                "role": _role("assistant"),
                "content": {
                    "anyOf": [_STR, array({"anyOf": [_OA_TEXT, _OA_REFUSAL]}), {"type": "null"}]
                },
                "tool_calls": or_null(array(_OA_TOOL_CALL)),
                "name": nullable("string"),
                "function_call": {"type": "null", "description": "Not supported: use tool_calls"},
            },
            ["role"],
        ),
        obj(
            {
                "role": _role("tool"),
                "tool_call_id": {
                    "type": "string",
                    "description": "The id of a tool call of the previous assistant message",
                },
                "content": _OA_TEXT_CONTENT,
            },
            ["role", "tool_call_id"],
        ),
    ]
}

_OA_TOOL = obj(
    {
        "type": const("function"),
        "function": obj(
            {
                "name": _STR,
                "description": nullable("string"),
                "parameters": or_null(_OBJECT),
                "strict": nullable("boolean"),
            },
            ["name"],
        ),
        **_CACHE,
    },
    ["function"],
)

CHAT_COMPLETION_REQUEST: Schema = obj(
    {
        "model": _MODEL,
        "messages": array(OPENAI_MESSAGE, minItems=1),
        "stream": nullable("boolean"),
        "stream_options": or_null(obj({"include_usage": nullable("boolean")})),
        "tools": or_null(array(_OA_TOOL)),
        "tool_choice": {
            "anyOf": [
                {"type": "string", "enum": ["auto", "none", "required"]},
                obj({"function": obj({"name": _STR}, ["name"])}, ["function"]),
                {"type": "null"},
            ]
        },
        "parallel_tool_calls": nullable("boolean"),
        "max_tokens": {"type": ["integer", "null"], "minimum": 1, "maximum": INT_CEILING},
        "max_completion_tokens": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": INT_CEILING,
        },
        "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
        "top_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "stop": {"anyOf": [_STR, array(_STR), {"type": "null"}]},
        "n": {"enum": [1, None], "description": "Only one choice is supported"},
        "response_format": or_null(
            {
                "oneOf": [
                    obj({"type": {"type": "string", "enum": ["text", "json_object"]}}, ["type"]),
                    obj(  # OpenAI refuses json_schema without its schema object, as tiergate does
                        {
                            "type": {"type": "string", "enum": ["json_schema"]},
                            "json_schema": obj(
                                {
                                    "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                                    "schema": or_null(_OBJECT),
                                    "strict": nullable("boolean"),
                                    "description": nullable("string"),
                                },
                                ["name"],
                            ),
                        },
                        ["type", "json_schema"],
                    ),
                ]
            }
        ),
        "metadata": or_null(_OBJECT),
        "user": nullable("string"),
        "prompt_cache_key": nullable("string"),
        "thinking": or_null(_OBJECT),
    },
    ["model", "messages"],
)

# ---- Anthropic messages ------------------------------------------------------------------

_AN_TEXT = obj({"type": const("text"), "text": _STR, **_CACHE}, ["type", "text"])


def _other_block(*known: str) -> Schema:
    """A block of any other type: kept verbatim for Anthropic upstreams, dropped for
    the others (documents, search results, server tool blocks, newer types)."""
    return obj({"type": {"type": "string", "not": {"enum": list(known)}}}, ["type"])


_AN_IMAGE = obj(
    {
        "type": const("image"),
        "source": {
            "oneOf": [
                obj(
                    {"type": const("base64"), "data": _STR, "media_type": _STR},
                    ["type", "data", "media_type"],
                ),
                obj({"type": const("url"), "url": _STR}, ["type", "url"]),
                _other_block("base64", "url"),  # e.g. a Files API file id: verbatim
            ]
        },
    },
    ["type", "source"],
)
_AN_TOOL_RESULT = obj(
    {
        "type": const("tool_result"),
        "tool_use_id": {
            "type": "string",
            "description": "The id of a tool_use block of the previous assistant message",
        },
        "content": {
            "anyOf": [
                _STR,
                array({"anyOf": [_AN_TEXT, _AN_IMAGE, _other_block("text", "image")]}),
                {"type": "null"},
            ]
        },
        "is_error": nullable("boolean"),
        **_CACHE,
    },
    ["type", "tool_use_id"],
)
_AN_ASSISTANT_BLOCK = {
    "anyOf": [
        _AN_TEXT,
        obj({"type": const("thinking"), "thinking": _STR}, ["type", "thinking"]),
        obj({"type": const("redacted_thinking"), "data": _STR}, ["type", "data"]),
        obj(
            {"type": const("tool_use"), "id": _STR, "name": _STR, "input": _OBJECT},
            ["type", "id", "name"],
        ),
        _other_block("text", "thinking", "redacted_thinking", "tool_use"),
    ]
}

ANTHROPIC_MESSAGE: Schema = {
    "oneOf": [
        obj(
            {
                "role": _role("user"),
                "content": {
                    "anyOf": [
                        _STR,
                        array(
                            {
                                "anyOf": [
                                    _AN_TEXT,
                                    _AN_IMAGE,
                                    _AN_TOOL_RESULT,
                                    _other_block("text", "image", "tool_result"),
                                ]
                            }
                        ),
                    ]
                },
            },
            ["role", "content"],
        ),
        # mid-conversation system message (beta); not first, and content or output_config
        obj(
            {
                "role": _role("system"),
                "content": {"anyOf": [_STR, array({"anyOf": [_AN_TEXT, _other_block("text")]})]},
                "clear_at": {"enum": ["next_user_message", "never", None]},
                "output_config": or_null(_OBJECT),
            },
            ["role"],
        ),
        obj(
            {"role": _role("assistant"), "content": {"anyOf": [_STR, array(_AN_ASSISTANT_BLOCK)]}},
            ["role", "content"],
        ),
    ]
}

_AN_CUSTOM_TOOL = obj(
    {
        "type": {"enum": ["custom", None]},
        "name": _STR,
        "description": nullable("string"),
        "input_schema": _OBJECT,
        "strict": nullable("boolean"),
        **_CACHE,
    },
    ["name", "input_schema"],
)
#: Anthropic-defined tools (web_search_..., bash_...): forwarded to Anthropic
#: upstreams as sent, dropped for the others (docs/conversion.md).
_AN_NATIVE_TOOL = obj(
    {"type": {"type": "string", "not": {"enum": ["custom"]}}, "name": _STR},
    ["type", "name"],
)
_AN_TOOL = {"anyOf": [_AN_CUSTOM_TOOL, _AN_NATIVE_TOOL]}
_PARALLEL = {"disable_parallel_tool_use": nullable("boolean")}

MESSAGES_REQUEST: Schema = obj(
    {
        "model": _MODEL,
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": INT_CEILING},
        "messages": array(ANTHROPIC_MESSAGE, minItems=1),
        "system": {"anyOf": [_STR, array(_AN_TEXT), {"type": "null"}]},
        "stream": nullable("boolean"),
        "tools": or_null(array(_AN_TOOL)),
        "tool_choice": {
            "anyOf": [
                obj(
                    {"type": {"type": "string", "enum": ["auto", "any", "none"]}, **_PARALLEL},
                    ["type"],
                ),
                obj({"type": const("tool"), "name": _STR, **_PARALLEL}, ["type", "name"]),
                {"type": "null"},
            ]
        },
        "stop_sequences": or_null(array(_STR)),
        "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "top_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "metadata": or_null(_OBJECT),
        "thinking": or_null(_OBJECT),
    },
    ["model", "max_tokens", "messages"],
)

#: A Messages body without max_tokens (counted by the gateway, docs/conversion.md).
COUNT_TOKENS_REQUEST: Schema = obj(
    {k: v for k, v in MESSAGES_REQUEST["properties"].items() if k != "max_tokens"},
    ["model", "messages"],
)

EMBEDDINGS_REQUEST: Schema = obj(
    {
        "model": {"type": "string", "description": "A concrete model of an OpenAI-type channel"},
        "input": {
            "anyOf": [
                {"type": "string"},
                array({"type": "string"}, minItems=1),
                array({"type": "integer"}, minItems=1),
                array(array({"type": "integer"}, minItems=1), minItems=1),
            ]
        },
        "dimensions": {"type": "integer", "minimum": 1},
        "encoding_format": {"type": "string", "enum": ["float", "base64"]},
        "user": {"type": "string"},
    },
    ["model", "input"],
)
