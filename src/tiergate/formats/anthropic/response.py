"""Message objects: parse an upstream's answer, render a client's; usage."""

from __future__ import annotations

import uuid
from typing import Any

from tiergate.core.model import (
    ChatResponse,
    FinishReason,
    Part,
    RawBlock,
    TextPart,
    ThinkingPart,
    ToolCall,
    Usage,
)
from tiergate.formats import arguments_object, dumps
from tiergate.formats.errors import UpstreamStreamError

FINISH_IN: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
FINISH_OUT = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "error": "end_turn",
}
# ---- upstream response --------------------------------------------------------


def parse_usage(u: Any, base: Usage | None = None) -> Usage:
    """Anthropic usage as neutral usage; fields absent from `u` keep `base`'s values."""
    usage = base or Usage()
    if not isinstance(u, dict):
        return usage
    plain = u.get("input_tokens")
    read = u.get("cache_read_input_tokens")
    write = u.get("cache_creation_input_tokens")
    cache_read = int(read) if read is not None else usage.cache_read_tokens
    cache_write = int(write) if write is not None else usage.cache_write_tokens
    uncached = int(plain) if plain is not None else usage.uncached_input_tokens
    out = u.get("output_tokens")
    return Usage(
        input_tokens=uncached + cache_read + cache_write,
        output_tokens=int(out) if out is not None else usage.output_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def parse_response(body: dict[str, Any]) -> ChatResponse:
    """An upstream Message object as a neutral response."""
    if body.get("type") == "error":
        err = body.get("error") or {}
        raise UpstreamStreamError(str(err.get("message", "upstream error")), err.get("type"))
    content: list[Part] = []
    calls: list[ToolCall] = []
    for b in body.get("content") or ():
        kind = b.get("type")
        if kind == "text":
            content.append(TextPart(b.get("text") or ""))
        elif kind == "thinking":
            content.append(ThinkingPart(b.get("thinking") or "", signature=b.get("signature")))
        elif kind == "redacted_thinking":
            content.append(ThinkingPart(b.get("data") or "", redacted=True))
        elif kind == "tool_use":
            calls.append(
                ToolCall(b.get("id") or "", b.get("name") or "", dumps(b.get("input") or {}))
            )
        elif isinstance(kind, str):  # server tool use and results, newer blocks
            content.append(RawBlock(b))
    return ChatResponse(
        id=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        content=content,
        tool_calls=calls,
        finish_reason=FINISH_IN.get(body.get("stop_reason") or "end_turn", "stop"),
        usage=parse_usage(body.get("usage")),
    )


# ---- client response ----------------------------------------------------------


def render_usage(u: Usage) -> dict[str, int]:
    return {
        "input_tokens": u.uncached_input_tokens,
        "output_tokens": u.output_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
    }


def _response_blocks(resp: ChatResponse) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in resp.content:
        if isinstance(p, ThinkingPart):
            if p.redacted:
                blocks.append({"type": "redacted_thinking", "data": p.text})
            else:
                blocks.append(
                    {"type": "thinking", "thinking": p.text, "signature": p.signature or ""}
                )
        elif isinstance(p, TextPart):
            blocks.append({"type": "text", "text": p.text})
        elif isinstance(p, RawBlock) and p.source == "anthropic":
            blocks.append(p.block)
    for c in resp.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": tool_use_id(c.id),
                "name": c.name,
                "input": arguments_object(c.arguments),
            }
        )
    return blocks


def render_response(resp: ChatResponse, model: str) -> dict[str, Any]:
    """The exact Message object a client expects."""
    return {
        "id": message_id(resp.id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _response_blocks(resp),
        "stop_reason": FINISH_OUT.get(resp.finish_reason, "end_turn"),
        "stop_sequence": None,
        "usage": render_usage(resp.usage),
    }


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def message_id(upstream_id: str | None) -> str:
    """The Message id a client sees: Anthropic's own as is; another provider's
    (`chatcmpl-...`) behind `msg_`, which Anthropic clients expect."""
    if not upstream_id:
        return new_message_id()
    return upstream_id if upstream_id.startswith("msg_") else f"msg_{upstream_id}"


def tool_use_id(upstream_id: str) -> str:
    """A tool_use block's id: `toolu_` before another provider's (`call_...`).
    Deterministic, so the client's tool_result names the id its history holds."""
    if not upstream_id:
        return f"toolu_{uuid.uuid4().hex[:24]}"
    return upstream_id if upstream_id.startswith("toolu_") else f"toolu_{upstream_id}"
