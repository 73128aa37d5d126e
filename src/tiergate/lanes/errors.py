"""Errors of the session-tier feature, each with the HTTP status the spec fixes.

The lanes package is a library: it does not import the HTTP pipeline. The
pipeline maps a `SessionTierError` to its own error body with one `except`
clause (status, code, message are all it needs). Messages never contain a
session id, prompt text or tool-call id, so they are safe to return and log.
"""

from __future__ import annotations


class SessionTierError(Exception):
    """A session-tier request the gateway refuses or cannot serve."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class StorageUnavailable(Exception):
    """The lane store is missing, unmigrated or failing (maps to 503)."""


class CapacityExhausted(Exception):
    """The lane store already holds its maximum of live lanes (maps to 503)."""


INVALID = "invalid_session_tier"
TOOL_LIMIT = "session_tier_tool_limit"
BUSY = "session_tier_busy"
STORAGE_UNAVAILABLE = "session_tier_storage_unavailable"
CAPACITY_EXHAUSTED = "session_tier_capacity_exhausted"
ROUTE_UNAVAILABLE = "session_tier_route_unavailable"


def invalid(message: str) -> SessionTierError:
    return SessionTierError(400, INVALID, message)


def tool_limit(message: str) -> SessionTierError:
    return SessionTierError(400, TOOL_LIMIT, message)


def busy() -> SessionTierError:
    return SessionTierError(
        409, BUSY, "Another request for this session lane is in flight; retry when it completes"
    )


def storage_unavailable() -> SessionTierError:
    return SessionTierError(503, STORAGE_UNAVAILABLE, "Session tier storage is unavailable")


def capacity_exhausted() -> SessionTierError:
    return SessionTierError(
        503, CAPACITY_EXHAUSTED, "Session tier storage is at capacity; retry later"
    )


def route_unavailable() -> SessionTierError:
    return SessionTierError(
        503, ROUTE_UNAVAILABLE, "No eligible route can serve the approved session tier"
    )
