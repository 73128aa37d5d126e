"""The load generator: a closed-loop HTTP/1.1 keep-alive client in its own process.

Why hand-rolled: on a 2-core machine every microsecond the client spends is
taken from the server it measures, so the client is an asyncio Protocol on
uvloop with httptools' C response parser and pre-built request bytes (about
60 us of CPU per request, where aiohttp's client spends 200-360 us in
bench_stack.py). It reports its own CPU cost per request so the reader sees what
the cores were doing.

Used as a subprocess: `run_loadgen(spec)` starts `python bench/loadgen.py OUT`,
sends the spec as JSON on stdin and reads the result as JSON from the file OUT.
A spec is a list of phases run one after another in this one process:

    {"cpu": 1, "watch": {"gateway": 1234},
     "phases": [{"label": "direct", "ports": [4010], "path": "/v1/chat/completions",
                 "headers": {"authorization": "Bearer x"}, "body": "<json with @@N@@>",
                 "session_header": "x-orcarouter-session-id", "session_prefix": "s1",
                 "turns_per_session": 0, "concurrency": 32, "requests": 2000,
                 "duration": 10.0, "warmup": 100, "collect": false, "group": null}]}

Each phase warms up (unrecorded), then runs until `requests` completed or
`duration` seconds passed, and reports per-request latency and time to first
body byte in microseconds, status counts, its own CPU seconds and the CPU
seconds of every watched pid over the measured window. Phases sharing a
`group` form a throughput sweep that stops once throughput stops rising.
In the body, `@@N@@` becomes a per-request counter and `@@SID@@` the session id.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

COUNTER = "@@N@@"
SESSION_ID = "@@SID@@"
HOST = "127.0.0.1"
FLAT_GAIN = 1.03
"""A sweep step must beat the best so far by 3% to count as still rising."""


def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _cpu_pid(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Conn(asyncio.Protocol):
    """One keep-alive connection; one request in flight at a time."""

    def __init__(self, collect: bool) -> None:
        import httptools

        self.parser = httptools.HttpResponseParser(self)
        self.collect = collect
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[float] | None = None
        self.first_body = 0.0
        self.status = 0
        self.headers: dict[bytes, bytes] = {}
        self.body: list[bytes] = []
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except Exception as err:  # noqa: BLE001 - a malformed reply fails this request
            self._fail(err)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(ConnectionError("connection closed by server"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if self.collect:
            self.headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if not self.first_body:
            self.first_body = time.perf_counter()
        if self.collect:
            self.body.append(body)

    def on_message_complete(self) -> None:
        if not self.parser.should_keep_alive():
            self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(time.perf_counter())

    def _fail(self, err: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(err)

    async def send(self, data: bytes) -> float:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.first_body = 0.0
        self.status = 0
        if self.collect:
            self.headers = {}
            self.body = []
        self.transport.write(data)
        return await self.waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _Phase:
    """One measured phase: request builder, shared counters and recorded samples."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.ports: list[int] = spec["ports"]
        self.host = spec.get("host", HOST)
        pre, _, post = spec["body"].partition(COUNTER)
        self.pre, self.post = pre.encode(), post.encode()
        self.has_counter = COUNTER in spec["body"]
        self.has_sid = SESSION_ID in spec["body"]
        method = spec.get("method", "POST")
        head = f"{method} {spec.get('path', '/v1/chat/completions')} HTTP/1.1\r\n"
        head += "content-type: application/json\r\n"
        for k, v in spec.get("headers", {}).items():
            head += f"{k}: {v}\r\n"
        self.head = head
        self.session_header: str | None = spec.get("session_header")
        self.session_prefix: str = spec.get("session_prefix", "s")
        self.turns_per_session: int = int(spec.get("turns_per_session", 0))
        self.collect = bool(spec.get("collect", False))
        self.vu_sent: dict[int, int] = {}

    def request_bytes(self, vu: int, port: int, serial: int) -> tuple[bytes, str | None]:
        n = self.vu_sent.get(vu, 0)
        self.vu_sent[vu] = n + 1
        body = self.pre + f"{vu}-{serial}".encode() + self.post if self.has_counter else self.pre
        head = self.head + f"host: {self.host}:{port}\r\n"
        sid = None
        if self.session_header:
            sid = f"{self.session_prefix}-{vu}"
            if self.turns_per_session:
                sid += f"-{n // self.turns_per_session}"
            head += f"{self.session_header}: {sid}\r\n"
        if self.has_sid:  # a per-session prompt prefix (a cache identity of its own)
            body = body.replace(SESSION_ID.encode(), (sid or f"vu{vu}").encode())
        head += f"content-length: {len(body)}\r\n\r\n"
        return head.encode() + body, sid


async def _run(
    phase: _Phase, concurrency: int, requests: int, duration: float, record: bool
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    latency: list[int] = []
    ttfb: list[int] = []
    statuses: dict[str, int] = {}
    collected: list[list[Any]] = []
    errors: list[str] = []
    issued = 0
    serial_base = phase.spec.get("_serial", 0)
    deadline = time.perf_counter() + duration

    rotate = bool(phase.spec.get("rotate_ports", False))

    async def user(vu: int) -> None:
        """One virtual user: requests back to back; with `rotate_ports` each request
        of the user goes to the next port, so one session visits every instance."""
        nonlocal issued
        conns: dict[int, _Conn] = {}
        k = 0
        while issued < requests and time.perf_counter() < deadline:
            issued += 1
            serial = serial_base + issued
            port = phase.ports[(vu + (k if rotate else 0)) % len(phase.ports)]
            k += 1
            conn = conns.get(port)
            if conn is None or conn.closed:
                if conn is not None:
                    conn.close()
                try:
                    _, conn = await loop.create_connection(
                        lambda: _Conn(phase.collect), phase.host, port
                    )
                except OSError as err:
                    errors.append(f"connect: {err}")
                    await asyncio.sleep(0.01)
                    continue
                conns[port] = conn
            data, sid = phase.request_bytes(vu, port, serial)
            t0 = time.perf_counter()
            try:
                end = await conn.send(data)
            except Exception as err:  # noqa: BLE001 - counted, then the next request
                errors.append(type(err).__name__)
                conn.close()
                conns.pop(port, None)
                continue
            if not record:
                continue
            key = str(conn.status)
            statuses[key] = statuses.get(key, 0) + 1
            latency.append(int((end - t0) * 1e6))
            ttfb.append(int(((conn.first_body or end) - t0) * 1e6))
            if phase.collect:
                collected.append(_collect_row(conn, sid))
        for c in conns.values():
            c.close()

    start = time.perf_counter()
    await asyncio.gather(*(user(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {
        "latency_us": latency,
        "ttfb_us": ttfb,
        "statuses": statuses,
        "errors": len(errors),
        "error_kinds": sorted(set(errors))[:5],
        "elapsed_s": elapsed,
        "collected": collected,
    }


def _collect_row(conn: _Conn, sid: str | None) -> list[Any]:
    """[session, resolved model, tier header, cached prompt tokens] of one reply."""
    cached = None
    raw = b"".join(conn.body)
    marker = raw.find(b'"cached_tokens":')
    if marker >= 0:
        tail = raw[marker + 16 : marker + 40].lstrip()
        digits = tail[: len(tail) - len(tail.lstrip(b"0123456789"))]
        cached = int(digits) if digits else None
    model = conn.headers.get(b"x-orca-resolved-model", b"").decode()
    tier = conn.headers.get(b"x-orca-session-tier", b"").decode()
    return [sid, model, tier, cached]


async def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    watch: dict[str, int] = spec.get("watch", {})
    results: list[dict[str, Any]] = []
    best: dict[str, float] = {}
    flat: dict[str, int] = {}
    serial = 0
    for ph in spec["phases"]:
        group = ph.get("group")
        if group is not None and flat.get(group, 0) >= 2:
            continue  # the sweep already plateaued
        phase = _Phase(ph)
        conc = int(ph["concurrency"])
        warmup = int(ph.get("warmup", 0))
        if warmup:
            ph["_serial"] = serial
            await _run(phase, conc, warmup, max(2.0, ph.get("duration", 10.0)), record=False)
            serial += warmup
        ph["_serial"] = serial
        cpu0 = _cpu_self()
        w0 = {k: _cpu_pid(p) for k, p in watch.items()}
        out = await _run(
            phase, conc, int(ph.get("requests", 10**9)), float(ph.get("duration", 10.0)), True
        )
        serial += len(out["latency_us"]) + out["errors"]
        cpu = _cpu_self() - cpu0
        count = len(out["latency_us"])
        out.update(
            label=ph.get("label", ""),
            concurrency=conc,
            stream=bool(ph.get("stream", False)),
            count=count,
            rps=count / out["elapsed_s"] if out["elapsed_s"] > 0 else 0.0,
            loadgen_cpu_s=cpu,
            watch_cpu_s={k: _cpu_pid(p) - w0[k] for k, p in watch.items()},
            group=group,
        )
        results.append(out)
        if group is not None:
            if out["rps"] > best.get(group, 0.0) * FLAT_GAIN:
                best[group] = out["rps"]
                flat[group] = 0
            else:
                flat[group] = flat.get(group, 0) + 1
    return {"phases": results}


def main() -> int:
    spec = json.loads(sys.stdin.read())
    if spec.get("cpu") is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(spec["cpu"])})
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    result = asyncio.run(run_spec(spec))
    # To a file, not stdout: the event loop may leave stdout non-blocking, and a
    # large result written to a full pipe would then be cut short.
    Path(sys.argv[1]).write_text(json.dumps(result))
    return 0


def run_loadgen(spec: dict[str, Any], timeout: float = 1800.0) -> dict[str, Any]:
    """Run the load generator as its own process and return its parsed result."""
    with tempfile.TemporaryDirectory(prefix="tiergate-loadgen-") as tmp:
        out = Path(tmp) / "result.json"
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), str(out)],
            input=json.dumps(spec).encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(
                f"loadgen failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}"
            )
        result: dict[str, Any] = json.loads(out.read_text())
    return result


if __name__ == "__main__":
    raise SystemExit(main())
