"""`POST /v1/embeddings` (OpenAI format), passed through to a channel that offers it.

No routing decision: embeddings are not a conversation turn, so there is no
session, tier or escalation. The model must be a concrete exposed model (a
router name is refused); its channels are tried in the distributor's order,
as for a chat turn, but only channels of the types that speak the OpenAI
embeddings API. The body is forwarded as the client sent it, with the
channel's upstream model name; the reply comes back as the provider sent it,
with the client's model name. Errors are OpenAI error JSON, and a usage row
(input tokens and cost, no text) is recorded like a chat request's.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from tiergate import metrics
from tiergate.billing import request_cost, uncached_cost
from tiergate.core.model import Usage
from tiergate.core.tokens import count_tokens
from tiergate.core.upstream import Target
from tiergate.gateway import dispatch, failures
from tiergate.gateway.auth import Workspace
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.inbound import OPENAI
from tiergate.gateway.pipeline import Gateway
from tiergate.gateway.usage import UsageRecord
from tiergate.providers.adapters import OpenAIProvider
from tiergate.providers.base import UpstreamError

EMBEDDING_CHANNEL_TYPES = frozenset({"openai", "openai_compatible"})  # DeepSeek has none


def input_tokens(value: Any) -> int:
    """The input's size in tokens for the budget hold: a string is counted, a token
    array is its length, a list adds up its items."""
    if isinstance(value, str):
        return count_tokens(value)
    if isinstance(value, list):
        return sum(1 if isinstance(v, int) else input_tokens(v) for v in value)
    return 0


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise GatewayError(400, "model is required", "invalid_request")
    if body.get("input") is None:
        raise GatewayError(400, "input is required", "invalid_request")
    return model


async def embeddings_endpoint(gateway: Gateway, request: Request) -> Response:
    started = time.perf_counter()
    request_id = uuid.uuid4().hex
    headers = {"x-orca-request-id": request_id}
    workspace: Workspace | None = None
    try:
        workspace = gateway.authenticate(request)
        await gateway.admit(workspace)  # the workspace's and its virtual key's limits
        body = await gateway.read_json(request)
        model = _model(body)
        distributor = gateway.distributor
        if not any(ch.config.type in EMBEDDING_CHANNEL_TYPES for ch in distributor.serving(model)):
            raise GatewayError(
                404,
                f"The model {model!r} is not served by a channel that offers embeddings",
                "model_not_found",
            )
        hold = await gateway.reserve(workspace, None, [model], input_tokens(body["input"]))
    except GatewayError as err:
        if workspace is not None:  # after authentication: a usage row, as for a chat turn
            failures.record_failure(
                gateway.recorder,
                request_id=request_id,
                workspace=workspace.name,
                plan=None,
                status=err.status,
                stream=False,
                started=started,
                error_type=err.code or "refused",
                virtual_key=workspace.key_id,
                path=request.scope.get("path"),
            )
        headers.update(err.headers or {})
        return gateway.error_response(OPENAI, err, headers)

    async def attempt(target: Target) -> dict[str, Any]:
        provider = gateway.providers[target.channel.config.type]
        assert isinstance(provider, OpenAIProvider)
        return await provider.embed(body, target)

    targets = (
        t for t in distributor.attempts([model]) if t.channel.config.type in EMBEDDING_CHANNEL_TYPES
    )
    try:
        reply, served = await dispatch.first_success(targets, distributor, gateway.retry, attempt)
    except (UpstreamError, dispatch.NoUpstream) as err:
        gateway.settle(hold, 0.0)  # released: nothing was billed
        return _failed(gateway, workspace, model, err, request_id, started, headers)
    except BaseException:  # cancelled (the client went away) or a bug: nothing billed
        gateway.settle(hold, 0.0)
        raise
    reply["model"] = model
    target = served.target
    usage = reply.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    neutral = Usage(input_tokens=tokens if isinstance(tokens, int) else 0)
    cost = request_cost(neutral, target.model_config, target.channel.config.type)
    gateway.settle(hold, cost)
    latency = time.perf_counter() - started
    metrics.observe_request(None, model, target.channel.name, 200, latency)
    record = UsageRecord(
        request_id=request_id,
        ts=time.time(),
        workspace=workspace.name,
        virtual_key=workspace.key_id,
        router=None,
        model=model,
        channel=target.channel.name,
        key_index=target.key_index,
        input_tokens=neutral.input_tokens,
        cost_usd=cost,
        uncached_cost_usd=uncached_cost(neutral, target.model_config),
        latency_ms=latency * 1000,
        attempts=served.attempts,
    )
    gateway.recorder.record("usage", record.row())
    headers["x-orca-resolved-model"] = model
    return Response(orjson.dumps(reply), 200, headers, media_type="application/json")


def _failed(
    gateway: Gateway,
    workspace: Workspace,
    model: str,
    err: Exception,
    request_id: str,
    started: float,
    headers: dict[str, str],
) -> Response:
    """The same refusal as a chat request (gateway/failures.py): a generic message in
    the client's format, the provider's text only in the log."""
    refusal = failures.upstream_refusal(err, gateway.cfg, gateway.distributor, [model])
    status = refusal.status
    kind = err.kind if isinstance(err, UpstreamError) else (refusal.code or "no_upstream")
    headers.update(refusal.headers or {})
    latency = time.perf_counter() - started
    metrics.observe_request(None, model, None, status, latency)
    failed = UsageRecord(
        request_id=request_id,
        ts=time.time(),
        workspace=workspace.name,
        virtual_key=workspace.key_id,
        router=None,
        model=model,
        status=status,
        latency_ms=latency * 1000,
        error_type=kind,
    )
    gateway.recorder.record("usage", failed.row())
    return gateway.error_response(OPENAI, refusal, headers)
