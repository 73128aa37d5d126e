"""The inbound wire formats as one interface the pipeline can call.

OpenAI chat completions, OpenAI responses and Anthropic messages differ in
parsing, rendering, stream framing and error shape; everything else in the
pipeline is shared. Rendering gets the parsed request: a Response object echoes
it, and a Responses reply renders each tool call in the kind of tool it called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.requests import Request

import tiergate.formats.anthropic as anthropic_fmt
import tiergate.formats.openai as openai_fmt
import tiergate.formats.responses as responses_fmt
from tiergate.core.model import ChatRequest, ChatResponse, StreamEvent
from tiergate.formats.errors import anthropic_error_body, openai_error_body
from tiergate.formats.message_memo import MessageMemo, Reuse
from tiergate.formats.sse import encode_sse

#: parse_request with a message memo, the body's size and the memo's match (or None)
ReusingParser = Callable[[dict[str, Any], MessageMemo, int, Reuse | None], ChatRequest]


class Renderer(Protocol):
    def render(self, event: StreamEvent) -> bytes: ...


@dataclass(frozen=True)
class InboundFormat:
    name: str
    parse_request: Callable[[dict[str, Any]], ChatRequest]
    render_response: Callable[[ChatResponse, ChatRequest], dict[str, Any]]
    renderer: Callable[[ChatRequest], Renderer]
    error_body: Callable[[int, str, str | None], dict[str, Any]]
    #: an error after the stream opened, given the stream's renderer
    stream_error: Callable[[Renderer, int, str], bytes]
    # what the format reads from the request beyond its body (headers, query)
    read_transport: Callable[[ChatRequest, Request], None] | None = None
    #: the id a client sees for an upstream tool call (Anthropic: `toolu_...`)
    tool_id: Callable[[str], str] = str
    #: parse_request reusing the conversation's previous parse (formats/message_memo.py),
    #: and the memo slot namespace it stores under; None: this format always parses whole
    parse_reusing: ReusingParser | None = None
    memo_key: str | None = None
    #: the body field holding the list the memo matches (Responses: its input items)
    memo_field: str = "messages"


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
    parse_reusing=openai_fmt.parse_request,
    memo_key=openai_fmt.MEMO_FORMAT,
    render_response=lambda resp, req: openai_fmt.render_response(resp, req.model),
    renderer=lambda req: openai_fmt.StreamRenderer(req.model, req.include_usage),
    error_body=_openai_error,
    stream_error=lambda _, status, msg: encode_sse(orjson.dumps(openai_error_body(status, msg))),
)


def _anthropic_transport(req: ChatRequest, request: Request) -> None:
    """`anthropic-beta` headers and the SDK's `?beta=true`, for Anthropic upstreams."""
    req.betas = anthropic_fmt.parse_betas(request.headers.getlist("anthropic-beta"))
    req.beta_query = bool(request.scope.get("query_string")) and (
        request.query_params.get("beta") == "true"
    )


ANTHROPIC = InboundFormat(
    name="anthropic",
    parse_request=anthropic_fmt.parse_request,
    parse_reusing=anthropic_fmt.parse_request,
    memo_key=anthropic_fmt.MEMO_FORMAT,
    render_response=lambda resp, req: anthropic_fmt.render_response(resp, req.model),
    renderer=lambda req: anthropic_fmt.StreamRenderer(req.model),
    error_body=_anthropic_error,
    stream_error=lambda _, status, msg: encode_sse(
        orjson.dumps(anthropic_error_body(status, msg)), event="error"
    ),
    read_transport=_anthropic_transport,
    tool_id=anthropic_fmt.tool_use_id,
)


def _responses_stream_error(renderer: Renderer, status: int, message: str) -> bytes:
    assert isinstance(renderer, responses_fmt.StreamRenderer)
    return renderer.fail(status, message)


# Non-streamed errors are OpenAI error JSON, as OpenAI answers on /v1/responses.
RESPONSES = InboundFormat(
    name="responses",
    parse_request=responses_fmt.parse_request,
    parse_reusing=responses_fmt.parse_request,
    memo_key=responses_fmt.MEMO_FORMAT,
    memo_field="input",
    render_response=responses_fmt.render_response,
    renderer=responses_fmt.StreamRenderer,
    error_body=_openai_error,
    stream_error=_responses_stream_error,
)
