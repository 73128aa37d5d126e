"""The soak test's load: sessions driven at a steady rate, each answer checked.

A depth-one token bucket paces every send across all workers, so the rate stays
steady (no bursts, no catch-up) whatever the latency; a worker owns one session at
a time and alternates its turns between the two gateway instances. Faults are
armed on the simulator on a timer; errors seen while any were armed and that the
gateway attributes to the upstream count as injected.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from tqdm import tqdm

import soak_wire
from soak_sessions import Step, new_session

TOKEN = "tg-soak-token"


@dataclass(frozen=True)
class Options:
    minutes: float = 30.0
    rate: float = 20.0
    sessions: int = 32
    db: str = "postgres"
    fault_every: float = 20.0
    reject_every: float = 60.0
    latency_ms: float = 10.0
    tokens_per_second: float = 2000.0
    rss_limit_mb: float = 20.0
    rss_limit_percent: float = 10.0
    seed: int = 1
    redis_url: str = "redis://127.0.0.1:6379/0"
    postgres_url: str = "postgresql://postgres@127.0.0.1:5432/test"
    out: str | None = None
    memtrace: str | None = None  # a directory: tracemalloc reports per gateway
    memtrace_seconds: float = 60.0
    progress: bool = True


@dataclass(slots=True)
class Result:
    t: float  # seconds since the run started
    latency: float
    instance: int
    kind: str
    stream: bool
    status: int
    error: str | None  # None = a good answer
    injected: bool
    row_expected: bool
    request_id: str | None
    tier: str | None
    wire: str = soak_wire.CHAT


class Pacer:
    """A token bucket of depth one: at most `rate` sends per second, no bursts, at
    most `limit` sends in all, none after `deadline`."""

    def __init__(self, rate: float, deadline: float, limit: int) -> None:
        self.interval = 1.0 / rate
        self.deadline = deadline
        self.left = limit
        self.next = time.monotonic()
        self.lock = asyncio.Lock()

    async def take(self) -> bool:
        async with self.lock:
            now = time.monotonic()
            if self.next > now:
                await asyncio.sleep(self.next - now)
                now = time.monotonic()
            if now >= self.deadline or self.left <= 0:
                return False
            self.left -= 1
            # keep the long-run rate exact (sleep overshoot is not lost), but bank
            # at most one slot after an idle spell: no bursts
            self.next = max(self.next, now - self.interval) + self.interval
            return True


@dataclass(slots=True)
class Answer:
    status: int  # 0 = no HTTP answer (timeout, connection error)
    error: str | None = None  # None = a good answer, so far as the transport tells
    upstream: bool = False  # the gateway blames the upstream (and writes a usage row)
    row_expected: bool = False
    request_id: str | None = None
    message: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


async def send(http: aiohttp.ClientSession, url: str, step: Step) -> Answer:
    """One request in the step's wire format, read to the end (a stream to its last
    event), its answer as one Chat Completions assistant message."""
    wire = step.wire
    headers = {**step.headers}
    if wire == soak_wire.ANTHROPIC:  # as the Anthropic SDK sends it
        headers |= {"x-api-key": TOKEN, "anthropic-version": "2023-06-01"}
    else:
        headers["authorization"] = f"Bearer {TOKEN}"
    body = soak_wire.render(wire, step.body)
    try:
        async with http.post(f"{url}{soak_wire.PATHS[wire]}", json=body, headers=headers) as r:
            hdrs = {k.lower(): v for k, v in r.headers.items()}
            ans = Answer(r.status, request_id=hdrs.get("x-orca-request-id"), headers=hdrs)
            if r.status != 200:
                code = soak_wire.error_code(wire, orjson.loads(await r.read()))
                # pipeline.py writes a usage row for every authenticated request,
                # served, failed upstream or refused (only a 401 has no row)
                ans.upstream = code == "upstream_error"
                ans.row_expected = r.status != 401
                ans.error = f"http_{r.status}:{code}"
                return ans
            ans.row_expected = True
            if body.get("stream"):
                ans.message, ans.error = await _read_stream(r, wire)
                ans.upstream = ans.error == "stream_error"
            else:
                ans.message = _whole(wire, orjson.loads(await r.read()))
            return ans
    except TimeoutError:
        return Answer(0, "timeout")
    except (aiohttp.ClientError, orjson.JSONDecodeError, KeyError, IndexError) as exc:
        return Answer(0, f"client:{type(exc).__name__}")


def _whole(wire: str, answer: dict[str, Any]) -> dict[str, Any]:
    if wire == soak_wire.ANTHROPIC:
        return soak_wire.anthropic_message(answer)
    if wire == soak_wire.RESPONSES:
        return soak_wire.responses_message(answer["output"])
    msg: dict[str, Any] = answer["choices"][0]["message"]
    return msg


async def _read_stream(r: aiohttp.ClientResponse, wire: str) -> tuple[dict[str, Any], str | None]:
    if wire == soak_wire.CHAT:
        return await _read_chat_stream(r)
    fold = (
        soak_wire.AnthropicStream() if wire == soak_wire.ANTHROPIC else soak_wire.ResponsesStream()
    )
    async for raw in r.content:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        fold.feed(orjson.loads(line[5:].strip()))
        if fold.error:
            return {}, "stream_error"
        if fold.done:
            return fold.message(), None
    return {}, "stream_truncated"


async def _read_chat_stream(r: aiohttp.ClientResponse) -> tuple[dict[str, Any], str | None]:
    """Accumulate an OpenAI SSE stream into one assistant message."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    done = False
    async for raw in r.content:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            done = True
            break
        chunk = orjson.loads(payload)
        if "error" in chunk:
            return {}, "stream_error"
        for choice in chunk.get("choices", []):
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                fn = tc.get("function") or {}
                call["id"] = tc.get("id") or call["id"]
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
    if not done:
        return {}, "stream_truncated"
    tool_calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for _, c in sorted(calls.items())
    ]
    return {"role": "assistant", "content": "".join(text) or None, "tool_calls": tool_calls}, None


@dataclass
class Load:
    urls: list[str]
    opts: Options
    t0: float
    pacer: Pacer
    results: list[Result] = field(default_factory=list)
    faults_armed: int = 0
    machine_load: list[tuple[float, float]] = field(default_factory=list)  # (t, loadavg 1 min)
    bar: Any = None

    async def worker(self, http: aiohttp.ClientSession, rng: random.Random, n: int) -> None:
        session = new_session(rng, n)
        while await self.pacer.take():
            step = session.next_step()
            if step is None:
                session = new_session(rng, n)
                step = session.next_step()
                assert step is not None
            instance = session.turns_sent % 2  # alternate instances turn by turn
            started = time.monotonic()
            ans = await send(http, self.urls[instance], step)
            latency = time.monotonic() - started
            error = ans.error
            if error is None:
                error = session.observe(step, ans.message, ans.headers)  # None when correct
            else:
                session.failed()
            self.results.append(
                Result(
                    t=started - self.t0,
                    latency=latency,
                    instance=instance,
                    kind=step.kind,
                    stream=bool(step.body.get("stream")),
                    status=ans.status,
                    error=error,
                    # blamed on the upstream while faults were being injected: the
                    # report checks there are no more of these than faults fired
                    injected=ans.upstream and error is not None and self.faults_armed > 0,
                    row_expected=ans.row_expected,
                    request_id=ans.request_id,
                    tier=ans.headers.get("x-orca-session-tier"),
                    wire=step.wire,
                )
            )
            if self.bar is not None:
                self.bar.update(1)
            if not session.alive:
                session = new_session(rng, n)

    async def arm_faults(
        self, sim_url: str, http: aiohttp.ClientSession, every: float, rules: list[dict[str, Any]]
    ) -> None:
        """Every `every` seconds arm the next rule (cycling) for one upstream call."""
        i = 0
        while True:
            await asyncio.sleep(every)
            async with http.post(
                f"{sim_url}/_sim/faults", json={**rules[i % len(rules)], "count": 1}
            ):
                pass
            self.faults_armed += 1
            i += 1


# Retried by the gateway on another key, invisible to the client unless the stream
# had already started (a disconnect after two chunks reaches the client as an error).
RETRIED_FAULTS: list[dict[str, Any]] = [
    {"kind": "status", "status": 500, "provider": "openai"},
    {"kind": "status", "status": 429, "retry_after": 1, "provider": "openai"},
    {"kind": "disconnect", "after_chunks": 2, "provider": "openai"},
]
# A request the provider rejects (400 is not retried): the client sees an upstream
# error and the gateway writes its usage row through the upstream-failure path.
REJECT_FAULTS: list[dict[str, Any]] = [
    {"kind": "status", "status": 400, "provider": "openai", "message": "Simulated rejection."}
]


def sample_rss(pids: list[int]) -> list[float]:
    """Resident set size of each process in MB, from /proc/<pid>/status."""
    out = []
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/status").read_text()
            kb = next(
                int(line.split()[1]) for line in text.splitlines() if line.startswith("VmRSS")
            )
            out.append(kb / 1024)
        except (OSError, StopIteration):
            out.append(float("nan"))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (/proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(
    urls: list[str], sim_url: str, pids: list[int], opts: Options
) -> tuple[Load, list[tuple[float, list[float]]], dict[str, Any]]:
    seconds = opts.minutes * 60
    t0 = time.monotonic()
    load = Load(urls, opts, t0, Pacer(opts.rate, t0 + seconds, math.ceil(opts.rate * seconds)))
    rss: list[tuple[float, list[float]]] = []
    timeout = aiohttp.ClientTimeout(total=60)
    conn = aiohttp.TCPConnector(limit=opts.sessions * 2)
    async with aiohttp.ClientSession(timeout=timeout, connector=conn) as http:
        if opts.progress:
            load.bar = tqdm(total=math.ceil(opts.rate * seconds), unit="req", smoothing=0.05)

        async def sampler() -> None:
            while True:
                now = time.monotonic() - t0
                rss.append((now, sample_rss(pids)))
                load.machine_load.append((now, os.getloadavg()[0]))  # to read latency by
                await asyncio.sleep(10)

        background = [asyncio.create_task(sampler())]
        for every, rules in (
            (opts.fault_every, RETRIED_FAULTS),
            (opts.reject_every, REJECT_FAULTS),
        ):
            if every > 0:
                background.append(asyncio.create_task(load.arm_faults(sim_url, http, every, rules)))
        rng = random.Random(opts.seed)
        workers = [load.worker(http, random.Random(rng.random()), n) for n in range(opts.sessions)]
        await asyncio.gather(*workers)
        rss.append((time.monotonic() - t0, sample_rss(pids)))
        for task in background:
            task.cancel()
        async with http.get(f"{sim_url}/_sim/stats") as r:
            sim_stats = orjson.loads(await r.read())["totals"]
        if load.bar is not None:
            load.bar.close()
    return load, rss, sim_stats
