"""Optional OpenTelemetry traces: one span per completion request, one per upstream
attempt inside it.

Off unless asked for, and then only with the `otel` extra installed
(`pip install 'tiergate[otel]'`): `TIERGATE_OTEL=1`, or an
`OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, turns it
on, and spans go to OTLP over HTTP, configured by the standard `OTEL_*`
variables (service name defaults to `tiergate`). Off, the hot path pays one
attribute read per request and per attempt (`tracer is None`).

Spans carry identifiers only, never prompt text or keys: the route, status,
router, resolved model, request id, and per attempt the channel, model, key
index, attempt number and failure kind.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

log = logging.getLogger(__name__)

#: The live tracer, or None when tracing is off (read on the hot path).
tracer: Tracer | None = None


def wanted(env: Mapping[str, str]) -> bool:
    return env.get("TIERGATE_OTEL", "").strip() in ("1", "true") or bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup_from_env(env: Mapping[str, str]) -> bool:
    """Start tracing when the environment asks for it; False when off or impossible."""
    if not wanted(env):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("tracing requested but the otel extra is not installed: tracing stays off")
        return False
    name = env.get("OTEL_SERVICE_NAME") or "tiergate"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    install(provider)
    return True


def install(provider: TracerProvider | None) -> None:
    """Trace through `provider` (tests pass one with an in-memory exporter); None: off."""
    global tracer
    tracer = provider.get_tracer("tiergate") if provider is not None else None


def set_error(span: Any, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
