"""Optional OpenTelemetry traces (the `otel` extra): one server span per completion
request, one child span per upstream attempt, identifiers only; an incoming W3C
`traceparent` joins the caller's trace, and every upstream attempt sends its own.
The OTLP exporter path (`setup_from_env`): test_tracing_otlp.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate import tracing
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

SECRET_PROMPT = "tell nobody: the launch code is 0000"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.install(None)


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


def chat(
    gw: ServerThread, stream: bool = False, headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.post(
        f"{gw.url}/v1/chat/completions",
        headers={"authorization": f"Bearer {TOKEN}", **(headers or {})},
        json={
            "model": "openai/gpt-5-mini",
            "stream": stream,
            "messages": [{"role": "user", "content": SECRET_PROMPT}],
        },
        timeout=10,
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_span_holds_one_span_per_upstream_attempt(
    sim: ServerThread, spans: InMemorySpanExporter, stream: bool
) -> None:
    cfg = parse_config(gateway_config(sim.url, server={"cooldown_seconds": 0}))
    fault = {"kind": "status", "status": 500, "count": 1, "model": "gpt-5-mini"}
    with ServerThread(create_app(cfg)) as gw:
        httpx.post(f"{sim.url}/_sim/faults", json=fault).raise_for_status()
        try:
            r = chat(gw, stream)
        finally:
            httpx.delete(f"{sim.url}/_sim/faults")
        assert r.status_code == 200
    finished = spans.get_finished_spans()
    [request] = [s for s in finished if s.name == "tiergate.request"]
    attempts = sorted(
        (s for s in finished if s.name == "tiergate.upstream"),
        key=lambda s: s.attributes["tiergate.attempt"],  # type: ignore[index]
    )
    assert request.attributes is not None
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["tiergate.resolved_model"] == "openai/gpt-5-mini"
    assert request.attributes["tiergate.request_id"] == r.headers["x-orca-request-id"]
    assert [a.attributes["tiergate.attempt"] for a in attempts] == [1, 2]  # type: ignore[index]
    assert all(
        a.parent is not None and a.parent.span_id == request.context.span_id for a in attempts
    )
    assert attempts[0].attributes["tiergate.failure"] == "status"  # type: ignore[index]
    assert not attempts[0].status.is_ok and attempts[1].status.is_ok
    assert SECRET_PROMPT not in str([s.to_json() for s in finished])


def test_off_by_default_and_without_the_environment() -> None:
    assert tracing.tracer is None
    assert not tracing.wanted({})
    assert tracing.wanted({"TIERGATE_OTEL": "1"})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


class HeaderRecorder:
    """The simulator behind an ASGI wrapper that keeps each request's headers."""

    def __init__(self) -> None:
        self.app = create_sim_app()
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await self.app(scope, receive, send)


@pytest.fixture
def recorded() -> Iterator[tuple[ServerThread, HeaderRecorder]]:
    recorder = HeaderRecorder()
    with ServerThread(recorder) as s:
        yield s, recorder


def only_request_span(spans: InMemorySpanExporter) -> Any:
    [request] = [s for s in spans.get_finished_spans() if s.name == "tiergate.request"]
    return request


@pytest.mark.parametrize("stream", [False, True])
def test_an_incoming_traceparent_makes_the_request_span_its_child(
    sim: ServerThread, spans: InMemorySpanExporter, stream: bool
) -> None:
    headers = {"traceparent": TRACEPARENT, "tracestate": "vendor=abc,other=1"}
    with ServerThread(create_app(parse_config(gateway_config(sim.url)))) as gw:
        assert chat(gw, stream, headers).status_code == 200
    request = only_request_span(spans)
    assert format(request.context.trace_id, "032x") == TRACE_ID
    assert request.parent is not None and request.parent.is_remote
    assert format(request.parent.span_id, "016x") == PARENT_ID
    assert request.context.trace_state.get("vendor") == "abc"
    [attempt] = [s for s in spans.get_finished_spans() if s.name == "tiergate.upstream"]
    assert attempt.context.trace_id == request.context.trace_id


@pytest.mark.parametrize(
    "traceparent",
    [
        "garbage",
        "00-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-00f067aa0ba902b7-01",
        f"00-{'0' * 32}-{PARENT_ID}-01",  # all-zero trace id: invalid
        f"00-{TRACE_ID}-{'0' * 16}-01",  # all-zero parent id: invalid
        f"ff-{TRACE_ID}-{PARENT_ID}-01",  # version ff is forbidden
        f"00-{TRACE_ID}-{PARENT_ID}-01-extra",
        f"00-{TRACE_ID[:-1]}-{PARENT_ID}-01",
    ],
)
def test_a_malformed_traceparent_is_ignored_and_a_new_trace_starts(
    sim: ServerThread, spans: InMemorySpanExporter, traceparent: str
) -> None:
    headers = {"traceparent": traceparent, "tracestate": "vendor=abc"}
    with ServerThread(create_app(parse_config(gateway_config(sim.url)))) as gw:
        assert chat(gw, headers=headers).status_code == 200
    request = only_request_span(spans)
    assert request.parent is None  # a root span of a trace of the gateway's own
    assert format(request.context.trace_id, "032x") != TRACE_ID
    assert request.context.trace_id != 0


def test_each_upstream_attempt_sends_its_own_traceparent(
    recorded: tuple[ServerThread, HeaderRecorder], spans: InMemorySpanExporter
) -> None:
    upstream, recorder = recorded
    cfg = parse_config(gateway_config(upstream.url, server={"cooldown_seconds": 0}))
    fault = {"kind": "status", "status": 500, "count": 1, "model": "gpt-5-mini"}
    with ServerThread(create_app(cfg)) as gw:
        httpx.post(f"{upstream.url}/_sim/faults", json=fault).raise_for_status()
        try:
            headers = {"traceparent": TRACEPARENT, "tracestate": "vendor=abc", "baggage": "u=1"}
            assert chat(gw, headers=headers).status_code == 200
        finally:
            httpx.delete(f"{upstream.url}/_sim/faults")
    attempts = sorted(
        (s for s in spans.get_finished_spans() if s.name == "tiergate.upstream"),
        key=lambda s: s.attributes["tiergate.attempt"],  # type: ignore[index]
    )
    assert len(attempts) == 2 and len(recorder.seen) == 2
    for attempt, sent in zip(attempts, recorder.seen, strict=True):
        span_id = format(attempt.context.span_id, "016x")
        assert sent["traceparent"] == f"00-{TRACE_ID}-{span_id}-01"  # the attempt is the parent
        assert sent["tracestate"] == "vendor=abc"
        assert "baggage" not in sent


def test_nothing_is_propagated_when_tracing_is_off(
    recorded: tuple[ServerThread, HeaderRecorder],
) -> None:
    """Off (no provider installed): no traceparent upstream, and the caller's is
    not forwarded either."""
    upstream, recorder = recorded
    assert tracing.tracer is None
    with ServerThread(create_app(parse_config(gateway_config(upstream.url)))) as gw:
        assert chat(gw, headers={"traceparent": TRACEPARENT}).status_code == 200
    [sent] = recorder.seen
    assert "traceparent" not in sent and "tracestate" not in sent
    assert tracing.incoming_context([(b"traceparent", TRACEPARENT.encode())]) is None
    assert tracing.upstream_headers() == b""
