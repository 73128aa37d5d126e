"""The two inbound wire formats as one interface the pipeline can call.

OpenAI chat completions and Anthropic messages differ in parsing, rendering,
stream framing and error shape; everything else in the pipeline is shared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

import tiergate.formats.anthropic as anthropic_fmt
import tiergate.formats.openai as openai_fmt
from tiergate.core.model import ChatRequest, ChatResponse, StreamEvent
from tiergate.formats.errors import anthropic_error_body, openai_error_body
from tiergate.formats.sse import encode_sse


class Renderer(Protocol):
    def render(self, event: StreamEvent) -> bytes: ...


@dataclass(frozen=True)
class InboundFormat:
    name: str
    parse_request: Callable[[dict[str, Any]], ChatRequest]
    render_response: Callable[[ChatResponse, str], dict[str, Any]]
    renderer: Callable[[str, bool], Renderer]
    error_body: Callable[[int, str, str | None], dict[str, Any]]
    stream_error: Callable[[int, str], bytes]
    #: the id a client sees for an upstream tool call (Anthropic: `toolu_...`)
    tool_id: Callable[[str], str] = str


def _openai_error(status: int, message: str, code: str | None) -> dict[str, Any]:
    return openai_error_body(status, message, code=code)


def _anthropic_error(status: int, message: str, code: str | None) -> dict[str, Any]:
    body = anthropic_error_body(status, message)
    if code:
        body["error"]["code"] = code
    return body


OPENAI = InboundFormat(
    name="openai",
    parse_request=openai_fmt.parse_request,
    render_response=openai_fmt.render_response,
    renderer=lambda model, include_usage: openai_fmt.StreamRenderer(model, include_usage),
    error_body=_openai_error,
    stream_error=lambda status, msg: encode_sse(orjson.dumps(openai_error_body(status, msg))),
)

ANTHROPIC = InboundFormat(
    name="anthropic",
    parse_request=anthropic_fmt.parse_request,
    render_response=anthropic_fmt.render_response,
    renderer=lambda model, include_usage: anthropic_fmt.StreamRenderer(model),
    error_body=_anthropic_error,
    stream_error=lambda status, msg: encode_sse(
        orjson.dumps(anthropic_error_body(status, msg)), event="error"
    ),
    tool_id=anthropic_fmt.tool_use_id,
)
