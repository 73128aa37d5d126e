"""Anthropic Messages as the provider sends it.

Request: `POST /v1/messages`, key in `x-api-key`, `anthropic-version` header
required. Breakpoints are the `cache_control` markers on tools, system blocks
and message content blocks (at most 4). Usage reports `input_tokens` WITHOUT
the cached and written tokens, plus `cache_read_input_tokens`,
`cache_creation_input_tokens` and its 5m/1h split.

Streaming: message_start (usage with the input side), per block
content_block_start / content_block_delta (text_delta, input_json_delta,
thinking_delta, signature_delta) / content_block_stop, a ping, message_delta
(stop_reason and cumulative usage), message_stop.
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
    sse_event,
    text_of,
    token_chunks,
)

MAX_BREAKPOINTS = 4
MID_CONVERSATION_SYSTEM = "mid-conversation-system-"
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _bad(message: str) -> SimRequestError:
    return SimRequestError(400, message)


def _ttl(block: dict[str, Any]) -> str | None:
    control = block.get("cache_control")
    if not isinstance(control, dict):
        return None
    return "1h" if control.get("ttl") == "1h" else "5m"


class AnthropicWire:
    name = "anthropic"

    def __init__(self, require_version: bool = True) -> None:
        self.require_version = require_version

    def api_key(self, request: Request) -> str | None:
        return request.headers.get("x-api-key") or bearer_token(request)

    def parse(self, body: Any, request: Request, path_model: str | None) -> SimCall:
        if self.require_version and not request.headers.get("anthropic-version"):
            raise _bad("anthropic-version: header is required")
        if not isinstance(body, dict):
            raise _bad("The request body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _bad("model: Field required")
        max_tokens = body.get("max_tokens")
        if max_tokens is None:
            raise _bad("max_tokens: Field required")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise _bad("max_tokens: Input should be greater than or equal to 1")
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise _bad("messages: Input should be a valid list")
        if not messages:
            raise _bad("messages: at least one message is required")
        thinking = body.get("thinking")
        thinking_on = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
        budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
        if thinking_on and isinstance(budget, int) and budget >= max_tokens:
            raise _bad("`max_tokens` must be greater than `thinking.budget_tokens`.")

        tools, blocks = _parse_tools(body.get("tools"))
        _add_system(blocks, body.get("system"))
        betas = ",".join(request.headers.getlist("anthropic-beta"))
        _add_messages(blocks, messages, system_role=MID_CONVERSATION_SYSTEM in betas)
        found = sum(1 for b in blocks if b.cache_ttl)
        if found > MAX_BREAKPOINTS:
            raise _bad(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {found}."
            )
        raw_choice = body.get("tool_choice")
        choice: dict[str, Any] = raw_choice if isinstance(raw_choice, dict) else {}
        last = messages[-1]
        return SimCall(
            provider="anthropic",
            model=model,
            blocks=blocks,
            tools=tools,
            last_turn="assistant"
            if last.get("role") == "assistant"
            else "tool_result"
            if _has_tool_result(last)
            else "user",
            directive_text=_latest_user_text(messages),
            max_tokens=max_tokens,
            stream=bool(body.get("stream")),
            tool_choice=_tool_choice(choice),
            parallel_tools=not choice.get("disable_parallel_tool_use", False),
            thinking=thinking_on,
            can_think=True,
        )

    # -- responses -------------------------------------------------------------

    def render(self, call: SimCall, reply: Reply, usage: SimUsage, ctx: ReplyContext) -> bytes:
        content: list[dict[str, Any]] = []
        if reply.thinking:
            content.append(
                {"type": "thinking", "thinking": reply.thinking, "signature": reply.signature}
            )
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for tc in reply.tool_calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": "toolu_01" + tc.id,
                    "name": tc.name,
                    "input": tc.input or {},
                }
            )
        return dumps(
            {
                "id": "msg_01" + ctx.request_id,
                "type": "message",
                "role": "assistant",
                "model": call.model,
                "content": content,
                "stop_reason": STOP_REASONS[reply.finish],
                "stop_sequence": None,
                "usage": {
                    **_input_usage(usage),
                    "output_tokens": usage.output_tokens,
                    "service_tier": "standard",
                },
            }
        )

    def stream(
        self, call: SimCall, reply: Reply, usage: SimUsage, ctx: ReplyContext, chunk_tokens: int
    ) -> list[StreamEvent]:
        start = {
            "type": "message_start",
            "message": {
                "id": "msg_01" + ctx.request_id,
                "type": "message",
                "role": "assistant",
                "model": call.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**_input_usage(usage), "output_tokens": 1, "service_tier": "standard"},
            },
        }
        events: list[StreamEvent] = [(sse_event("message_start", start), 0)]
        blocks: list[tuple[dict[str, Any], list[tuple[dict[str, Any], int]]]] = []
        if reply.thinking:
            deltas = [
                ({"type": "thinking_delta", "thinking": piece}, n)
                for piece, n in token_chunks(reply.thinking, chunk_tokens)
            ]
            deltas.append(({"type": "signature_delta", "signature": reply.signature}, 0))
            blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
        if reply.text:
            deltas = [
                ({"type": "text_delta", "text": piece}, n)
                for piece, n in token_chunks(reply.text, chunk_tokens)
            ]
            blocks.append(({"type": "text", "text": ""}, deltas))
        for tc in reply.tool_calls:
            deltas = [({"type": "input_json_delta", "partial_json": ""}, 1)]
            deltas += [
                ({"type": "input_json_delta", "partial_json": piece}, n)
                for piece, n in token_chunks(tc.arguments, chunk_tokens)
            ]
            head = {"type": "tool_use", "id": "toolu_01" + tc.id, "name": tc.name, "input": {}}
            blocks.append((head, deltas))
        for index, (head, deltas) in enumerate(blocks):
            events.append(
                (
                    sse_event(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": head},
                    ),
                    0,
                )
            )
            if index == 0:
                events.append((sse_event("ping", {"type": "ping"}), 0))
            for delta, n in deltas:
                events.append(
                    (
                        sse_event(
                            "content_block_delta",
                            {"type": "content_block_delta", "index": index, "delta": delta},
                        ),
                        n,
                    )
                )
            events.append(
                (sse_event("content_block_stop", {"type": "content_block_stop", "index": index}), 0)
            )
        message_delta = {
            "type": "message_delta",
            "delta": {"stop_reason": STOP_REASONS[reply.finish], "stop_sequence": None},
            "usage": {
                "input_tokens": usage.prompt_tokens - usage.cache_read - usage.cache_write,
                "cache_creation_input_tokens": usage.cache_write,
                "cache_read_input_tokens": usage.cache_read,
                "output_tokens": usage.output_tokens,
            },
        }
        events.append((sse_event("message_delta", message_delta), 0))
        events.append((sse_event("message_stop", {"type": "message_stop"}), 0))
        return events

    def error(self, status: int, message: str, code: str | None = None) -> bytes:
        kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return dumps({"type": "error", "error": {"type": kind, "message": message}})

    def broken_event(self) -> bytes:
        return (
            b"event: content_block_delta\n"
            b'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_\n\n'
        )

    def stream_error(self, call: SimCall, status: int, message: str) -> list[bytes]:
        return [b"event: error\ndata: " + self.error(status, message) + b"\n\n"]

    def stream_media_type(self, call: SimCall) -> str:
        return "text/event-stream; charset=utf-8"


def _input_usage(usage: SimUsage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens - usage.cache_read - usage.cache_write,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write - usage.cache_write_1h,
            "ephemeral_1h_input_tokens": usage.cache_write_1h,
        },
    }


def _parse_tools(raw: Any) -> tuple[list[ToolDef], list[PromptBlock]]:
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise _bad("tools: Input should be a valid list")
    tools: list[ToolDef] = []
    blocks: list[PromptBlock] = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise _bad(f"tools.{i}.name: Field required")
        if tool.get("type") not in (None, "custom"):
            # A server tool (web search, code execution): part of the prompt, never called here.
            definition = {k: v for k, v in tool.items() if k != "cache_control"}
        else:
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise _bad(f"tools.{i}.custom.input_schema: Field required")
            tools.append(ToolDef(tool["name"], str(tool.get("description") or ""), schema))
            definition = {
                "name": tool["name"],
                "description": tools[-1].description,
                "input_schema": schema,
            }
        blocks.append(PromptBlock("<|tool|>" + canonical_json(definition), cache_ttl=_ttl(tool)))
    return tools, blocks


def _add_system(blocks: list[PromptBlock], system: Any) -> None:
    if system is None:
        return
    blocks.append(PromptBlock("<|system|>\n", marker=True))
    if isinstance(system, str):
        blocks.append(PromptBlock(system))
        return
    if not isinstance(system, list):
        raise _bad("system: Input should be a valid string or list")
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise _bad(f"system.{i}: Input should be a text block")
        blocks.append(PromptBlock(str(block.get("text", "")), cache_ttl=_ttl(block)))


def _add_messages(blocks: list[PromptBlock], messages: list[Any], system_role: bool) -> None:
    """Append each message's blocks, validating them as the Messages API does.

    `system_role`: the request carries the mid-conversation-system beta, which
    allows `role: "system"` anywhere but first.
    """
    open_ids: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _bad(f"messages.{i}: Input should be a valid dictionary")
        role = message.get("role")
        if role == "system" and system_role and i > 0:
            blocks.append(PromptBlock("<|system|>\n", marker=True))
            content = message.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if content is None and isinstance(message.get("output_config"), dict):
                parts = []  # a per-turn output_config alone
            elif not isinstance(parts, list) or not parts:
                raise _bad(f"messages.{i}: a system message needs content or output_config")
            blocks.extend(_content_block(p) for p in parts if isinstance(p, dict))
            continue  # tool_use ids stay open for the next user message
        if role not in ("user", "assistant"):
            raise _bad(
                f"messages.{i}.role: Input should be 'user' or 'assistant'; got \"{role}\". "
                "The Messages API accepts a top-level `system` parameter, not a system role."
            )
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
            raise _bad(f"messages.{i}.content: Input should be a valid string or list of blocks")
        final_assistant = role == "assistant" and i == len(messages) - 1
        _check_content(i, parts, open_ids, final_assistant)
        open_ids = []
        blocks.append(PromptBlock(f"<|{role}|>\n", marker=True))
        for part in parts:
            blocks.append(_content_block(part))
            if role == "assistant" and part.get("type") == "tool_use":
                open_ids.append(str(part.get("id")))


def _check_content(
    i: int, parts: list[dict[str, Any]], open_ids: list[str], final_assistant: bool
) -> None:
    """The API's rules a gateway's format conversion most often breaks."""
    if not final_assistant and (not parts or parts == [{"type": "text", "text": ""}]):
        raise _bad(
            f"messages.{i}: all messages must have non-empty content except for the optional "
            "final assistant message"
        )
    if any(p.get("type") == "text" and not p.get("text") for p in parts) and not final_assistant:
        raise _bad("messages: text content blocks must be non-empty")
    results = [p.get("tool_use_id") for p in parts if p.get("type") == "tool_result"]
    for j, result_id in enumerate(results):
        if result_id not in open_ids:
            raise _bad(
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {result_id}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )
    missing = [x for x in open_ids if x not in results]
    if missing:
        raise _bad(
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
            "corresponding `tool_result` block in the next message."
        )
    leading = next((k for k, p in enumerate(parts) if p.get("type") != "tool_result"), len(parts))
    if leading < len(open_ids):
        raise _bad(
            f"messages.{i}: Did not find {len(open_ids)} `tool_result` block(s) at the beginning "
            "of this message. Messages following `tool_use` blocks must begin with a matching "
            "number of `tool_result` blocks."
        )


def _content_block(part: dict[str, Any]) -> PromptBlock:
    kind = part.get("type")
    ttl = _ttl(part)
    if kind == "text":
        return PromptBlock(str(part.get("text", "")), cache_ttl=ttl)
    if kind == "tool_use":
        return PromptBlock(
            f"<|tool_use|>{part.get('name', '')}\n{canonical_json(part.get('input', {}))}",
            cache_ttl=ttl,
        )
    if kind == "tool_result":
        flag = "error" if part.get("is_error") else "ok"
        return PromptBlock(f"<|tool_result:{flag}|>{text_of(part.get('content'))}", cache_ttl=ttl)
    if kind == "thinking":
        return PromptBlock(str(part.get("thinking", "")), cache_ttl=ttl)
    if kind in ("image", "document"):
        ident = hashlib.blake2b(canonical_json(part.get("source")).encode(), digest_size=8)
        return PromptBlock(
            f"<|{kind}:{ident.hexdigest()}|>", cache_ttl=ttl, opaque_tokens=IMAGE_TOKENS
        )
    body = {k: v for k, v in part.items() if k != "cache_control"}
    return PromptBlock(canonical_json(body), cache_ttl=ttl)


def _has_tool_result(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "tool_result" for p in content
    )


def _latest_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        text = text_of(message.get("content"))
        if text:
            return text
    return ""


def _tool_choice(choice: dict[str, Any]) -> str:
    kind = choice.get("type", "auto")
    if kind == "any":
        return "required"
    if kind == "tool" and isinstance(choice.get("name"), str):
        return str(choice["name"])
    return "none" if kind == "none" else "auto"
