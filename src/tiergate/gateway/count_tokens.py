"""`POST /v1/messages/count_tokens`: a Messages body's prompt size, counted locally.

Counted with tiergate's own tokenizer (core.tokens), not forwarded upstream:
the model a client names is usually a router (`orcarouter/coding`) whose
concrete model, and so provider and tokenizer, is only chosen when a turn is
sent; an upstream count would be exact for one provider and wrong for the
others, would need a key and a round trip, and would fail when that provider
is down. Claude Code uses the answer to budget its context, where an estimate
close to real counts serves. The estimate is the same one the gateway prices
and scores with, so it agrees with the gateway's own view of the prompt.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

import tiergate.formats.anthropic as anthropic_fmt
from tiergate.core.model import ChatRequest, ImagePart, RawBlock, TextPart
from tiergate.core.tokens import count_tokens
from tiergate.formats import dumps
from tiergate.formats.errors import FormatError
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.inbound import ANTHROPIC
from tiergate.gateway.pipeline import Gateway

IMAGE_TOKENS = 1600  # Anthropic's figure for an image near its 1.15 megapixel cap
MESSAGE_OVERHEAD = 4  # role markers and separators around each message


def prompt_tokens(req: ChatRequest) -> int:
    """Estimated input tokens: system, messages, tool calls and results, tool schemas.

    Thinking from earlier turns is not counted: Anthropic strips it from the
    context. Blocks kept verbatim count as their JSON text.
    """
    total = sum(count_tokens(p.text) for p in req.system)
    for m in req.messages:
        total += MESSAGE_OVERHEAD
        for part in m.content:
            if isinstance(part, TextPart):
                total += count_tokens(part.text)
            elif isinstance(part, ImagePart):
                total += IMAGE_TOKENS
            elif isinstance(part, RawBlock):
                total += count_tokens(dumps(part.block))
        for call in m.tool_calls:
            total += count_tokens(call.name) + count_tokens(call.arguments)
    for tool in req.tools:
        if tool.native is not None:
            total += count_tokens(dumps(tool.native))
        else:
            total += count_tokens(tool.name) + count_tokens(tool.description)
            total += count_tokens(dumps(tool.parameters))
    return total


async def count_tokens_endpoint(gateway: Gateway, request: Request) -> Response:
    """Authenticate, parse as the Messages endpoint does, answer `{"input_tokens": N}`."""
    try:
        gateway.authenticate(request)
        body = await gateway.read_json(request)
        try:
            req = anthropic_fmt.parse_count_request(body)
        except FormatError as err:
            raise GatewayError(400, err.message, "invalid_request") from None
    except GatewayError as err:
        return gateway.error_response(ANTHROPIC, err, dict(err.headers or {}))
    payload = orjson.dumps({"input_tokens": prompt_tokens(req)})
    return Response(payload, media_type="application/json")
