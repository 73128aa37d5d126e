"""What every upstream adapter offers, and how upstream failures are classified.

An adapter turns a neutral ChatRequest into one provider HTTP call and the
reply back into neutral objects. Failures are classified once, here, so the
distributor (retry, cooldown, key disable) and the escalation engine (which
must never count infrastructure failures as strikes) read the same facts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol

from tiergate.core.model import ChatRequest, ChatResponse, StreamEvent
from tiergate.core.upstream import Target

FailureKind = Literal["status", "timeout", "connect", "malformed", "stream_cut"]


@dataclass
class UpstreamError(Exception):
    """An upstream attempt failed. `status` is the provider's HTTP status (0 when
    no response arrived). `retryable` says another key/channel may succeed."""

    kind: FailureKind
    status: int = 0
    message: str = "upstream request failed"
    retry_after: float | None = None
    code: str | None = None  # what the answer means, when known: context_length_exceeded
    proxy: str | None = None  # host:port of the HTTP proxy that failed, if that was it
    proxy_status: int = 0  # the proxy's own answer to CONNECT (403, 407...), 0 = none
    # False when the error body is not the provider's error JSON: a plain-HTTP proxy,
    # a firewall or a CDN answered, so a 401/403 says nothing about the key
    provider_body: bool = True
    # filled in by gateway.dispatch once the request's attempts are over
    attempts: int = 1
    channel: str | None = None  # the last attempt's channel and key
    key_index: int | None = None

    def __str__(self) -> str:
        return f"{self.kind} {self.status}: {self.message}"

    @property
    def disables_key(self) -> bool:
        return self.kind == "status" and self.status in (401, 403) and self.provider_body

    @property
    def retryable(self) -> bool:
        if self.kind == "status":
            return self.status in (401, 403, 408, 409, 429) or self.status >= 500
        return True

    @property
    def cools_down(self) -> bool:
        return self.retryable and not self.disables_key

    def client_status(self) -> int:
        """The status the gateway reports after retries are exhausted."""
        if self.kind == "timeout":
            return 504
        if self.kind == "status":
            if self.status == 429:
                return 429
            if self.status in (401, 403):
                return 502  # our credential problem, not the client's
            if 400 <= self.status < 500:
                return self.status
            return 503 if self.status in (503, 529) else 502
        return 502


class Provider(Protocol):
    """One upstream wire format."""

    async def complete(self, req: ChatRequest, target: Target) -> ChatResponse: ...

    def stream(self, req: ChatRequest, target: Target) -> AsyncIterator[StreamEvent]: ...
