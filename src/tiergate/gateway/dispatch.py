"""Send one request upstream: attempts in distributor order, bounded retries.

A failed attempt is retried on another key or channel while the attempt count
and the retry time budget allow, and only before anything reached the client:
for streams the first upstream event is awaited before the response starts,
so a failure up to that point is still retryable. Health feedback (cooldowns,
key disabling) is reported to the distributor on every attempt.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from tiergate.core.model import ChatRequest, ChatResponse, StreamEvent
from tiergate.providers.base import Provider, UpstreamError
from tiergate.routing.affinity import ChannelPin
from tiergate.routing.distributor import Distributor, Target


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


async def complete(
    req: ChatRequest,
    models: list[str],
    pin: ChannelPin | None,
    distributor: Distributor,
    providers: dict[str, Provider],
    policy: RetryPolicy,
) -> tuple[ChatResponse, Served]:
    """Non-streaming: the first successful attempt, or the last error."""
    start = time.monotonic()
    last: UpstreamError | None = None
    n = 0
    for target in distributor.attempts(models, pin):
        n += 1
        try:
            resp = await providers[target.channel.config.type].complete(req, target)
        except UpstreamError as err:
            last = err
            _report(distributor, target, err)
            if not _may_retry(err, n, start, policy):
                break
            continue
        distributor.report_success(target)
        return resp, Served(target, n, fallback=n > 1)
    if last is None:
        raise NoUpstream()
    raise last


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
    start = time.monotonic()
    last: UpstreamError | None = None
    n = 0
    for target in distributor.attempts(models, pin):
        n += 1
        it = providers[target.channel.config.type].stream(req, target).__aiter__()
        try:
            first = await it.__anext__()
        except StopAsyncIteration:
            last = UpstreamError("malformed", 200, "upstream stream was empty")
            _report(distributor, target, last)
            if not _may_retry(last, n, start, policy):
                break
            continue
        except UpstreamError as err:
            last = err
            _report(distributor, target, err)
            if not _may_retry(err, n, start, policy):
                break
            continue
        distributor.report_success(target)
        return first, it, Served(target, n, fallback=n > 1)
    if last is None:
        raise NoUpstream()
    raise last


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
