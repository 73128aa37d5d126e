"""Soak test: mixed agent sessions at a steady rate through two gateway processes
that share one Redis and one database, for minutes (CI) to hours (by hand).

Why: the unit and fault tests prove behaviour per request; a soak proves the
things that only show over time and across instances: no error that nobody
injected, no p99 creep, no memory growth, and exactly one usage row per request
the gateways served (flushed on SIGTERM).

    .venv/bin/python bench/soak.py --minutes 30            # the documented soak
    .venv/bin/python bench/soak.py --minutes 2 --out s.json

Everything runs on loopback: `tiergate sim` (small upstream latency), two
`tiergate serve --config` processes on the shared Redis under a unique key
prefix (deleted afterwards) and one fresh PostgreSQL database (dropped
afterwards; `--db sqlite` uses one SQLite file instead). Requests are bounded in
count (rate x duration) and time; the run stops by itself. Exit status 1 when a
target is missed: non-injected errors, usage rows != requests served, RSS
growth over the threshold, or an error logged by a gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak_load import TOKEN, Options, cpu_seconds, drive
from soak_report import RunFacts, build_report, checkout_commit, log_report, print_summary

ROUTER = "coding"


# ---- the stack: simulator, database, two gateways -------------------------------------


def _require_loopback(url: str) -> None:
    host = urlsplit(url).hostname or ""
    ok = host == "localhost"
    with contextlib.suppress(ValueError):
        ok = ok or ipaddress.ip_address(host).is_loopback
    if not ok:
        raise SystemExit(f"soak: {url.split('@')[-1]} is not a loopback address; refusing")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _model(upstream: str, tier: int, price: tuple[float, float]) -> dict[str, Any]:
    return {
        "upstream": upstream,
        "quality_tier": tier,
        "price": {"input": price[0], "output": price[1]},
    }


def gateway_config(sim_url: str, db_url: str, redis_url: str, prefix: str) -> dict[str, Any]:
    """Two channels on the simulator, one auto-escalating router, sticky tiers on Redis."""
    return {
        "server": {"cooldown_seconds": 10, "max_attempts": 3},
        "state": {"backend": "redis", "url": redis_url, "key_prefix": prefix},
        "database": {"url": db_url},
        "workspaces": [{"name": "soak", "tokens": [TOKEN], "escalation_share_cap_percent": 60}],
        "channels": [
            {
                "name": "oa",
                "type": "openai",
                "base_url": f"{sim_url}/v1",
                "keys": ["sk-soak-a", "sk-soak-b", "sk-soak-c"],
                "models": {
                    "openai/gpt-5-mini": _model("gpt-5-mini", 1, (0.25, 2.0)),
                    "openai/gpt-5": _model("gpt-5", 3, (1.25, 10.0)),
                },
            },
            {
                "name": "an",
                "type": "anthropic",
                "base_url": sim_url,
                "keys": ["ak-soak-a", "ak-soak-b"],
                "models": {"anthropic/claude-sonnet-4-5": _model("claude-sonnet-4-5", 3, (3, 15))},
            },
        ],
        "routers": [
            {
                "name": ROUTER,
                "allowed_models": ["openai/*", "anthropic/*"],
                "strategy": "gated_adaptive",
                "weak_pool": ["openai/gpt-5-mini"],
                "mid_pool": ["openai/gpt-5-mini"],
                "strong_pool": ["anthropic/claude-sonnet-4-5"],
                "default_model": "openai/gpt-5-mini",
                "escalation": {
                    "mode": "auto",
                    "share_cap_percent": 50,
                    "share_cap_basis": "requests",
                },
            }
        ],
        "session_tiers": {"mode": "sticky", "backend": "redis"},
    }


@dataclass
class Stack:
    tmp: Path
    opts: Options
    prefix: str = field(default_factory=lambda: f"soak:{uuid.uuid4().hex[:12]}:")
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    sim_url: str = ""
    urls: list[str] = field(default_factory=list)
    db_url: str = ""
    pg_db: str | None = None

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.tmp / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "tiergate", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )

    def start(self) -> None:
        port = _free_port()
        self.sim_url = f"http://127.0.0.1:{port}"
        sim_args = ["sim", "--port", str(port), "--latency-ms", str(self.opts.latency_ms)]
        self._spawn("sim", [*sim_args, "--tokens-per-second", str(self.opts.tokens_per_second)])
        if self.opts.db == "postgres":
            self.pg_db = f"tg_soak_{uuid.uuid4().hex[:12]}"
            asyncio.run(_pg(self.opts.postgres_url, f"CREATE DATABASE {self.pg_db}"))
            self.db_url = self.opts.postgres_url.rsplit("/", 1)[0] + f"/{self.pg_db}"
        else:
            self.db_url = f"sqlite:///{self.tmp / 'usage.db'}"
        cfg = gateway_config(self.sim_url, self.db_url, self.opts.redis_url, self.prefix)
        path = self.tmp / "gateway.yaml"
        path.write_text(yaml.safe_dump(cfg))
        # migrate once up front, as an operator would: two instances creating the
        # tables at the same moment on a fresh database would race
        subprocess.run(
            [sys.executable, "-m", "tiergate", "db", "migrate", "--url", self.db_url],
            check=True,
            capture_output=True,
        )
        for i in range(2):
            port = _free_port()
            self.urls.append(f"http://127.0.0.1:{port}")
            args = ["serve", "--config", str(path), "--port", str(port)]
            args += ["--spool", str(self.tmp / f"spool-{i}.jsonl")]
            env = {"SESSION_TIER_MODE": "sticky"}
            if self.opts.memtrace:  # tracemalloc growth report per gateway (memtrace.py)
                Path(self.opts.memtrace).mkdir(parents=True, exist_ok=True)
                env["TIERGATE_MEMTRACE"] = str(Path(self.opts.memtrace) / f"gw{i}.txt")
                env["TIERGATE_MEMTRACE_SECONDS"] = str(self.opts.memtrace_seconds)
            self._spawn(f"gw{i}", args, env)
        for name, url in [("sim", f"{self.sim_url}/_sim/health")] + [
            (f"gw{i}", f"{u}/readyz") for i, u in enumerate(self.urls)
        ]:
            _wait_ready(url, self.procs[name], self.tmp / f"{name}.log")

    def gateway_pids(self) -> list[int]:
        return [self.procs[f"gw{i}"].pid for i in range(2)]

    def stop_gateways(self) -> list[int | None]:
        """SIGTERM both (graceful: drain and flush), then wait for them to exit."""
        for i in range(2):
            self.procs[f"gw{i}"].send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for i in range(2):
            try:
                codes.append(self.procs[f"gw{i}"].wait(timeout=60))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        import redis

        client = redis.Redis.from_url(self.opts.redis_url)
        keys = list(client.scan_iter(f"{self.prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])
        client.close()
        if self.pg_db is not None:
            sql = f"DROP DATABASE IF EXISTS {self.pg_db} WITH (FORCE)"
            asyncio.run(_pg(self.opts.postgres_url, sql))


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    import urllib.request

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{log.stem} exited:\n{log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as r:
            if r.status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{log.stem} did not become ready at {url}")


async def _pg(url: str, sql: str) -> Any:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


def usage_request_ids(db_url: str) -> list[str]:
    """Every usage row's request id (after the gateways have exited and flushed)."""
    if db_url.startswith("sqlite:///"):
        import sqlite3

        with contextlib.closing(sqlite3.connect(db_url[len("sqlite:///") :])) as conn:
            return [r[0] for r in conn.execute("SELECT request_id FROM usage")]
    return [r["request_id"] for r in asyncio.run(_pg(db_url, "SELECT request_id FROM usage"))]


def redis_key_count(url: str, prefix: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return sum(1 for _ in client.scan_iter(f"{prefix}*", count=1000))
    finally:
        client.close()


def run(opts: Options) -> dict[str, Any]:
    for url in (opts.redis_url, opts.postgres_url):
        _require_loopback(url)
    with tempfile.TemporaryDirectory(prefix="tiergate-soak-") as tmp:
        stack = Stack(Path(tmp), opts)
        commit = checkout_commit()
        try:
            stack.start()
            pids = stack.gateway_pids()
            load, rss, sim = asyncio.run(drive(stack.urls, stack.sim_url, pids, opts))
            cpu = {n: cpu_seconds(p.pid) for n, p in stack.procs.items()}
            codes = stack.stop_gateways()
            facts = RunFacts(
                load=load,
                rss=rss,
                sim=sim,
                rows=usage_request_ids(stack.db_url),
                exit_codes=codes,
                redis_keys=redis_key_count(opts.redis_url, stack.prefix),
                logs=log_report(Path(tmp)),
                cpu_seconds=cpu,
                commit=commit,
            )
            report = build_report(opts, facts)
        finally:
            stack.close()
    return report


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    d = Options()
    p.add_argument("--minutes", type=float, default=d.minutes, help="duration (default 30)")
    p.add_argument("--rate", type=float, default=d.rate, help="requests per second (default 20)")
    p.add_argument(
        "--sessions", type=int, default=d.sessions, help="concurrent sessions (default 32)"
    )
    p.add_argument("--db", choices=["postgres", "sqlite"], default=d.db, help="usage database")
    p.add_argument(
        "--fault-every",
        type=float,
        default=d.fault_every,
        help="seconds between upstream faults the gateway retries (500, 429, mid-stream "
        "disconnect); 0 = none",
    )
    p.add_argument(
        "--reject-every",
        type=float,
        default=d.reject_every,
        help="seconds between upstream 400 rejections (client-visible, written by the "
        "upstream-failure path); 0 = none",
    )
    p.add_argument(
        "--latency-ms",
        type=float,
        default=d.latency_ms,
        help="simulated upstream time to first byte",
    )
    p.add_argument(
        "--rss-limit-mb",
        type=float,
        default=d.rss_limit_mb,
        help="allowed RSS growth (or --rss-limit-percent of it, whichever is larger)",
    )
    p.add_argument("--rss-limit-percent", type=float, default=d.rss_limit_percent)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--redis-url", default=os.environ.get("TIERGATE_TEST_REDIS_URL", d.redis_url))
    p.add_argument(
        "--postgres-url",
        default=os.environ.get("TIERGATE_TEST_POSTGRES_URL", d.postgres_url),
        help="an existing database to CREATE/DROP the soak database from",
    )
    p.add_argument("--out", help="write the full report as JSON here")
    p.add_argument(
        "--memtrace",
        metavar="DIR",
        help="debug: run each gateway under tracemalloc and write its growing allocation "
        "sites to DIR/gw<i>.txt (src/tiergate/memtrace.py); slows the gateways",
    )
    p.add_argument(
        "--memtrace-seconds", type=float, default=d.memtrace_seconds, help="snapshot interval"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    if not (0 < a.minutes <= 24 * 60 and 0 < a.rate <= 500 and 1 <= a.sessions <= 1000):
        p.error("bounds: 0 < --minutes <= 1440, 0 < --rate <= 500, 1 <= --sessions <= 1000")
    return Options(
        minutes=a.minutes,
        rate=a.rate,
        sessions=a.sessions,
        db=a.db,
        fault_every=a.fault_every,
        reject_every=a.reject_every,
        latency_ms=a.latency_ms,
        rss_limit_mb=a.rss_limit_mb,
        rss_limit_percent=a.rss_limit_percent,
        seed=a.seed,
        redis_url=a.redis_url,
        postgres_url=a.postgres_url,
        out=a.out,
        memtrace=a.memtrace,
        memtrace_seconds=a.memtrace_seconds,
        progress=not a.no_progress,
    )


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    report = run(opts)
    if opts.out:
        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.out).write_bytes(
            orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
        )
    print_summary(report)
    return 0 if report["verdict"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
