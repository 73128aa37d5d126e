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
from tiergate.core.model import ChatRequest
from tiergate.core.tokens import count_tokens
from tiergate.formats.errors import FormatError
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.inbound import ANTHROPIC
from tiergate.gateway.pipeline import Gateway
from tiergate.gateway.prompt_parts import fixed_tokens, prompt_texts


def prompt_tokens(req: ChatRequest) -> int:
    """Estimated input tokens: every prompt text tokenized, plus the fixed costs
    of messages and images (gateway/prompt_parts.py)."""
    return sum(count_tokens(t) for t in prompt_texts(req)) + fixed_tokens(req)


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
