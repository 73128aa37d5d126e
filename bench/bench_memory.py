"""Memory: resident memory of one gateway process idle and after 100,000 distinct
sessions (memory state), and the bytes each session costs in Redis.

Sessions are driven through HTTP with short requests on the `agent` router
(affinity + escalation), one request per session, so each leaves its pins and
its tier state behind. RSS comes from /proc of the gateway process. In Redis,
MEMORY USAGE is summed over every key under the run's prefix, split into
per-session keys and the router's shared counters.

Run: .venv/bin/python bench/bench_memory.py [--quick] [--sessions 100000]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import common
from loadgen import run_loadgen

SHARED_KEY = re.compile(r"^(?:esc:(?:w?share|pctl|hist)|config:)")
HASHY = re.compile(r"[0-9a-f]{12,}")
DAY = re.compile(r":\d{8}(?=:|$)")


def short_body() -> str:
    return json.dumps(
        {
            "model": common.MODELS["agent"],
            "messages": [{"role": "user", "content": f"Say hi ({common.COUNTER})"}],
            "max_tokens": 8,
        }
    )


def drive(
    gw: common.Proc, sessions: int, concurrency: int, seconds: float, load_cpu: int | None
) -> dict[str, Any]:
    phase = {
        "label": "sessions",
        "ports": [int(gw.url.rsplit(":", 1)[1])],
        "headers": {"authorization": f"Bearer {common.TOKEN}"},
        "body": short_body(),
        "session_header": "x-orcarouter-session-id",
        "session_prefix": uuid.uuid4().hex[:10],
        "turns_per_session": 1,
        "concurrency": concurrency,
        "requests": sessions,
        "duration": seconds,
        "warmup": 0,
    }
    res = run_loadgen({"cpu": load_cpu, "watch": {"gateway": gw.pid}, "phases": [phase]})["phases"][
        0
    ]
    return {
        "requests": res["count"],
        "rps": res["rps"],
        "errors": res["errors"] + sum(v for k, v in res["statuses"].items() if k != "200"),
        "seconds": res["elapsed_s"],
    }


def settle_rss(proc: common.Proc, wait: float) -> int:
    """RSS after in-flight work and the recorder's flush (every 0.5 s) have settled."""
    time.sleep(wait)
    return proc.rss_bytes()


def memory_state(
    sim: common.Proc, workdir: Path, args: argparse.Namespace, cpus: tuple[int | None, int | None]
) -> dict[str, Any]:
    gw = common.start_gateway(
        common.gateway_config(sim.url, "agent"), workdir, cpus[0], name="gw-memory"
    )
    try:
        idle = settle_rss(gw, args.settle / 2)
        drive(gw, 20, 4, 30, cpus[1])
        warm = settle_rss(gw, args.settle)
        load = drive(gw, args.sessions, args.concurrency, args.seconds, cpus[1])
        after = settle_rss(gw, args.settle * 2)
    finally:
        gw.stop()
    n = max(1, load["requests"])
    return {
        "rss_idle_mb": idle / 2**20,
        "rss_after_20_requests_mb": warm / 2**20,
        "sessions": load["requests"],
        "rss_after_sessions_mb": after / 2**20,
        "bytes_per_session": (after - warm) / n,
        "load": load,
    }


def redis_state(
    sim: common.Proc, workdir: Path, args: argparse.Namespace, cpus: tuple[int | None, int | None]
) -> dict[str, Any]:
    import redis

    prefix = common.new_prefix("memory")
    cfg = common.gateway_config(sim.url, "agent", state="redis", prefix=prefix)
    gw = common.start_gateway(cfg, workdir, cpus[0], name="gw-redis")
    try:
        load = drive(gw, args.redis_sessions, args.concurrency, args.seconds, cpus[1])
        rss = settle_rss(gw, args.settle)
        r = redis.Redis.from_url(common.REDIS_URL)
        kinds: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        shared = per_session = keys = 0
        for key in r.scan_iter(match=prefix + "*", count=1000):
            size = int(r.memory_usage(key, samples=0) or 0)
            name = key.decode()[len(prefix) :]
            kind = DAY.sub(":<day>", HASHY.sub("*", name))
            kinds[kind][0] += 1
            kinds[kind][1] += size
            keys += 1
            if SHARED_KEY.match(name):
                shared += size
            else:
                per_session += size
        r.close()
    finally:
        gw.stop()
        common.redis_cleanup(prefix)
    n = max(1, load["requests"])
    return {
        "sessions": load["requests"],
        "keys": keys,
        "keys_per_session": sum(c for k, (c, _) in kinds.items() if not SHARED_KEY.match(k)) / n,
        "bytes_per_session": per_session / n,
        "shared_bytes": shared,
        "by_kind": {k: {"keys": c, "bytes": b} for k, (c, b) in sorted(kinds.items())},
        "gateway_rss_mb": rss / 2**20,
        "load": load,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sessions", type=int, default=100_000, help="distinct sessions, memory state")
    p.add_argument(
        "--redis-sessions", type=int, default=5_000, help="distinct sessions, Redis state"
    )
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--seconds", type=float, default=600.0, help="time bound per drive")
    p.add_argument("--settle", type=float, default=1.0, help="seconds to wait before reading RSS")
    p.add_argument("--no-redis", action="store_true")
    p.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.redis_sessions, args.concurrency, args.seconds = 200, 100, 16, 20.0
        args.settle = 0.2
    info = common.machine_info()
    common.print_machine(info)
    cpus = common.cpu_layout()
    workdir = Path(tempfile.mkdtemp(prefix="tiergate-memory-"))
    sim = common.start_sim(workdir, cpus[1])
    out: dict[str, Any] = {"machine": info, "args": vars(args)}
    try:
        out["memory"] = memory_state(sim, workdir, args, cpus)
        if not args.no_redis and common.redis_available():
            out["redis"] = redis_state(sim, workdir, args, cpus)
    finally:
        sim.stop()
    m = out["memory"]
    print("\n## One gateway process, memory state\n")
    print(
        common.table(
            [
                "RSS idle MB",
                "RSS after 20 requests MB",
                "sessions",
                "RSS after MB",
                "bytes/session",
                "req/s driving",
            ],
            [
                [
                    m["rss_idle_mb"],
                    m["rss_after_20_requests_mb"],
                    m["sessions"],
                    m["rss_after_sessions_mb"],
                    m["bytes_per_session"],
                    m["load"]["rps"],
                ]
            ],
        )
    )
    if "redis" in out:
        r = out["redis"]
        print("\n## Redis state size\n")
        print(
            common.table(
                [
                    "sessions",
                    "keys",
                    "keys/session",
                    "bytes/session",
                    "shared counter bytes",
                    "gateway RSS MB",
                ],
                [
                    [
                        r["sessions"],
                        r["keys"],
                        r["keys_per_session"],
                        r["bytes_per_session"],
                        r["shared_bytes"],
                        r["gateway_rss_mb"],
                    ]
                ],
            )
        )
        print()
        print(
            common.table(
                ["key kind", "keys", "bytes"],
                [[k, v["keys"], v["bytes"]] for k, v in r["by_kind"].items()],
            )
        )
    print(f"\nJSON: {common.write_result('memory', out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
