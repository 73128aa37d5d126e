"""Why a small Redis call costs more at turn 200: the body's copies evict the caches.

    .venv/bin/python bench/bench_cache_pollution.py [--touch-kb 0,450,900,1800] [--calls 3000]

Issue #30's turn-200 profiles showed the gateway's small socket calls (the
Redis read and commit, a few hundred bytes each) growing with the body size
when nothing about them depends on it (docs/performance.md, sessions 12, 16
and 20). This isolates the effect: one process times the CPU of a Redis PING
round trip on a raw socket, each call preceded by copying `--touch-kb` KB of
fresh memory, as a request copies its body a few times before it commits.
Nothing else differs between the rows, so what a row adds over the first is
cache misses on the kernel's network path and the interpreter's own, paid by
code that never reads the body.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from urllib.parse import urlsplit

import common


def ping_cpu_us(sock: socket.socket, touch: bytes, copies: int, calls: int) -> float:
    """Mean process CPU (us) of one PING round trip, each after `copies` copies of `touch`."""
    total = 0
    for _ in range(calls):
        for _ in range(copies):
            bytes(bytearray(touch))  # a fresh buffer written and read, as a body copy is
        t0 = time.process_time_ns()
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        if sock.recv(64) != b"+PONG\r\n":
            raise RuntimeError("unexpected Redis reply")
        total += time.process_time_ns() - t0
    return total / calls / 1000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--touch-kb", default="0,450,900,1800", help="KB copied before each call")
    p.add_argument("--chunk-kb", type=int, default=450, help="size of one copy (a 200-turn body)")
    p.add_argument("--calls", type=int, default=3000, help="PING round trips per row and round")
    p.add_argument("--rounds", type=int, default=2, help="passes over the rows, alternating")
    p.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.calls, args.rounds = 50, 1
    info = common.machine_info()
    common.print_machine(info)
    url = urlsplit(common.REDIS_URL)
    try:
        sock = socket.create_connection((url.hostname or "127.0.0.1", url.port or 6379), 2)
    except OSError as err:
        print(f"Redis not reachable at {common.REDIS_URL}: {err}", file=sys.stderr)
        return 2
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    chunk = os.urandom(args.chunk_kb * 1024)
    touches = [int(x) for x in args.touch_kb.split(",") if x.strip()]
    runs: dict[int, list[float]] = {kb: [] for kb in touches}
    with sock:
        ping_cpu_us(sock, chunk, 0, min(200, args.calls))  # warm the path
        for _ in range(args.rounds):
            for kb in touches:
                copies = round(kb / args.chunk_kb) if args.chunk_kb else 0
                runs[kb].append(ping_cpu_us(sock, chunk, copies, args.calls))
    base = min(runs[touches[0]])
    rows = [
        [f"{kb:,} KB", " / ".join(f"{v:.1f}" for v in runs[kb]), f"{min(runs[kb]) - base:+.1f}"]
        for kb in touches
    ]
    print(common.table(["copied before each call", "CPU per PING, us (rounds)", "added"], rows))
    runs_by_kb = {str(kb): v for kb, v in runs.items()}
    path = common.write_result(
        "cache_pollution", {"machine": info, "args": vars(args), "cpu_us_by_touch_kb": runs_by_kb}
    )
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
