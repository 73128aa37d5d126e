"""The OTLP exporter path of the optional traces (`tracing.setup_from_env`), end to
end: a real `python -m tiergate serve` process with the standard `OTEL_*`
environment, a request through it, and a tiny OTLP/HTTP collector here that
receives the protobuf span batch. The in-memory exporter tests are in
test_tracing.py; this one proves the exporter, its endpoint variables, the
service name and the batch processor as an operator deploys them."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from servers import TOKEN, ServerThread, free_port, gateway_config
from tiergate.sim.app import create_sim_app

pytest.importorskip(
    "opentelemetry.exporter.otlp.proto.http", reason="the otel extra is not installed"
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

SERVICE = "tiergate-otlp-test"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


@dataclass
class Post:
    path: str
    content_type: str
    body: bytes


@dataclass
class Collector:
    """An OTLP/HTTP receiver: keeps every POST, answers 200 (an empty
    ExportTraceServiceResponse is zero bytes)."""

    url: str
    posts: list[Post] = field(default_factory=list)

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, span) of every span received on a traces path."""
        out = []
        for post in self.posts:
            batch = ExportTraceServiceRequest.FromString(post.body)
            for rs in batch.resource_spans:
                resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                out += [(resource, s) for ss in rs.scope_spans for s in ss.spans]
        return out


@pytest.fixture
def collector() -> Iterator[Collector]:
    posts: list[Post] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            posts.append(Post(self.path, self.headers.get("content-type", ""), body))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Collector(f"http://127.0.0.1:{server.server_address[1]}", posts)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


def serve(tmp_path: Path, sim_url: str, otel_env: dict[str, str]) -> tuple[str, Any, Path]:
    """A gateway process with the OTel environment (inherited OTEL_* dropped)."""
    config = tmp_path / "gw.json"  # JSON is YAML
    config.write_text(json.dumps(gateway_config(sim_url)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TIERGATE_OTEL"))}
    env.update(otel_env)
    env.update({"OTEL_SERVICE_NAME": SERVICE, "OTEL_BSP_SCHEDULE_DELAY": "100"})
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    port, log = free_port(), tmp_path / "gw.log"
    with log.open("wb") as out:
        args = ["serve", "--config", str(config), "--port", str(port), "--log-level", "WARNING"]
        args += ["--spool", str(tmp_path / "spool.jsonl")]
        proc = subprocess.Popen(
            [sys.executable, "-m", "tiergate", *args],
            env=env,
            stdout=out,
            stderr=out,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            pytest.fail(f"gateway exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return url, proc, log
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"gateway did not start:\n{log.read_text()}")
        time.sleep(0.05)


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "TRACES_ENDPOINT"])
def test_spans_reach_an_otlp_http_collector(
    sim: ServerThread, collector: Collector, tmp_path: Path, variable: str
) -> None:
    if variable == "TRACES_ENDPOINT":  # the per-signal variable is the full URL
        otel_env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{collector.url}/custom/traces"}
        path = "/custom/traces"
    else:  # the base endpoint: the exporter appends /v1/traces
        otel_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
        path = "/v1/traces"
    url, proc, log = serve(tmp_path, sim.url, otel_env)
    try:
        r = httpx.post(
            f"{url}/v1/chat/completions",
            headers={
                "authorization": f"Bearer {TOKEN}",
                "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01",
            },
            json={"model": "openai/gpt-5-mini", "messages": [{"role": "user", "content": "hi"}]},
            timeout=10,
        )
        assert r.status_code == 200
        deadline = time.monotonic() + 15
        while not any(s.name == "tiergate.request" for _, s in collector.spans()):
            assert time.monotonic() < deadline, f"no span batch arrived:\n{log.read_text()}"
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert {p.path for p in collector.posts} == {path}
    assert all(p.content_type == "application/x-protobuf" and p.body for p in collector.posts)
    spans = collector.spans()
    assert {res.get("service.name") for res, _ in spans} == {SERVICE}
    [request] = [s for _, s in spans if s.name == "tiergate.request"]
    [attempt] = [s for _, s in spans if s.name == "tiergate.upstream"]
    attrs = {a.key: a.value for a in request.attributes}
    assert attrs["tiergate.request_id"].string_value == r.headers["x-orca-request-id"]
    assert attrs["http.response.status_code"].int_value == 200
    assert request.trace_id.hex() == TRACE_ID  # the caller's traceparent, across the process
    assert request.parent_span_id.hex() == PARENT_ID
    assert attempt.parent_span_id == request.span_id and attempt.trace_id == request.trace_id
