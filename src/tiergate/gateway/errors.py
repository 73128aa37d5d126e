"""Gateway errors, rendered later in the caller's own wire format."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GatewayError(Exception):
    """A request the gateway refuses or cannot serve.

    `code` is a stable machine-readable identifier (e.g. `model_not_found`,
    `session_tier_busy`); `headers` are extra response headers (Retry-After).
    """

    status: int
    message: str
    code: str | None = None
    headers: dict[str, str] | None = None

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"
