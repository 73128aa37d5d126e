"""Pure wire-format codecs between the neutral model and the provider dialects.

- `openai`    chat completions: inbound (clients) and upstream (OpenAI, DeepSeek,
              any OpenAI-compatible server); `request`, `response`, `stream`
- `anthropic` messages: inbound and upstream; `request`, `response`, `stream`
- `gemini`    generateContent / streamGenerateContent: upstream only
- `sse`       server-sent events framing; `errors` the error envelopes

Each dialect exposes the same functions: parse_request / render_request,
parse_response / render_response, StreamParser (upstream SSE payloads ->
neutral events, `finish()` at end of body) and StreamRenderer (neutral events
-> client SSE bytes).

No I/O here: every function maps dicts to dataclasses and back, so it can be
tested exhaustively and called on the hot path. docs/conversion.md lists what
converts and what is dropped on purpose.

Neutral conventions the codecs share (the model's types leave these open):
- `ChatRequest.tool_choice` is None, "auto", "none", "required", or
  `{"type": "tool", "name": <function name>}`.
- `ThinkingPart.signature` is the provider's opaque token. Anthropic signatures
  are stored as sent; Gemini thought signatures carry GEMINI_SIGNATURE_PREFIX
  so each upstream only ever receives its own signatures back (a foreign one is
  a hard 400 at both providers).
- `ToolCall.arguments` is the JSON text verbatim; formats that need an object
  parse it with `arguments_object`.
"""

from __future__ import annotations

from typing import Any

import orjson

from tiergate.formats.errors import FormatError

GEMINI_SIGNATURE_PREFIX = "gemini:"

# Anthropic rejects tool_use ids outside [a-zA-Z0-9_-]; these are the bytes allowed.
_ID_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def dumps(obj: Any) -> str:
    """Compact JSON text (what providers send as tool arguments)."""
    return orjson.dumps(obj).decode()


def arguments_object(arguments: str) -> dict[str, Any]:
    """Tool-call arguments as an object, for formats that carry objects, not text.

    Models occasionally emit truncated or non-object JSON (e.g. when cut off by
    max_tokens); such arguments become `{}` rather than failing the request.
    """
    if not arguments:
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def safe_tool_id(tool_id: str) -> str:
    """A tool-call id Anthropic accepts, derived deterministically from any id."""
    raw = tool_id.encode()
    if raw and all(b in _ID_SAFE for b in raw):
        return tool_id
    cleaned = bytes(b if b in _ID_SAFE else 0x5F for b in raw).decode()
    return cleaned or "toolu_empty"


def is_gemini_signature(signature: str | None) -> bool:
    return signature is not None and signature.startswith(GEMINI_SIGNATURE_PREFIX)


# ---- request validation: garbage in becomes a FormatError naming the field ----


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def expect_dict(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FormatError(f"expected an object, got {_kind(value)}", param)
    return value


def expect_list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise FormatError(f"expected an array, got {_kind(value)}", param)
    return value


def expect_str(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise FormatError(f"expected a string, got {_kind(value)}", param)
    return value


def opt_str(value: Any, param: str) -> str | None:
    return None if value is None else expect_str(value, param)


def opt_dict(value: Any, param: str) -> dict[str, Any] | None:
    return None if value is None else expect_dict(value, param)


def opt_bool(value: Any, param: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise FormatError(f"expected a boolean, got {_kind(value)}", param)


#: The largest integer a request field may carry. Providers take 32-bit counts,
#: and a JSON number past 2**64 (or 1e30) would otherwise reach the encoder,
#: which cannot write it (a 500 instead of the client's 400).
INT_CEILING = 2**31 - 1


def opt_int(
    value: Any, param: str, minimum: int | None = None, maximum: int = INT_CEILING
) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        if abs(value) > maximum:
            raise FormatError(f"must be at most {maximum}", param)
        value = int(value)  # JSON has one number type: 512.0 is the integer 512
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"expected an integer, got {_kind(value)}", param)
    if minimum is not None and value < minimum:
        raise FormatError(f"must be at least {minimum}", param)
    if value > maximum:
        raise FormatError(f"must be at most {maximum}", param)
    return value


def opt_number(value: Any, param: str, low: float, high: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatError(f"expected a number, got {_kind(value)}", param)
    if not low <= value <= high:
        raise FormatError(f"must be between {low:g} and {high:g}", param)
    return float(value)
