"""The OpenAI Responses API request body (`POST /v1/responses`) for the OpenAPI
document, typed as tiergate.formats.responses.request checks it.

Objects stay open: unknown fields are dropped, not refused. Item and tool
types tiergate does not serve (hosted tools and their call records) are
accepted and dropped, so they match the open "other" branches. What needs
stored state is typed as null: previous_response_id, conversation, prompt,
background (docs/conversion.md says why).
"""

from __future__ import annotations

from tiergate.api.openapi_schema import Schema, array, const, nullable, obj, or_null
from tiergate.formats import INT_CEILING

_STR = {"type": "string"}
_OBJECT = {"type": "object"}
_MODEL = {
    "type": "string",
    "description": "A model name, or a router: orcarouter/<name>, router/<name>, auto:<name>",
    "examples": ["openai/gpt-5-mini", "orcarouter/coding"],
}


def _other(*known: str) -> Schema:
    """An object whose `type` is none of `known`: a kind served by dropping it."""
    return obj({"type": {"type": "string", "not": {"enum": list(known)}}}, ["type"])


_TEXT_PART = obj(
    {"type": {"type": "string", "enum": ["input_text", "output_text", "text"]}, "text": _STR},
    ["type", "text"],
)
_REFUSAL_PART = obj({"type": const("refusal"), "refusal": _STR}, ["type", "refusal"])
_IMAGE_PART = obj(
    {
        "type": const("input_image"),
        "image_url": {
            "type": "string",
            "description": "An http(s) URL or a data:<media type>;base64,<data> URL "
            "(file_id is not supported)",
        },
    },
    ["type", "image_url"],
)
_CONTENT = {
    "anyOf": [_STR, array({"anyOf": [_TEXT_PART, _REFUSAL_PART, _IMAGE_PART]})],
    "description": "Images only in user messages and tool outputs",
}
_MESSAGE = obj(
    {
        "type": or_null(const("message")),
        "role": {"type": "string", "enum": ["user", "assistant", "system", "developer"]},
        "content": _CONTENT,
    },
    ["role", "content"],
)
_NAMESPACE = {"namespace": nullable("string")}
_FUNCTION_CALL = obj(
    {
        "type": const("function_call"),
        "call_id": _STR,
        "name": _STR,
        "arguments": {"anyOf": [_STR, _OBJECT]},
        **_NAMESPACE,
    },
    ["type", "call_id", "name"],
)
_CUSTOM_CALL = obj(
    {"type": const("custom_tool_call"), "call_id": _STR, "name": _STR, "input": _STR, **_NAMESPACE},
    ["type", "call_id", "name", "input"],
)
#: A shell call and its output may name the call by `id` instead of `call_id`.
_NAMES_CALL = {"anyOf": [{"required": ["call_id"]}, {"required": ["id"]}]}
_SHELL_IDS = {"call_id": nullable("string"), "id": nullable("string")}
_SHELL_CALL = {
    **obj(
        {
            "type": const("local_shell_call"),
            **_SHELL_IDS,
            "action": or_null(_OBJECT),
        },
        ["type"],
    ),
    **_NAMES_CALL,
}
_OUTPUT = {
    "anyOf": [
        _STR,
        array({"anyOf": [_TEXT_PART, _IMAGE_PART]}),
        obj({"content": _STR}, ["content"]),
    ]
}
_CALL_OUTPUT = obj(
    {
        "type": {"type": "string", "enum": ["function_call_output", "custom_tool_call_output"]},
        "call_id": {"type": "string", "description": "The call_id of an earlier call"},
        "output": _OUTPUT,
    },
    ["type", "call_id", "output"],
)
_SHELL_OUTPUT = {
    **obj(
        {"type": const("local_shell_call_output"), **_SHELL_IDS, "output": _OUTPUT},
        ["type", "output"],
    ),
    **_NAMES_CALL,
}
_REASONING = obj(
    {
        "type": const("reasoning"),
        "encrypted_content": {
            "type": ["string", "null"],
            "description": "Given back to the upstream only when tiergate minted it",
        },
        "content": or_null(array(_OBJECT)),
    },
    ["type"],
)
_KNOWN_ITEMS = (
    "message",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "reasoning",
    "item_reference",
)
_ITEM = {
    "anyOf": [
        _MESSAGE,
        _FUNCTION_CALL,
        _CUSTOM_CALL,
        _SHELL_CALL,
        _CALL_OUTPUT,
        _SHELL_OUTPUT,
        _REASONING,
        _other(*_KNOWN_ITEMS),
    ]
}

_FUNCTION_TOOL = obj(
    {
        "type": const("function"),
        "name": _STR,
        "description": nullable("string"),
        "parameters": or_null(_OBJECT),
        "strict": nullable("boolean"),
    },
    ["type", "name"],
)
_CUSTOM_TOOL = obj(
    {
        "type": const("custom"),
        "name": _STR,
        "description": nullable("string"),
        "format": or_null(obj({"syntax": nullable("string"), "definition": nullable("string")})),
    },
    ["type", "name"],
)
_TOOL = {
    "anyOf": [
        _FUNCTION_TOOL,
        _CUSTOM_TOOL,
        obj(
            {
                "type": const("namespace"),
                "name": _STR,
                "description": nullable("string"),
                "tools": array(
                    {"anyOf": [_FUNCTION_TOOL, _CUSTOM_TOOL, _other("function", "custom")]}
                ),
            },
            ["type", "name", "tools"],
        ),
        _other("function", "custom", "namespace"),
    ],
    "description": "function, custom and local_shell tools are served (custom and "
    "namespaced ones as functions); hosted tools are dropped",
}
_TOOL_CHOICE = {
    "anyOf": [
        {"type": "string", "enum": ["auto", "none", "required"]},
        obj(
            {"type": {"enum": ["function", "custom"]}, "name": _STR, **_NAMESPACE},
            ["type", "name"],
        ),
        obj(
            {
                "type": const("allowed_tools"),
                "mode": {"enum": ["auto", "required"]},
                "tools": array(_OBJECT),
            },
            ["type", "tools"],
        ),
        _other("function", "custom", "allowed_tools"),
        {"type": "null"},
    ]
}
_TEXT_FORMAT = {
    "anyOf": [
        obj({"type": {"enum": ["text", "json_object"]}}, ["type"]),
        obj(
            {
                "type": const("json_schema"),
                "name": _STR,
                "schema": _OBJECT,
                "strict": nullable("boolean"),
                "description": nullable("string"),
            },
            ["type", "name", "schema"],
        ),
        {"type": "null"},
    ]
}


def _stateful(what: str) -> Schema:
    return {"type": "null", "description": f"Not supported: tiergate stores no {what}"}


RESPONSES_REQUEST: Schema = obj(
    {
        "model": _MODEL,
        "input": {"anyOf": [_STR, array(_ITEM, minItems=1)]},
        "instructions": {
            "anyOf": [_STR, array(obj({"content": or_null(_CONTENT)})), {"type": "null"}]
        },
        "tools": or_null(array(_TOOL)),
        "tool_choice": _TOOL_CHOICE,
        "parallel_tool_calls": nullable("boolean"),
        "stream": nullable("boolean"),
        "store": {"type": ["boolean", "null"], "description": "Accepted; nothing is stored"},
        "include": or_null(array(_STR)),
        "max_output_tokens": {"type": ["integer", "null"], "minimum": 1, "maximum": INT_CEILING},
        "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
        "top_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "text": or_null(obj({"format": _TEXT_FORMAT})),
        "reasoning": or_null(_OBJECT),
        "metadata": or_null(_OBJECT),
        "user": nullable("string"),
        "prompt_cache_key": nullable("string"),
        "previous_response_id": _stateful("responses; send the whole conversation"),
        "conversation": _stateful("conversations"),
        "prompt": _stateful("prompt templates"),
        "background": {"enum": [False, None], "description": "Background mode is not supported"},
    },
    ["model", "input"],
)

#: Each event of a streamed Response: `event` names it, `data` repeats it as
#: `type` along with a `sequence_number`.
RESPONSES_EVENT = obj(
    {
        "event": {"type": "string", "pattern": "^(response\\.[a-z_.]+|error)$"},
        "data": {"type": "string", "description": "The event's JSON object"},
    },
    ["event", "data"],
)
