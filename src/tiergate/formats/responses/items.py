"""Pieces of a Response object that the whole reply and the stream both build:
ids, output items, usage, the reasoning token and the response envelope."""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from typing import Any

import orjson

from tiergate.core.model import ChatRequest, FinishReason, ThinkingPart, Usage
from tiergate.formats.responses.tools import ToolKind

#: Prefix of the `encrypted_content` tiergate mints for a reasoning item. It is
#: not encrypted: base64url JSON of the reasoning text and the provider's
#: signature, so a client that sends the item back (Codex keeps only this field)
#: gives the upstream its own thinking back. OpenAI's real encrypted content can
#: only be read by OpenAI's Responses API, which tiergate does not call: dropped.
REASONING_TOKEN_PREFIX = "tgr1."

ITEM_PREFIX: dict[ToolKind, str] = {"function": "fc", "custom": "ctc", "local_shell": "lsh"}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


def encode_reasoning(text: str, signature: str | None) -> str:
    raw = orjson.dumps({"text": text, "signature": signature})
    return REASONING_TOKEN_PREFIX + base64.urlsafe_b64encode(raw).decode()


def decode_reasoning(token: str) -> ThinkingPart | None:
    """The thinking a tiergate-minted token carries; None for any other content."""
    if not token.startswith(REASONING_TOKEN_PREFIX):
        return None
    try:
        value = orjson.loads(base64.urlsafe_b64decode(token[len(REASONING_TOKEN_PREFIX) :]))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        return None
    signature = value.get("signature")
    return ThinkingPart(value["text"], signature if isinstance(signature, str) else None)


def message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [output_text(text)] if status == "completed" else [],
    }


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def reasoning_item(item_id: str, text: str, signature: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": []}
    if text:
        item["content"] = [{"type": "reasoning_text", "text": text}]
    if text or signature:
        item["encrypted_content"] = encode_reasoning(text, signature)
    return item


def render_usage(u: Usage) -> dict[str, Any]:
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {
            "cached_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
        },
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.input_tokens + u.output_tokens,
    }


def final_status(finish: FinishReason) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
    """(status, incomplete_details, error) of a finished generation."""
    if finish == "length":
        return "incomplete", {"reason": "max_output_tokens"}, None
    if finish == "content_filter":
        return "incomplete", {"reason": "content_filter"}, None
    if finish == "error":
        error = {"code": "server_error", "message": "The provider cut the generation short"}
        return "failed", None, error
    return "completed", None, None


def envelope(
    response_id: str,
    created_at: int,
    req: ChatRequest,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None,
    *,
    incomplete: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Response object: what was asked (echoed as served) and what came back."""
    echo: dict[str, Any] = req.extra.get("echo", {})
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": echo.get("instructions"),
        "max_output_tokens": req.max_tokens,
        "max_tool_calls": None,
        "model": req.model,
        "output": output,
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "previous_response_id": None,
        "prompt_cache_key": req.prompt_cache_key,
        "reasoning": echo.get("reasoning") or {"effort": None, "summary": None},
        "safety_identifier": None,
        "service_tier": "default",
        "store": False,  # tiergate keeps no responses (docs/conversion.md)
        "temperature": req.temperature if req.temperature is not None else 1.0,
        "text": echo.get("text") or {"format": {"type": "text"}},
        "tool_choice": echo.get("tool_choice") or "auto",
        "tools": echo.get("tools", []),
        "top_logprobs": 0,
        "top_p": req.top_p if req.top_p is not None else 1.0,
        "truncation": "disabled",
        "usage": render_usage(usage) if usage is not None else None,
        "user": req.user,
        "metadata": req.metadata,
    }


def now() -> int:
    return int(time.time())
