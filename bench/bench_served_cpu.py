"""Served CPU per request of several trees, alternated block by block, per session turn.

    .venv/bin/python bench/bench_served_cpu.py [--trees 044154c .] [--turns 2,200]
        [--requests 300] [--rounds 10]

Why: bench/count_served.py counts instructions and simulated cache misses of a
served gateway, which do not drift but do not say what the work costs in time:
valgrind counts a copy by the byte and prices every miss of its modelled level
alike. This serves each tree as deployed (`python -m tiergate serve`, agent
router on Redis by default, all pinned to the gateway's core, one at a time
busy) and reads the CPU time the kernel charged each gateway's threads
(`/proc/<pid>/task/*/schedstat`, nanoseconds, not 10 ms ticks) over blocks of
`--requests` requests of one turn's body. Blocks alternate between the trees,
and the first tree of each round alternates, so the VM's drift lands on all of
them alike; the median block of each tree and turn is reported with the spread.

Bodies are bench_bodies.py's whole-session replay turns (the generated agent
session: turn 2 is 17 KB, turn 200 is 466 KB), each tree's on a session id of
its own, warmed up before each block.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
from typing import Any

import httpx
from tqdm import tqdm

import common
from bench_bodies import session_bodies, with_counter
from count_instructions import describe, unpack
from count_served import post, start_run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        epilog=__doc__.split("\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--trees", nargs="+", default=["HEAD", "."], help="revisions ('.' = working tree)"
    )
    p.add_argument("--turns", default="2,200", help="comma list of session turns to send")
    p.add_argument("--requests", type=int, default=300, help="requests per block")
    p.add_argument("--rounds", type=int, default=10, help="blocks per tree and turn")
    p.add_argument("--variant", default="agent", choices=sorted(common.VARIANT_HELP))
    p.add_argument("--state", default="redis", choices=["memory", "redis"])
    p.add_argument("--quick", action="store_true", help="2 rounds of 5 requests (smoke test)")
    return p.parse_args(argv)


def cpu_ns(pid: int) -> int:
    """CPU time the kernel charged every thread of `pid`, in nanoseconds."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
            total += int(fh.read().split()[0])
    return total


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.requests, args.rounds = 5, 2
    started = start_run(args.state, "served-cpu")
    if started is None:
        return 2
    info, work = started
    gw_cpu, load_cpu = common.cpu_layout()
    turns = [int(t) for t in args.turns.split(",")]
    bodies, _ = session_bodies([], turns)
    sim = common.start_sim(work, load_cpu)
    gateways: dict[str, common.Proc] = {}
    prefixes: list[str] = []
    blocks: dict[tuple[str, int], list[float]] = {}
    try:
        for i, rev in enumerate(args.trees):
            prefix = common.new_prefix("servedcpu")
            prefixes.append(prefix)
            cfg = common.gateway_config(sim.url, args.variant, state=args.state, prefix=prefix)
            env = {"PYTHONPATH": str(unpack(rev, work))}
            gateways[rev] = common.start_gateway(
                cfg, work, gw_cpu, name=f"gw{i}", log_level="WARNING", env=env
            )
        with httpx.Client(timeout=60) as client:
            for rnd in tqdm(range(args.rounds), desc="rounds", unit="round"):
                order = args.trees if rnd % 2 == 0 else args.trees[::-1]
                for turn in turns:
                    body = with_counter(bodies[turn], common.MODELS[args.variant]).encode()
                    for rev in order:
                        gw, session = gateways[rev], f"{rev}-{turn}-{os.getpid()}"
                        for _ in range(3):
                            post(client, gw.url, body, session)
                        before = cpu_ns(gw.pid)
                        for _ in range(args.requests):
                            post(client, gw.url, body, session)
                        used = (cpu_ns(gw.pid) - before) / args.requests / 1000
                        blocks.setdefault((rev, turn), []).append(used)
    finally:
        for gw in gateways.values():
            gw.stop()
        sim.stop()
        if args.state == "redis":
            for prefix in prefixes:
                common.redis_cleanup(prefix)
        shutil.rmtree(work, ignore_errors=True)
    rows = report(args, turns, blocks)
    path = common.write_result("served_cpu", {"machine": info, "args": vars(args), "rows": rows})
    print(f"\nJSON: {path}")
    return 0


def report(
    args: argparse.Namespace, turns: list[int], blocks: dict[tuple[str, int], list[float]]
) -> list[dict[str, Any]]:
    rows = []
    print("\n| tree | turn | median CPU us/request | blocks (min-max) |")
    print("|---|---|---|---|")
    for rev in args.trees:
        tree = describe(rev)[0]
        for turn in turns:
            got = blocks[(rev, turn)]
            median = statistics.median(got)
            rows.append({"tree": tree, "turn": turn, "median_us": median, "blocks_us": got})
            print(f"| {tree} | {turn} | {median:,.0f} | {min(got):,.0f}-{max(got):,.0f} |")
    if len(turns) > 1:
        first, last = turns[0], turns[-1]
        for rev in args.trees:
            ratio = statistics.median(blocks[(rev, last)]) / statistics.median(blocks[(rev, first)])
            print(f"{describe(rev)[0]}: turn {last} / turn {first} = {ratio:.2f}x")
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
