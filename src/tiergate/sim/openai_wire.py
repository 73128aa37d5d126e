"""OpenAI Chat Completions (and DeepSeek, which speaks it) as the provider sends it.

Request: `POST /v1/chat/completions`, key in `Authorization: Bearer`. A model
whose name starts with "deepseek" is served with DeepSeek's cache rules and
usage fields (`prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`) and
may carry `reasoning_content`.

Streaming: `chat.completion.chunk` events as `data:` lines, tool calls as
`tool_calls` deltas (index, id and name first, then argument fragments), the
finish reason in a chunk with an empty delta, with
`stream_options.include_usage` a last chunk with empty `choices` and the
usage (every earlier chunk then has `"usage": null`), and `data: [DONE]`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from starlette.requests import Request

from tiergate.sim.prompt import IMAGE_TOKENS, PromptBlock, SimCall, SimRequestError, ToolDef
from tiergate.sim.responder import Reply
from tiergate.sim.wire import (
    ReplyContext,
    SimUsage,
    StreamEvent,
    bearer_token,
    canonical_json,
    dumps,
    sse_data,
    text_of,
    token_chunks,
)

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
RETENTION_SECONDS = {"24h": 86400.0}


def _bad(message: str, param: str | None = None, code: str | None = None) -> SimRequestError:
    return SimRequestError(400, message, param=param, code=code)


class OpenAIWire:
    name = "openai"

    def api_key(self, request: Request) -> str | None:
        return bearer_token(request)

    def parse(self, body: Any, request: Request, path_model: str | None) -> SimCall:
        if not isinstance(body, dict):
            raise _bad("The request body must be a JSON object.")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _bad("you must provide a model parameter", "model")
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise _bad(
                "Invalid type for 'messages': expected an array of objects.",
                "messages",
                "invalid_type",
            )
        if not messages:
            raise _bad(
                "Invalid 'messages': empty array. Expected an array with minimum length 1.",
                "messages",
                "empty_array",
            )
        deepseek = model.lower().startswith("deepseek")
        tools = _parse_tools(body.get("tools"))
        blocks = [
            PromptBlock(
                "<|tool|>"
                + canonical_json(
                    {"name": t.name, "description": t.description, "parameters": t.schema}
                )
            )
            for t in tools
        ]
        _add_messages(blocks, messages)
        last_role = messages[-1].get("role")
        return SimCall(
            provider="deepseek" if deepseek else "openai",
            model=model,
            blocks=blocks,
            tools=tools,
            last_turn="tool_result"
            if last_role in ("tool", "function")
            else "assistant"
            if last_role == "assistant"
            else "user",
            directive_text=next(
                (text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"),
                "",
            ),
            max_tokens=_max_tokens(body),
            stream=bool(body.get("stream")),
            include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
            tool_choice=_tool_choice(body.get("tool_choice")),
            parallel_tools=body.get("parallel_tool_calls") is not False,
            thinking=deepseek and ("reasoner" in model or _thinking_enabled(body)),
            can_think=deepseek,
            json_schema=_json_schema(body.get("response_format")),
            json_mode=_json_schema_type(body.get("response_format")) == "json_object",
            cache_ttl_seconds=RETENTION_SECONDS.get(str(body.get("prompt_cache_retention"))),
        )

    # -- responses -------------------------------------------------------------

    def render(self, call: SimCall, reply: Reply, usage: SimUsage, ctx: ReplyContext) -> bytes:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if reply.text or not reply.tool_calls else None,
        }
        if call.provider == "deepseek":
            if reply.thinking:
                message["reasoning_content"] = reply.thinking
        else:
            message["refusal"] = None
            message["annotations"] = []
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": "call_" + tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": tc.arguments},
                }
                for tc in reply.tool_calls
            ]
        return dumps(
            {
                "id": "chatcmpl-" + ctx.request_id,
                "object": "chat.completion",
                "created": ctx.created,
                "model": call.model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": reply.finish,
                    }
                ],
                "usage": _usage(call, usage),
                "service_tier": "default",
                "system_fingerprint": "fp_tiergate_sim",
            }
        )

    def stream(
        self, call: SimCall, reply: Reply, usage: SimUsage, ctx: ReplyContext, chunk_tokens: int
    ) -> list[StreamEvent]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            body: dict[str, Any] = {
                "id": "chatcmpl-" + ctx.request_id,
                "object": "chat.completion.chunk",
                "created": ctx.created,
                "model": call.model,
                "system_fingerprint": "fp_tiergate_sim",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if call.include_usage:
                body["usage"] = None
            return sse_data(body)

        events: list[StreamEvent] = []
        # The role goes in the first delta: its own chunk before content or reasoning,
        # or alongside the first tool call when the reply is only tool calls.
        tools_only = bool(reply.tool_calls) and not reply.thinking
        role: dict[str, Any] = {"role": "assistant", "content": None if tools_only else ""}
        if call.provider != "deepseek":
            role["refusal"] = None
        if not tools_only:
            events.append((chunk(role), 0))
            role = {}
        for piece, n in token_chunks(reply.thinking, chunk_tokens):
            events.append((chunk({"content": None, "reasoning_content": piece}), n))
        for piece, n in token_chunks(reply.text, chunk_tokens):
            events.append((chunk({"content": piece}), n))
        for index, tc in enumerate(reply.tool_calls):
            head = {
                "index": index,
                "id": "call_" + tc.id,
                "type": "function",
                "function": {"name": tc.name, "arguments": ""},
            }
            events.append((chunk({**role, "tool_calls": [head]}), 1))
            role = {}
            for piece, n in token_chunks(tc.arguments, chunk_tokens):
                fragment = {"index": index, "function": {"arguments": piece}}
                events.append((chunk({"tool_calls": [fragment]}), n))
        events.append((chunk({}, reply.finish), 0))
        if call.include_usage:
            tail = {
                "id": "chatcmpl-" + ctx.request_id,
                "object": "chat.completion.chunk",
                "created": ctx.created,
                "model": call.model,
                "system_fingerprint": "fp_tiergate_sim",
                "choices": [],
                "usage": _usage(call, usage),
            }
            events.append((sse_data(tail), 0))
        events.append((b"data: [DONE]\n\n", 0))
        return events

    def error(self, status: int, message: str, code: str | None = None) -> bytes:
        kind, default_code = _ERROR_TYPES.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", None)
        )
        return dumps(
            {
                "error": {
                    "message": message,
                    "type": kind,
                    "param": None,
                    "code": code or default_code,
                }
            }
        )

    def broken_event(self) -> bytes:
        return (
            b'data: {"id": "chatcmpl-broken", "object": "chat.completion.chunk", "choices": [{\n\n'
        )

    def stream_error(self, call: SimCall, status: int, message: str) -> list[bytes]:
        return [b"data: " + self.error(status, message) + b"\n\n"]

    def stream_media_type(self, call: SimCall) -> str:
        return "text/event-stream; charset=utf-8"


def _usage(call: SimCall, usage: SimUsage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.prompt_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
    }
    if call.provider == "deepseek":
        out["prompt_cache_hit_tokens"] = usage.cache_read
        out["prompt_cache_miss_tokens"] = usage.prompt_tokens - usage.cache_read
        if usage.reasoning_tokens:
            out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    else:
        out["prompt_tokens_details"]["audio_tokens"] = 0
        out["completion_tokens_details"] = {
            "reasoning_tokens": usage.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
    return out


def _parse_tools(raw: Any) -> list[ToolDef]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _bad("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
    tools = []
    for i, tool in enumerate(raw):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise _bad(f"Missing required parameter: 'tools[{i}].function.name'.", f"tools[{i}]")
        tools.append(
            ToolDef(fn["name"], str(fn.get("description") or ""), fn.get("parameters") or {})
        )
    return tools


def _add_messages(blocks: list[PromptBlock], messages: list[Any]) -> None:
    """Append each message's blocks, checking tool calls are answered in order."""
    pending: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _bad(f"Invalid type for 'messages[{i}]': expected an object.", f"messages[{i}]")
        role = message.get("role")
        if role not in ROLES:
            raise _bad(
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                "'user', 'function', 'tool', and 'developer'.",
                f"messages[{i}].role",
                "invalid_value",
            )
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise _bad(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{i}].role",
                )
            pending.remove(call_id)
        elif pending and role != "function":
            raise _unanswered(pending, i)
        if message.get("content") is None and not (
            role == "assistant" and (message.get("tool_calls") or message.get("function_call"))
        ):
            raise _bad(
                "Invalid value for 'content': expected a string, got null.",
                f"messages.[{i}].content",
            )
        blocks.append(PromptBlock(f"<|{role}|>\n", marker=True))
        _add_content(blocks, message.get("content"), i)
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                fn = (call.get("function") or {}) if isinstance(call, dict) else {}
                blocks.append(
                    PromptBlock(f"<|tool_call|>{fn.get('name', '')}\n{fn.get('arguments', '')}")
                )
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    pending.append(call["id"])
    if pending and messages[-1].get("role") == "tool":
        raise _unanswered(pending, len(messages))


def _unanswered(pending: list[str], index: int) -> SimRequestError:
    return _bad(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(pending),
        f"messages.[{index}].role",
    )


def _add_content(blocks: list[PromptBlock], content: Any, index: int) -> None:
    if content is None:
        return
    if isinstance(content, str):
        blocks.append(PromptBlock(content))
        return
    if not isinstance(content, list):
        raise _bad(
            f"Invalid type for 'messages[{index}].content': expected a string or an array.",
            f"messages[{index}].content",
            "invalid_type",
        )
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("text", "refusal"):
            blocks.append(PromptBlock(str(part.get(kind) or "")))
        elif kind in ("image_url", "input_audio", "file"):
            ident = hashlib.blake2b(canonical_json(part).encode(), digest_size=8).hexdigest()
            blocks.append(PromptBlock(f"<|{kind}:{ident}|>", opaque_tokens=IMAGE_TOKENS))


def _max_tokens(body: dict[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _bad(
                f"Invalid '{name}': integer below minimum value. Expected a value >= 1.",
                name,
                "integer_below_min_value",
            )
        return value
    return None


def _tool_choice(raw: Any) -> str:
    if raw in ("none", "auto", "required"):
        return str(raw)
    if isinstance(raw, dict):
        name = (raw.get("function") or {}).get("name")
        if isinstance(name, str):
            return name
    return "auto"


def _thinking_enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") == "enabled"


def _json_schema_type(response_format: Any) -> Any:
    return response_format.get("type") if isinstance(response_format, dict) else None


def _json_schema(response_format: Any) -> dict[str, Any] | None:
    """The requested schema; a malformed `response_format` is a 400, as OpenAI answers."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise _bad(
            "Invalid type for 'response_format': expected an object.",
            "response_format",
            "invalid_type",
        )
    if response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise _bad(
            "Invalid type for 'response_format.json_schema': expected an object.",
            "response_format.json_schema",
            "invalid_type",
        )
    if not isinstance(spec.get("name"), str):
        raise _bad(
            "Missing required parameter: 'response_format.json_schema.name'.",
            "response_format.json_schema.name",
            "missing_required_parameter",
        )
    schema = spec.get("schema")
    return schema if isinstance(schema, dict) else {}
