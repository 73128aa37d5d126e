"""Injected failures, armed by tests through `POST /_sim/faults`.

A rule matches requests by optional api key, model and provider and affects
the next `count` of them (null = every one until `DELETE /_sim/faults`):

- status:      reply with `status` in the provider's error format
               (429/503/529 carry `retry-after`, default 1 second);
- timeout:     stall far longer than any client timeout, then answer normally;
- disconnect:  send `after_chunks` events (or half the body when not
               streaming), then drop the connection without a terminator;
- malformed:   200 with a body that is not JSON, or a broken SSE data line;
- stream_error: a stream sends `after_chunks` events, then the provider's
               in-stream error event (Anthropic `event: error`, e.g. 529
               overloaded_error) and ends; a non-streaming request gets `status`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

FaultKind = Literal["status", "timeout", "disconnect", "malformed", "stream_error"]
KINDS: tuple[FaultKind, ...] = ("status", "timeout", "disconnect", "malformed", "stream_error")
_RETRY_STATUSES = (429, 503, 529)


@dataclass(slots=True)
class FaultRule:
    kind: FaultKind
    status: int = 500
    remaining: int | None = 1
    api_key: str | None = None
    model: str | None = None
    provider: str | None = None
    after_chunks: int = 2
    retry_after: float | None = None
    message: str | None = None

    def matches(self, provider: str, api_key: str, model: str) -> bool:
        return (
            (self.api_key is None or self.api_key == api_key)
            and (self.model is None or self.model == model)
            and (self.provider is None or self.provider == provider)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "status": self.status,
            "count": self.remaining,
            "api_key": self.api_key,
            "model": self.model,
            "provider": self.provider,
            "after_chunks": self.after_chunks,
            "retry_after": self.retry_after,
        }


def parse_rule(payload: Any) -> FaultRule:
    """Validate a control-endpoint body; raises ValueError with a clear message."""
    if not isinstance(payload, dict):
        raise ValueError("fault must be a JSON object")
    kind = payload.get("kind")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}")
    status = _int(payload, "status", 500)
    if not 400 <= status <= 599:
        raise ValueError("status must be an HTTP error status (400-599)")
    count = payload.get("count", 1)
    if count is not None and (not isinstance(count, int) or count < 1):
        raise ValueError("count must be a positive integer or null (unlimited)")
    retry_after = payload.get("retry_after")
    if retry_after is None and status in _RETRY_STATUSES:
        retry_after = 1
    if retry_after is not None and not isinstance(retry_after, int | float):
        raise ValueError("retry_after must be a number of seconds")
    return FaultRule(
        kind=kind,
        status=status,
        remaining=count,
        api_key=_opt_str(payload, "api_key"),
        model=_opt_str(payload, "model"),
        provider=_opt_str(payload, "provider"),
        after_chunks=max(0, _int(payload, "after_chunks", 2)),
        retry_after=retry_after,
        message=_opt_str(payload, "message"),
    )


class FaultBook:
    """Armed rules, consulted once per provider request (first match wins)."""

    def __init__(self) -> None:
        self._rules: list[FaultRule] = []

    def add(self, rule: FaultRule) -> None:
        self._rules.append(rule)

    def clear(self) -> None:
        self._rules.clear()

    def rules(self) -> list[FaultRule]:
        return list(self._rules)

    def take(self, provider: str, api_key: str, model: str) -> FaultRule | None:
        """The first matching rule, with one use consumed; None if none match."""
        if not self._rules:
            return None
        for rule in self._rules:
            if rule.matches(provider, api_key, model):
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self._rules.remove(rule)
                return rule
        return None


def _int(payload: dict[str, Any], name: str, default: int) -> int:
    value = payload.get(name, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer")
    return value


def _opt_str(payload: dict[str, Any], name: str) -> str | None:
    value = payload.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string")
    return value
