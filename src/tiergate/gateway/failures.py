"""Requests that end without an upstream reply: what the client is told, the usage
row and the access log line.

Every request that passed authentication gets a usage row and an INFO access log
line, refused or failed alike, so an outage shows up in the usage table and the
log as the requests it cost, not as silence. The client gets a generic message in
its own format; the provider's own error text (which can name internal hosts,
accounts or keys) goes to the log only, with every configured key redacted.
"""

from __future__ import annotations

import logging
import time
from typing import TypedDict

from tiergate import metrics
from tiergate.config import GatewayConfig
from tiergate.gateway import no_route
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.planner import RoutePlan
from tiergate.gateway.usage import UsageRecord
from tiergate.providers.base import UpstreamError
from tiergate.recorder import Recorder
from tiergate.routing.distributor import Distributor

access_log = logging.getLogger("tiergate.access")
log = logging.getLogger(__name__)

#: How much of a provider's error text the log keeps.
PROVIDER_TEXT_LIMIT = 500


def upstream_refusal(
    err: Exception, cfg: GatewayConfig, distributor: Distributor, models: list[str]
) -> GatewayError:
    """The client's answer after every attempt failed (UpstreamError) or none could
    be made (dispatch.NoUpstream: every channel cooling down or disabled)."""
    if not isinstance(err, UpstreamError):
        return no_route.upstream_unavailable(distributor, models)
    status = err.client_status()
    fields: dict[str, object] = {
        "kind": err.kind,
        "upstream_status": err.status,
        "attempts": err.attempts,
        "channel": err.channel,
        "key_index": err.key_index,
        "provider_message": without_keys(err.message, cfg)[:PROVIDER_TEXT_LIMIT],
    }
    if err.proxy is not None:  # the operator's network, not the provider: say so
        fields.update(proxy=err.proxy, proxy_status=err.proxy_status or None)
        log.warning("upstream proxy failed", extra=fields)
    else:
        log.info("upstream failed", extra=fields)
    if err.code == "context_length_exceeded":  # the client's to fix; no key cooled
        return GatewayError(
            400,
            "The request exceeds the model's context window (the provider refused it); "
            "shorten the messages or lower max_tokens",
            "context_length_exceeded",
        )
    headers: dict[str, str] = {}
    tries = _attempts(err.attempts)
    if status == 429:
        headers["retry-after"] = str(int(err.retry_after or 1))
        message = "The upstream provider is rate limiting requests; retry later"
    elif status == 504:
        message = f"The upstream provider timed out ({tries})"
    elif err.proxy is not None:
        message = f"The gateway's outbound proxy refused the connection ({tries})"
    elif status >= 500:
        message = f"Upstream provider failed ({tries})"
    else:
        message = f"The upstream provider rejected the request (HTTP {status})"
    return GatewayError(status, message, "upstream_error", headers)


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


class AttemptFields(TypedDict):
    attempts: int
    channel: str | None
    key_index: int | None


def attempt_fields(err: Exception) -> AttemptFields:
    """What `record_failure` logs about the attempts of a failed request: how many
    were made and which channel and key the last one tried (none: nothing could
    be attempted, dispatch.NoUpstream)."""
    if not isinstance(err, UpstreamError):
        return {"attempts": 0, "channel": None, "key_index": None}
    return {"attempts": err.attempts, "channel": err.channel, "key_index": err.key_index}


def record_failure(
    recorder: Recorder,
    *,
    request_id: str,
    workspace: str,
    plan: RoutePlan | None,
    status: int,
    stream: bool,
    started: float,
    error_type: str,
    attempts: int = 0,
    virtual_key: str | None = None,
    channel: str | None = None,
    key_index: int | None = None,
    path: str | None = None,
) -> None:
    """The usage row and the access log line of a request that got no upstream reply
    (`channel`, `key_index`: what the last attempt tried, when one was made)."""
    router = plan.router.name if plan is not None and plan.router is not None else None
    record = UsageRecord(
        request_id=request_id,
        ts=time.time(),
        workspace=workspace,
        router=router,
        model=plan.models[0] if plan is not None and plan.models else None,
        status=status,
        stream=stream,
        latency_ms=(time.perf_counter() - started) * 1000,
        attempts=attempts,
        channel=channel,
        key_index=key_index,
        session_hash=plan.session_hash if plan is not None else None,
        error_type=error_type,
        virtual_key=virtual_key,
        path=path,
    )
    recorder.record("usage", record.row())
    access_log.info("request", extra=record.log_fields())


def without_keys(message: str, cfg: GatewayConfig) -> str:
    """Some providers quote the key they refused in their error: never log it."""
    for channel in cfg.channels:
        for key in channel.keys:
            if key and key in message:
                message = message.replace(key, "[redacted key]")
    return message


def count_refusal(plan: RoutePlan | None, status: int, started: float) -> float:
    """Count a refused request in the metrics; returns its latency in seconds."""
    router = plan.router.name if plan is not None and plan.router is not None else None
    latency = time.perf_counter() - started
    metrics.observe_request(router, None, None, status, latency)
    return latency


def log_refusal(
    plan: RoutePlan | None,
    status: int,
    started: float,
    request_id: str,
    error_type: str | None,
    path: str | None = None,
) -> None:
    """Count and log a request refused before or without an upstream reply: the
    access log shows every request, not only the served ones."""
    router = plan.router.name if plan is not None and plan.router is not None else None
    latency = count_refusal(plan, status, started)
    access_log.info(
        "request",
        extra={
            "request_id": request_id,
            "path": path,
            "router": router,
            "model": plan.models[0] if plan is not None and plan.models else None,
            "status": status,
            "latency_ms": round(latency * 1000, 2),
            "error_type": error_type,
            "session_hash": plan.session_hash if plan is not None else None,
        },
    )
