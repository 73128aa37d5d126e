"""Error envelopes look like the providers' own, as their SDKs parse them."""

from __future__ import annotations

import pytest
from anthropic.types import ErrorResponse
from openai.types import ErrorObject

from tiergate.formats.errors import FormatError, anthropic_error_body, openai_error_body


@pytest.mark.parametrize(
    ("status", "type_", "code"),
    [
        (400, "invalid_request_error", None),
        (401, "invalid_request_error", "invalid_api_key"),
        (404, "invalid_request_error", None),
        (429, "requests", "rate_limit_exceeded"),
        (500, "server_error", None),
        (503, "server_error", None),
    ],
)
def test_openai_error_types_follow_openai(status: int, type_: str, code: str | None) -> None:
    body = openai_error_body(status, "nope")
    assert set(body) == {"error"}
    err = ErrorObject.model_validate(body["error"])
    assert (err.type, err.code, err.message, err.param) == (type_, code, "nope", None)


def test_openai_explicit_type_code_and_param_win() -> None:
    body = openai_error_body(
        400, "bad", "invalid_request_error", "invalid_value", param="messages[1]"
    )
    assert body["error"] == {
        "message": "bad",
        "type": "invalid_request_error",
        "param": "messages[1]",
        "code": "invalid_value",
    }


@pytest.mark.parametrize(
    ("status", "type_"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (402, "billing_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (409, "invalid_request_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
    ],
)
def test_anthropic_error_types_follow_anthropic(status: int, type_: str) -> None:
    body = anthropic_error_body(status, "nope", request_id="req_1")
    assert body["type"] == "error" and body["error"] == {"type": type_, "message": "nope"}
    if type_ != "request_too_large":  # not in the SDK's union: Cloudflare answers it
        parsed = ErrorResponse.model_validate(body)
        assert parsed.error.type == type_ and parsed.request_id == "req_1"


def test_format_error_carries_the_param() -> None:
    err = FormatError("expected a string", "messages[0].content")
    assert err.message == "expected a string" and err.param == "messages[0].content"
    assert "messages[0].content" in str(err)
