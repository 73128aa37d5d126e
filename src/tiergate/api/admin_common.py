"""What every admin endpoint shares: the token check, the JSON error envelope,
query parsing and the context object handlers receive.

The admin token is separate from workspace tokens: `TIERGATE_ADMIN_TOKEN`
(wins) or `server.admin_token`. Without one the admin API answers 503 and
stays closed. The token is kept only as a SHA-256 digest and compared in
constant time; it is never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import Response

from tiergate import metrics
from tiergate.config import ConfigError, GatewayConfig
from tiergate.config_store import ConfigBusy, ConfigSync
from tiergate.gateway.auth import bearer_token
from tiergate.state.base import StateUnavailable

if TYPE_CHECKING:
    from tiergate.app_state import AppState

log = logging.getLogger(__name__)

ADMIN_TOKEN_ENV = "TIERGATE_ADMIN_TOKEN"
MAX_BODY_BYTES = 1024 * 1024
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
MAX_CSV_ROWS = 100_000
MAX_OFFSET = 10**9

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    503: "unavailable_error",
}


class AdminError(Exception):
    """An admin request refused with `status`; `problems` lists validation failures."""

    def __init__(
        self, status: int, message: str, code: str, problems: list[str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.problems = problems


def not_found(what: str) -> AdminError:
    return AdminError(404, f"{what} does not exist", "not_found")


def invalid(message: str, problems: list[str] | None = None) -> AdminError:
    return AdminError(400, message, "invalid_request", problems)


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS),
        status,
        dict(headers or {}),
        media_type="application/json",
    )


def error_response(err: AdminError) -> Response:
    body: dict[str, Any] = {
        "message": err.message,
        "type": _ERROR_TYPES.get(err.status, "api_error"),
        "code": err.code,
    }
    if err.problems is not None:
        body["problems"] = err.problems
    return json_response({"error": body}, err.status)


# ---- tokens ------------------------------------------------------------------------


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenCheck:
    """A configured secret, held as a digest; `matches` is constant-time."""

    def __init__(self, token: str | None) -> None:
        self._digest = _digest(token) if token else None

    @property
    def configured(self) -> bool:
        return self._digest is not None

    def matches(self, presented: str | None) -> bool:
        if self._digest is None or not presented:
            return False
        return hmac.compare_digest(self._digest, _digest(presented))


def admin_token_from(cfg: GatewayConfig, env: Mapping[str, str]) -> str | None:
    """The environment wins over the file, so the secret can stay out of YAML."""
    return env.get(ADMIN_TOKEN_ENV) or cfg.server.admin_token or None


def check_admin(check: TokenCheck, headers: Mapping[str, str], endpoint: str) -> None:
    """Raise unless the request carries the admin token (workspace tokens never do)."""
    if not check.configured:
        raise AdminError(
            503,
            f"The admin API is disabled: set {ADMIN_TOKEN_ENV} or server.admin_token",
            "admin_disabled",
        )
    presented = bearer_token(headers)
    if not check.matches(presented):
        metrics.ADMIN_AUTH_FAILURES_TOTAL.labels(endpoint).inc()
        message = "Missing admin token" if not presented else "Invalid admin token"
        raise AdminError(401, message, "invalid_admin_token")


# ---- the context handlers receive ------------------------------------------------


@dataclass
class AdminContext:
    """The live app objects an admin handler may read or change."""

    state: AppState
    sync: ConfigSync
    engine: AsyncEngine | None
    admin: TokenCheck
    metrics_token: TokenCheck

    @property
    def cfg(self) -> GatewayConfig:
        return self.state.gateway.cfg

    def require_engine(self) -> AsyncEngine:
        if self.engine is None:
            raise AdminError(
                503, "No database is configured (database.url)", "database_unavailable"
            )
        return self.engine

    async def fresh_engine(self) -> AsyncEngine:
        """The engine, after writing rows still queued in memory (read your writes)."""
        engine = self.require_engine()
        await self.state.recorder.flush()
        return engine

    def audit(
        self,
        event: str,
        *,
        router: str | None = None,
        session_hash: str | None = None,
        trigger: str | None = None,
        detail: dict[str, Any] | None = None,
        now: float,
    ) -> None:
        """An operator action in the audit table (identifiers only, never secrets)."""
        self.state.recorder.record(
            "audit",
            {
                "ts": now,
                "event": event,
                "workspace": None,
                "router": router,
                "session_hash": session_hash,
                "request_id": None,
                "trigger": trigger,
                "detail": detail or {},
            },
        )


Handler = Callable[[AdminContext, Request], Awaitable[Response]]


def guarded(
    ctx: AdminContext, handler: Handler, name: str
) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a handler: admin token first, then map every refusal to the envelope."""

    async def endpoint(request: Request) -> Response:
        try:
            check_admin(ctx.admin, request.headers, name)
            return await handler(ctx, request)
        except AdminError as err:
            return error_response(err)
        except ConfigError as err:
            return error_response(invalid("The configuration change is invalid", err.problems))
        except ConfigBusy as err:
            return error_response(AdminError(409, str(err), "config_busy"))
        except StateUnavailable:
            return error_response(
                AdminError(503, "The state store is unavailable", "state_unavailable")
            )
        except (SQLAlchemyError, OSError) as err:
            log.warning("admin request failed on the database: %s", type(err).__name__)
            return error_response(
                AdminError(503, "The database is unavailable", "database_unavailable")
            )

    return endpoint


# ---- request parsing ---------------------------------------------------------------


async def read_body(request: Request) -> dict[str, Any]:
    """The JSON object body. Required: an empty PATCH must not store a new version."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise AdminError(413, f"Request body exceeds {MAX_BODY_BYTES} bytes", "request_too_large")
    if not raw.strip():
        raise invalid("A JSON object body is required")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid("Request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise invalid("Request body must be a JSON object")
    return body


def parse_time(value: str | None, name: str) -> float | None:
    """Unix seconds or ISO 8601 (a timezone-less time is UTC). None when absent;
    an empty value is malformed (the typed parameters say what they accept)."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            raise invalid(f"{name}: not a finite time")
        return number
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise invalid(f"{name}: expected unix seconds or an ISO 8601 time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def parse_int(value: str | None, name: str, default: int, lo: int, hi: int) -> int:
    if value is None:
        return default
    try:
        n = int(value)
    except ValueError:
        raise invalid(f"{name}: expected an integer") from None
    if not lo <= n <= hi:
        raise invalid(f"{name}: must be between {lo} and {hi}")
    return n


def parse_bool(value: str | None, name: str) -> bool | None:
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise invalid(f"{name}: expected true or false")


def actor_of(request: Request) -> str:
    """Who made a change, as the operator's tooling names them (audit only)."""
    raw = request.headers.get("x-tiergate-actor", "").strip()
    return raw[:128] if raw else "admin"
