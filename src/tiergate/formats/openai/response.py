"""Chat-completion objects: parse an upstream's answer, render a client's; usage."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tiergate.core.model import (
    ChatResponse,
    FinishReason,
    Part,
    TextPart,
    ThinkingPart,
    ToolCall,
    Usage,
)
from tiergate.formats.errors import UpstreamStreamError

FINISH_IN: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "insufficient_system_resource": "error",  # DeepSeek: generation cut by capacity
}
# OpenAI has no "error" finish reason; the SDK's type admits only these four.
FINISH_OUT: dict[str, str] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "error": "stop",
}
# ---- upstream response --------------------------------------------------------


def parse_usage(u: Any) -> Usage:
    """OpenAI usage, or DeepSeek's (prompt_cache_hit_tokens), or OpenRouter's write count."""
    if not isinstance(u, dict):
        return Usage()
    details = u.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached = details.get("cached_tokens") or u.get("prompt_cache_hit_tokens") or 0
    return Usage(
        input_tokens=int(u.get("prompt_tokens") or 0),
        output_tokens=int(u.get("completion_tokens") or 0),
        cache_read_tokens=int(cached),
        cache_write_tokens=int(details.get("cache_write_tokens") or 0),
    )


def parse_response(body: dict[str, Any]) -> ChatResponse:
    """An upstream chat.completion object as a neutral response."""
    if isinstance(body.get("error"), dict):
        raise UpstreamStreamError(str(body["error"].get("message", "upstream error")))
    choices = body.get("choices") or []
    if not choices:
        raise ValueError("chat completion without choices")
    choice = choices[0]
    msg = choice.get("message") or {}
    content: list[Part] = []
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        content.append(ThinkingPart(reasoning))
    text = msg.get("content")
    if isinstance(text, str) and text:
        content.append(TextPart(text))
    elif isinstance(msg.get("refusal"), str):
        content.append(TextPart(msg["refusal"]))
    calls = [
        ToolCall(
            id=c.get("id") or f"call_{i}",
            name=(c.get("function") or {}).get("name") or "",
            arguments=(c.get("function") or {}).get("arguments") or "",
        )
        for i, c in enumerate(msg.get("tool_calls") or [])
    ]
    finish = FINISH_IN.get(choice.get("finish_reason") or "stop", "stop")
    if calls and finish == "stop":
        finish = "tool_calls"  # some compatible servers say "stop" after tool calls
    return ChatResponse(
        id=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        content=content,
        tool_calls=calls,
        finish_reason=finish,
        usage=parse_usage(body.get("usage")),
        created=int(body.get("created") or 0),
    )


# ---- client response ----------------------------------------------------------


def render_usage(u: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def render_response(resp: ChatResponse, model: str) -> dict[str, Any]:
    """The exact chat.completion object a client expects."""
    text = resp.text()
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text if text or not resp.tool_calls else None,
        "refusal": None,
        "annotations": [],
    }
    reasoning = "".join(
        p.text for p in resp.content if isinstance(p, ThinkingPart) and not p.redacted
    )
    if reasoning:
        message["reasoning_content"] = reasoning  # the DeepSeek convention clients know
    if resp.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in resp.tool_calls
        ]
    return {
        "id": resp.id or new_completion_id(),
        "object": "chat.completion",
        "created": resp.created or int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": FINISH_OUT.get(resp.finish_reason, "stop"),
            }
        ],
        "usage": render_usage(resp.usage),
        "system_fingerprint": None,
    }


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"
