"""One provider request, whatever its format: authenticate, parse, apply an
armed fault, decide cache usage and the reply, bill it, and send it.

The order mirrors a real provider: a missing key, an invalid body or a prompt
over the model's context window (context.py) fails before anything is cached
or billed; an injected status or timeout fails
before the prompt is processed; once the prompt is processed the cache is
updated and the usage billed, even if the reply is then cut short.
"""

from __future__ import annotations

import asyncio

import orjson
from starlette.requests import Request
from starlette.responses import Response

from tiergate.sim.cache import CacheOutcome, automatic_rule
from tiergate.sim.context import context_error
from tiergate.sim.faults import FaultRule
from tiergate.sim.prompt import PromptIndex, SimCall, SimRequestError, index_prompt
from tiergate.sim.responder import plan_reply
from tiergate.sim.responses import EventStreamResponse, TruncatedResponse, wait_for_disconnect
from tiergate.sim.script import scripted_reply
from tiergate.sim.state import SimState
from tiergate.sim.wire import ReplyContext, SimUsage, Wire

JSON = "application/json"
MISSING_KEY = {
    "openai": "You didn't provide an API key. You need to provide your API key in an "
    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
    "anthropic": "x-api-key header is required",
    "gemini": "Method doesn't allow unregistered callers (callers without established "
    "identity). Please use API Key or other form of API consumer identity to call this API.",
}
FAULT_MESSAGES = {
    429: "Rate limit reached (simulated). Please try again later.",
    500: "The server had an error while processing your request (simulated).",
    503: "The service is temporarily unavailable (simulated).",
    529: "Overloaded (simulated)",
}


def error_response(
    wire: Wire,
    status: int,
    message: str,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(wire.error(status, message, code), status, headers, media_type=JSON)


async def read_call(
    wire: Wire, request: Request, path_model: str | None = None
) -> tuple[str, SimCall] | Response:
    """The caller's key and parsed request, or the error response to send instead."""
    api_key = wire.api_key(request)
    if not api_key:
        return error_response(wire, 401, MISSING_KEY[wire.name])
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return error_response(wire, 400, "We could not parse the JSON body of your request.")
    try:
        return api_key, wire.parse(body, request, path_model)
    except SimRequestError as exc:
        return error_response(wire, exc.status, exc.message, exc.code)


def cache_usage(state: SimState, api_key: str, call: SimCall, prompt: PromptIndex) -> CacheOutcome:
    identity = (call.provider, api_key, call.model)
    now = state.clock.now()
    if call.provider == "anthropic":
        return state.cache.breakpoints(identity, call.blocks, prompt, now)
    rule = automatic_rule(call.provider, state.settings)
    return state.cache.automatic(identity, prompt, rule, now, call.cache_ttl_seconds)


async def serve(
    state: SimState,
    wire: Wire,
    request: Request,
    path_model: str | None = None,
    stream: bool | None = None,
) -> Response:
    parsed = await read_call(wire, request, path_model)
    if isinstance(parsed, Response):
        return parsed
    api_key, call = parsed
    if stream is not None:
        call.stream = stream
    settings = state.settings

    fault = state.faults.take(call.provider, api_key, call.model)
    if fault is not None:
        state.stats.record_fault(call.provider, api_key, call.model)
        if fault.kind == "status" or (fault.kind == "stream_error" and not call.stream):
            return _status_fault(wire, fault)
        if fault.kind == "timeout" and await wait_for_disconnect(
            request.receive, settings.timeout_fault_seconds
        ):
            return Response(b"", 499)  # nobody is listening any more

    prompt = index_prompt(call.blocks, call.model)
    too_long = context_error(call, prompt.total)
    if too_long is not None:  # refused before processing: nothing cached or billed
        return error_response(wire, 400, *too_long)
    outcome = cache_usage(state, api_key, call, prompt)
    scripted = scripted_reply(call, state.script, prompt.digest) if state.script else None
    reply = scripted or plan_reply(call, prompt.digest, settings.default_output_tokens)
    usage = SimUsage(
        prompt_tokens=prompt.total,
        cache_read=outcome.read,
        cache_write=outcome.write,
        cache_write_1h=outcome.write_1h,
        output_tokens=reply.output_tokens,
        reasoning_tokens=reply.thinking_tokens,
    )
    state.stats.record(
        call.provider,
        api_key,
        call.model,
        prompt_tokens=usage.prompt_tokens,
        cache_read=usage.cache_read,
        cache_write=usage.cache_write,
        cache_write_1h=usage.cache_write_1h,
        output_tokens=usage.output_tokens,
    )
    ctx = ReplyContext(request_id=state.next_id(), created=int(state.clock.now()))
    headers = {"x-request-id": ctx.request_id}
    if settings.latency_ms > 0:
        await asyncio.sleep(settings.latency_ms / 1000)
    kind = fault.kind if fault is not None else None

    if call.stream:
        cut_after: int | None = None
        tail: list[bytes] | None = None
        if fault is not None and fault.kind in ("disconnect", "stream_error"):
            cut_after = fault.after_chunks
            if fault.kind == "stream_error":
                tail = wire.stream_error(call, fault.status, _fault_message(fault))
        return EventStreamResponse(
            wire.stream(call, reply, usage, ctx, settings.stream_chunk_tokens),
            media_type=wire.stream_media_type(call),
            tokens_per_second=settings.tokens_per_second,
            cut_after=cut_after,
            tail=tail,
            broken=wire.broken_event() if kind == "malformed" else None,
            headers=headers,
        )
    body = wire.render(call, reply, usage, ctx)
    if settings.tokens_per_second > 0:
        await asyncio.sleep(reply.output_tokens / settings.tokens_per_second)
    if kind == "malformed":
        return Response(body[: len(body) // 2] + b"<!-- upstream error -->", 200, headers, JSON)
    if kind == "disconnect":
        return TruncatedResponse(body, media_type=JSON, headers=headers)
    return Response(body, 200, headers, media_type=JSON)


def _status_fault(wire: Wire, fault: FaultRule) -> Response:
    headers = {}
    if fault.retry_after is not None:
        headers["retry-after"] = f"{fault.retry_after:g}"
    return error_response(wire, fault.status, _fault_message(fault), headers=headers)


def _fault_message(fault: FaultRule) -> str:
    return fault.message or FAULT_MESSAGES.get(
        fault.status, f"Simulated upstream error {fault.status}."
    )
