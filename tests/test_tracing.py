"""Optional OpenTelemetry traces (the `otel` extra): one server span per completion
request, one child span per upstream attempt, identifiers only."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate import tracing
from tiergate.app import create_app
from tiergate.config import parse_config
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


def chat(gw: ServerThread, stream: bool = False) -> httpx.Response:
    return httpx.post(
        f"{gw.url}/v1/chat/completions",
        headers={"authorization": f"Bearer {TOKEN}"},
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
