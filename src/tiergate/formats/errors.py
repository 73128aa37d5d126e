"""Error shapes of the two client dialects, and the codecs' own exceptions.

Clients are written against the real providers, so an error from the gateway
must look like one from OpenAI or Anthropic: same envelope, same `type`
vocabulary for the same HTTP status. The SDKs pick their exception class from
the status code and surface `type`/`code` to callers that branch on them.
"""

from __future__ import annotations

from typing import Any


class FormatError(Exception):
    """A client request that does not fit its wire format (the gateway answers 400).

    `param` is the path of the offending field, e.g. `messages[2].content[0].type`,
    which OpenAI reports as `error.param` and which makes the message actionable.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param

    def __str__(self) -> str:
        return f"{self.message} (param: {self.param})" if self.param else self.message


class UpstreamStreamError(Exception):
    """The upstream reported an error inside an already-open (HTTP 200) stream.

    Anthropic sends `event: error` (e.g. `overloaded_error` mid-stream); OpenAI-
    compatible servers and Gemini send a `data:` payload with an `error` object.
    """

    def __init__(self, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type


# OpenAI puts every client-side 4xx under invalid_request_error and tells them
# apart by `code` (401 -> invalid_api_key, 404 -> model_not_found, ...); rate
# limits carry the limited resource ("requests"/"tokens") as the type and
# `rate_limit_exceeded` as the code; every 5xx is a server_error.
_OPENAI_DEFAULT_CODE = {401: "invalid_api_key", 429: "rate_limit_exceeded"}

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def openai_error_type(status: int) -> str:
    if status == 429:
        return "requests"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def anthropic_error_type(status: int) -> str:
    known = _ANTHROPIC_TYPES.get(status)
    if known is not None:
        return known
    # Anthropic documents invalid_request_error for "other 4XX status codes".
    return "api_error" if status >= 500 else "invalid_request_error"


def openai_error_body(
    status: int,
    message: str,
    type: str | None = None,  # the wire field is called "type"
    code: str | None = None,
    *,
    param: str | None = None,
) -> dict[str, Any]:
    """`{"error": {"message", "type", "param", "code"}}` exactly as OpenAI sends it."""
    return {
        "error": {
            "message": message,
            "type": type or openai_error_type(status),
            "param": param,
            "code": code if code is not None else _OPENAI_DEFAULT_CODE.get(status),
        }
    }


def anthropic_error_body(
    status: int,
    message: str,
    type: str | None = None,  # the wire field is called "type"
    *,
    request_id: str | None = None,
) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}}`, plus `request_id` when known."""
    body: dict[str, Any] = {
        "type": "error",
        "error": {"type": type or anthropic_error_type(status), "message": message},
    }
    if request_id is not None:
        body["request_id"] = request_id
    return body
