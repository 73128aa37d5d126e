"""Send one request upstream: attempts in distributor order, bounded retries.

A failed attempt is retried on another key or channel while the attempt count
and the retry time budget allow, and only before anything reached the client:
for streams the first upstream event is awaited before the response starts,
so a failure up to that point is still retryable. Health feedback (cooldowns,
key disabling) is reported to the distributor for every attempt; the same answer
given to this body on several keys is counted once (`_report_answers`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from tiergate import tracing
from tiergate.core.model import ChatRequest, ChatResponse, StreamEvent
from tiergate.core.upstream import Target
from tiergate.providers.base import Provider, UpstreamError
from tiergate.routing.affinity import ChannelPin
from tiergate.routing.distributor import Distributor

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

R = TypeVar("R")


@dataclass
class Served:
    """The attempt that succeeded and how many attempts it took."""

    target: Target
    attempts: int
    fallback: bool  # served by something other than the first choice


class NoUpstream(Exception):
    """Nothing could be attempted: every channel for every candidate is down."""


@dataclass
class RetryPolicy:
    max_attempts: int = 3
    budget_seconds: float = 30.0


async def first_success(
    targets: Iterable[Target],
    distributor: Distributor,
    policy: RetryPolicy,
    attempt: Callable[[Target], Awaitable[R]],
) -> tuple[R, Served]:
    """Run `attempt` on each target (in distributor order) until one succeeds, within
    the retry policy; report every outcome to the distributor's health."""
    start = time.monotonic()
    last: UpstreamError | None = None
    answers: dict[tuple[str, int], list[tuple[Target, UpstreamError]]] = {}
    n = 0
    try:
        for target in targets:
            n += 1
            try:
                if tracing.tracer is None:
                    result = await attempt(target)
                else:
                    result = await _traced(tracing.tracer, attempt, target, n)
            except UpstreamError as err:
                last = err
                err.attempts, err.channel, err.key_index = n, target.channel.name, target.key_index
                if _answers_the_body(err):
                    answers.setdefault((err.kind, err.status), []).append((target, err))
                else:
                    _report(distributor, target, err)
                if not _may_retry(err, n, start, policy):
                    break
                continue
            distributor.report_success(target)
            return result, Served(target, n, fallback=n > 1)
    finally:
        _report_answers(distributor, answers)
    if last is None:
        raise NoUpstream()
    raise last


async def complete(
    req: ChatRequest,
    models: list[str],
    pin: ChannelPin | None,
    distributor: Distributor,
    providers: dict[str, Provider],
    policy: RetryPolicy,
) -> tuple[ChatResponse, Served]:
    """Non-streaming: the first successful attempt, or the last error."""

    async def attempt(target: Target) -> ChatResponse:
        return await providers[target.channel.config.type].complete(req, target)

    return await first_success(distributor.attempts(models, pin), distributor, policy, attempt)


async def open_stream(
    req: ChatRequest,
    models: list[str],
    pin: ChannelPin | None,
    distributor: Distributor,
    providers: dict[str, Provider],
    policy: RetryPolicy,
) -> tuple[StreamEvent, AsyncIterator[StreamEvent], Served]:
    """Streaming: retry until an attempt produced its first event.

    Returns that first event, the live iterator for the rest, and the target.
    After this point the caller owns the stream and no retry happens.
    """

    async def attempt(target: Target) -> tuple[StreamEvent, AsyncIterator[StreamEvent]]:
        it = providers[target.channel.config.type].stream(req, target).__aiter__()
        try:
            return await it.__anext__(), it
        except StopAsyncIteration:
            raise UpstreamError("malformed", 200, "upstream stream was empty") from None

    targets = distributor.attempts(models, pin)
    (first, rest), served = await first_success(targets, distributor, policy, attempt)
    return first, rest, served


def _answers_the_body(err: UpstreamError) -> bool:
    """The provider received this body and answered it (a status or a malformed
    reply, not a 401/403): evidence that may be about the body rather than the key.
    Connection failures and timeouts are not answers and are reported at once."""
    return err.kind in ("status", "malformed") and not err.disables_key


def _report_answers(
    distributor: Distributor, answers: dict[tuple[str, int], list[tuple[Target, UpstreamError]]]
) -> None:
    """Report the provider's answers to this request's body, once it is over.

    An answer given once is the key's: reported as usual. The same answer on
    several keys is evidence about the request, not the keys: it is counted once,
    and never cools down the last usable key of its channel. Without this, one
    client's bad body (a 500 on every attempt) cooled every key it was retried
    on, and the channel was gone for every tenant for the cooldown.
    """
    now = distributor.clock()
    for failures in answers.values():
        if len(failures) == 1:
            _report(distributor, *failures[0])
            continue
        target, err = failures[0]
        if target.channel.usable_keys(now) != [target.key_index]:
            _report(distributor, target, err)


async def _traced(
    tracer: Tracer, attempt: Callable[[Target], Awaitable[R]], target: Target, n: int
) -> R:
    """One attempt in its own span (a stream's: until its first event)."""
    attributes: dict[str, str | int] = {
        "tiergate.channel": target.channel.name,
        "tiergate.model": target.model,
        "tiergate.key_index": target.key_index,
        "tiergate.attempt": n,
    }
    with tracer.start_as_current_span(
        "tiergate.upstream", attributes=attributes, record_exception=False
    ) as span:
        try:
            return await attempt(target)
        except UpstreamError as err:  # never the provider's message: it may quote input
            span.set_attribute("tiergate.failure", err.kind)
            span.set_attribute("http.response.status_code", err.status)
            tracing.set_error(span, err)
            raise


def _report(distributor: Distributor, target: Target, err: UpstreamError) -> None:
    if err.disables_key or err.cools_down:
        distributor.report_failure(
            target, disable_key=err.disables_key, retry_after=err.retry_after, status=err.status
        )


def _may_retry(err: UpstreamError, n: int, start: float, policy: RetryPolicy) -> bool:
    return (
        err.retryable
        and n < policy.max_attempts
        and time.monotonic() - start < policy.budget_seconds
    )
