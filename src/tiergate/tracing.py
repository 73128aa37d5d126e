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

Propagation, only while tracing is on: an incoming W3C `traceparent` /
`tracestate` (or whatever `OTEL_PROPAGATORS` names: the API's global
propagator) makes the request span a child of the caller's span, and each
upstream attempt carries its own span's `traceparent` / `tracestate` so a
provider-side trace can be joined. Upstream gets W3C trace context only, never
the caller's `baggage`: that is the caller's data, not the provider's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

log = logging.getLogger(__name__)

#: The live tracer, or None when tracing is off (read on the hot path).
tracer: Tracer | None = None

#: Set with `tracer`: the propagator for incoming requests (the API's global one),
#: the header names it reads, and the W3C one for upstream attempts.
_incoming: TextMapPropagator | None = None
_incoming_fields: frozenset[bytes] = frozenset()
_upstream: TextMapPropagator | None = None


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
    global tracer, _incoming, _incoming_fields, _upstream
    if provider is None:
        tracer, _incoming, _incoming_fields, _upstream = None, None, frozenset(), None
        return
    from opentelemetry.propagate import get_global_textmap
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _incoming = get_global_textmap()
    _incoming_fields = frozenset(f.lower().encode("latin-1") for f in _incoming.fields)
    _upstream = TraceContextTextMapPropagator()
    tracer = provider.get_tracer("tiergate")


def incoming_context(headers: Iterable[tuple[bytes, bytes]]) -> Context | None:
    """The caller's trace context from an ASGI request's headers (names lower-case),
    None without one. A malformed `traceparent` is ignored by the propagator: the
    request then starts a trace of its own."""
    if _incoming is None:
        return None
    carrier = {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in headers
        if name in _incoming_fields
    }
    return _incoming.extract(carrier) if carrier else None


def upstream_headers() -> bytes:
    """`traceparent` (and `tracestate`) of the current span as raw header lines for
    an upstream request; empty when tracing is off or no span is recording."""
    if _upstream is None:
        return b""
    carrier: dict[str, str] = {}
    _upstream.inject(carrier)
    lines = "".join(f"{name}: {value}\r\n" for name, value in carrier.items())
    if lines.count("\n") != len(carrier) or lines.count("\r") != len(carrier):
        return b""  # never a header split by a value (the propagator validates; belt and braces)
    try:
        return lines.encode("latin-1")
    except UnicodeEncodeError:
        return b""


def set_error(span: Any, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
