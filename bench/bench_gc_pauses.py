"""Cycle-collector pauses of a served gateway replaying long agent sessions, per tree.

    .venv/bin/python bench/bench_gc_pauses.py [--trees e49306a .] [--sessions 40]
        [--turns 200] [--tool-kb 2] [--rounds 2]

Why: a full (generation 2) collection walks every object the collector tracks
and stalls every request in flight while it does. A gateway replaying 200-turn
sessions paid 47-106 ms for one such pass before `tiergate serve` froze its
start-up heap (src/tiergate/gc_policy.py; issue #30's p99 bar). Pauses are rare
(a few per 8,000 requests), so a latency percentile hides them; this bench times
every collection in the gateway itself.

Each tree (`.` is the working tree; a revision is `git archive`d) is served as
deployed (`python -m tiergate serve`, agent router on Redis, on the simulator),
with bench/gc_timer/sitecustomize.py on its PYTHONPATH: that times every
collection of the gateway process, whichever tree it runs, and writes them out
on SIGUSR1. One client sends `--sessions` sessions of `--turns` turns each
(bench_session_cpu.py's bodies: a tool result of `--tool-kb` KB a turn, each
session's outputs its own), in order, one request at a time. Trees alternate
for `--rounds` rounds. Reported per run: client latency p50 / p99 / max, and
per generation the passes made while serving (start-up's are left out), their
total and the longest.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

import bench_session_cpu
import common
from count_instructions import WORKING_TREE, describe, unpack

TIMER_DIR = Path(__file__).with_name("gc_timer")


def post(sock: socket.socket, body: bytes, session: str) -> None:
    """One chat completion on a kept-alive connection; raises unless it is a 200."""
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\n"
        b"Content-Type: application/json\r\nAuthorization: Bearer %s\r\n"
        b"x-orcarouter-session-id: %s\r\nContent-Length: %d\r\n\r\n"
    ) % (common.TOKEN.encode(), session.encode(), len(body))
    sock.sendall(head + body)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    status, _, rest = buf.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in status.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    if not status.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"gateway answered {status[:80]!r}: {rest[:300]!r}")


def pauses(log: Path, since: float) -> dict[str, dict[str, float]]:
    """Per generation: passes that ended after `since`, their total and longest (ms)."""
    out: dict[str, dict[str, float]] = {}
    for line in log.read_text().splitlines():
        gen, ms, ended = line.split()
        if float(ended) < since:
            continue
        row = out.setdefault(gen, {"passes": 0, "total_ms": 0.0, "max_ms": 0.0})
        row["passes"] += 1
        row["total_ms"] += float(ms)
        row["max_ms"] = max(row["max_ms"], float(ms))
    return out


def one_run(src: Path, args: argparse.Namespace, bodies: list[bytes], work: Path) -> dict[str, Any]:
    """Serve `src`, replay the sessions, and read the gateway's own collection log."""
    gw_cpu, load_cpu = common.cpu_layout()
    sim = common.start_sim(work, load_cpu)
    prefix = common.new_prefix("gc")
    cfg = common.gateway_config(sim.url, "agent", state="redis", prefix=prefix)
    log = work / f"gc-{time.monotonic_ns()}.txt"
    env = {"PYTHONPATH": f"{TIMER_DIR}{os.pathsep}{src}", "TIERGATE_BENCH_GC_LOG": str(log)}
    gw = common.start_gateway(cfg, work, gw_cpu, log_level="WARNING", env=env)
    latencies: list[float] = []
    try:
        sock = socket.create_connection((common.HOST, int(gw.url.rsplit(":", 1)[1])))
        since = time.time()
        for k in range(args.sessions):
            for body in bench_session_cpu.own_outputs(bodies):
                t0 = time.perf_counter()
                post(sock, body, f"{prefix}s{k}")
                latencies.append(time.perf_counter() - t0)
        sock.close()
        os.kill(gw.popen.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not log.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        by_gen = pauses(log, since)
    finally:
        gw.stop()
        sim.stop()
        common.redis_cleanup(prefix)
    latencies.sort()
    ms = [x * 1e3 for x in latencies]
    return {
        "requests": len(ms),
        "p50_ms": ms[len(ms) // 2],
        "p99_ms": ms[int(len(ms) * 0.99)],
        "max_ms": ms[-1],
        "gc": by_gen,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--trees", nargs="+", default=[WORKING_TREE], help="revisions; . = working")
    p.add_argument("--sessions", type=int, default=40, help="sessions replayed per run")
    p.add_argument("--turns", type=int, default=200, help="turns per session")
    p.add_argument("--tool-kb", type=float, default=2.0, help="KB per tool result")
    p.add_argument("--rounds", type=int, default=1, help="runs per tree, trees alternating")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 sessions of 12 turns")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.turns, args.no_progress = 2, 12, True
    if not common.redis_available():
        print(f"Redis is not reachable at {common.REDIS_URL}", file=sys.stderr)
        return 1
    info = common.machine_info()
    common.print_machine(info)
    bodies = bench_session_cpu.session("openai", args.turns, args.tool_kb, common.MODELS["agent"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        srcs = {rev: unpack(rev, work) for rev in args.trees}
        runs = [(r, rev) for r in range(args.rounds) for rev in args.trees]
        for r, rev in tqdm(runs, unit="run", disable=args.no_progress):
            result = one_run(srcs[rev], args, bodies, work)
            rows.append({"tree": rev, "commit": describe(rev)[0], "round": r, **result})
    print(
        "\n| tree | round | requests | latency p50 / p99 / max (ms) | gen 2 passes "
        "| their total (ms) | longest (ms) | gen 0 + 1 total (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        full = row["gc"].get("2", {"passes": 0, "total_ms": 0.0, "max_ms": 0.0})
        young = sum(row["gc"].get(g, {}).get("total_ms", 0.0) for g in "01")
        print(
            f"| {row['tree']} ({row['commit']}) | {row['round']} | {row['requests']} "
            f"| {row['p50_ms']:.2f} / {row['p99_ms']:.2f} / {row['max_ms']:.1f} "
            f"| {full['passes']:.0f} | {full['total_ms']:.0f} | {full['max_ms']:.1f} "
            f"| {young:.0f} |"
        )
    payload = {"machine": info, "args": vars(args), "runs": rows}
    print(f"\nJSON: {common.write_result('gc_pauses', payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
