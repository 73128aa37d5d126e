"""Instructions and simulated cache misses per request of a *served* gateway, by callgrind.

    .venv/bin/python bench/count_served.py [--trees HEAD~1 .] [--turns 2,200]
        [--requests 20] [--variant agent] [--state redis]

Why: bench/count_instructions.py feeds the gateway's ASGI app in one process, so
what uvicorn, httptools and uvloop do with a body's bytes before the app sees
them is not in its count, and over HTTP that part grows with the body
(docs/performance.md, sessions 20-23). Timings on this VM cannot resolve it:
one tree's CPU per turn-200 request moved by 20 % between runs. This runs
`python -m tiergate serve`, exactly as deployed, under `valgrind
--tool=callgrind`, sends each turn's body `--warmup` times, zeroes the counters
(`callgrind_control -z`), sends it `--requests` more times over loopback HTTP and
dumps them (`callgrind_control -d`): the events of those requests alone,
start-up and warm-up left out.

Bodies are bench_bodies.py's whole-session replay turns (the generated agent
session, about 2.3 KB a turn: turn 2 is 16 KB, turn 200 is 466 KB), each sent
repeatedly on a session id of its own. For each tree, `git archive <rev> src` is
unpacked and put first on the gateway's PYTHONPATH (`.`: the working tree);
the simulator is this checkout's, outside valgrind, on the other core.

The cache model: valgrind simulates a first level and a last level. The last
level is set to this VM's per-core L2 (2 MB, 16-way; `--ll-bytes`), not the
260 MB shared L3, which would hold every body and miss nothing. The cycle
estimate is callgrind's: Ir + 10 x L1 misses + 100 x last-level misses. Like any
count, it leaves out the kernel (the socket copies) and what another process
on the machine does to the caches.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from tqdm import tqdm

import common
from bench_bodies import SESSION_HEADER, session_bodies, with_counter
from count_instructions import L1_MISSES, LL_MISSES, describe, estimated_cycles, events, unpack

#: This VM's L2 per core (lscpu: 4 MiB in 2 instances), 16-way, 64-byte lines.
DEFAULT_LL_BYTES = 2 * 1024 * 1024


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        epilog=__doc__.split("\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--trees", nargs="+", default=["."], help="revisions ('.' = working tree)")
    p.add_argument("--turns", default="2,200", help="comma list of session turns to send")
    p.add_argument("--requests", type=int, default=20, help="counted requests per turn")
    p.add_argument("--warmup", type=int, default=10, help="requests before the counters zero")
    p.add_argument("--variant", default="agent", choices=sorted(common.VARIANT_HELP))
    p.add_argument("--state", default="redis", choices=["memory", "redis"])
    p.add_argument("--ll-bytes", type=int, default=DEFAULT_LL_BYTES, help="modelled last level")
    p.add_argument("--keep", type=Path, help="keep the callgrind dumps here (callgrind_annotate)")
    p.add_argument("--quick", action="store_true", help="no valgrind, 2 requests (smoke test)")
    return p.parse_args(argv)


def post(client: httpx.Client, url: str, body: bytes, session: str) -> None:
    headers = {
        "authorization": f"Bearer {common.TOKEN}",
        "content-type": "application/json",
        SESSION_HEADER: session,
    }
    r = client.post(url + "/v1/chat/completions", content=body, headers=headers)
    if r.status_code != 200:
        raise RuntimeError(f"gateway answered {r.status_code}: {r.text[:300]}")


def one_tree(
    src: Path, name: str, args: argparse.Namespace, sim: common.Proc, work: Path
) -> dict[int, dict[str, float]]:
    """Events per request of each turn's body, one gateway under callgrind."""
    prefix = common.new_prefix("served")
    cfg = common.gateway_config(sim.url, args.variant, state=args.state, prefix=prefix)
    config = work / f"{name}.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    port = common.free_port()
    out = work / f"cg.{name}"
    cmd = [common.PYTHON, "-m", "tiergate", "serve", "--config", str(config), "--port", str(port)]
    cmd += ["--spool", str(work / f"{name}.spool"), "--log-level", "WARNING"]
    if not args.quick:
        model = f"--LL={args.ll_bytes},16,64"
        valgrind = ["valgrind", "--tool=callgrind", "--cache-sim=yes", model]
        cmd = [*valgrind, f"--callgrind-out-file={out}", *cmd]
    env = {"PYTHONPATH": str(src), "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    gw_cpu, _ = common.cpu_layout()
    gw = common.spawn(name, cmd, port=port, workdir=work, cpu=gw_cpu, env=env, ready_timeout=600)
    turns = [int(t) for t in args.turns.split(",")]
    bodies, _ = session_bodies([], turns)
    results: dict[int, dict[str, float]] = {}
    try:
        with httpx.Client(timeout=600) as client:
            for turn in turns:
                body = with_counter(bodies[turn], common.MODELS[args.variant]).encode()
                session = f"{name}-{turn}-{os.getpid()}"
                for _ in range(args.warmup):
                    post(client, gw.url, body, session)
                if not args.quick:
                    _control("-z", gw.pid)
                for _ in range(args.requests):
                    post(client, gw.url, body, session)
                if args.quick:
                    results[turn] = {"kb": len(body) / 1024}
                    continue
                before = set(work.glob(f"cg.{name}.*"))
                _control("-d", gw.pid)
                dump = _new_dump(work, name, before)
                counts = {k: v / args.requests for k, v in events(dump).items()}
                if args.keep is not None:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    shutil.copy(dump, args.keep / f"callgrind.{name}.turn{turn}")
                results[turn] = {"kb": len(body) / 1024, **counts}
    finally:
        gw.stop(timeout=120)
        if args.state == "redis":
            common.redis_cleanup(prefix)
    return results


def _control(flag: str, pid: int) -> None:
    """callgrind_control: -z zeroes the counters, -d dumps them to a new file."""
    subprocess.run(["callgrind_control", flag, str(pid)], check=True, capture_output=True)


def _new_dump(work: Path, name: str, before: set[Path], wait: float = 60.0) -> Path:
    """The dump file `callgrind_control -d` just wrote (it names each dump .1, .2, ...)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        fresh = sorted(set(work.glob(f"cg.{name}.*")) - before)
        if fresh:
            time.sleep(0.5)  # let valgrind finish writing it
            return fresh[-1]
        time.sleep(0.2)
    raise RuntimeError("callgrind wrote no dump")


def row(tree: str, subject: str, turn: int, c: dict[str, float]) -> dict[str, Any]:
    if "Ir" not in c:
        return {"tree": tree, "turn": turn, "kb": c["kb"]}
    l1 = sum(c.get(e, 0) for e in L1_MISSES)
    ll = sum(c.get(e, 0) for e in LL_MISSES)
    cycles = estimated_cycles(c)
    return {"tree": tree, "subject": subject, "turn": turn, "kb": c["kb"], "Ir": c["Ir"]} | {
        "l1": l1,
        "ll": ll,
        "cycles": cycles,
    }


def report(rows: list[dict[str, Any]]) -> None:
    print("\n| tree | turn | body | instructions | L1 misses | last-level misses | est. cycles |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "Ir" not in r:
            print(f"| {r['tree']} | {r['turn']} | {r['kb']:.0f} KB | (quick: not counted) | | | |")
            continue
        cells = [r["tree"], r["turn"], f"{r['kb']:.0f} KB", f"{r['Ir'] / 1e6:.3f} M"]
        cells += [f"{r['l1'] / 1e3:.1f} K", f"{r['ll'] / 1e3:.1f} K", f"{r['cycles'] / 1e6:.3f} M"]
        print("| " + " | ".join(map(str, cells)) + " |")
    by_tree: dict[str, dict[int, dict[str, Any]]] = {}
    for r in rows:
        by_tree.setdefault(r["tree"], {})[r["turn"]] = r
    for tree, turns in by_tree.items():
        first, last = min(turns), max(turns)
        if first != last and "Ir" in turns[first]:
            a, b = turns[first], turns[last]
            ir, cycles = b["Ir"] / a["Ir"], b["cycles"] / a["cycles"]
            print(
                f"{tree}: turn {last} / turn {first}: instructions {ir:.2f}x, cycles {cycles:.2f}x"
            )


def start_run(state: str, tag: str) -> tuple[dict[str, Any], Path] | None:
    """The machine described and printed, and a fresh work folder; None (and why,
    on stderr) when the state backend is Redis and Redis is not reachable."""
    if state == "redis" and not common.redis_available():
        print(f"Redis not reachable at {common.REDIS_URL}", file=sys.stderr)
        return None
    info = common.machine_info()
    common.print_machine(info)
    return info, Path(tempfile.mkdtemp(prefix=f"tiergate-{tag}-"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.requests, args.warmup = 2, 1
    elif not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        print("valgrind (with callgrind_control) is not installed", file=sys.stderr)
        return 2
    started = start_run(args.state, "count-served")
    if started is None:
        return 2
    info, work = started
    _, load_cpu = common.cpu_layout()
    sim = common.start_sim(work, load_cpu)
    rows: list[dict[str, Any]] = []
    try:
        for i, rev in enumerate(tqdm(args.trees, desc="trees", unit="tree")):
            tree, subject = describe(rev)
            src = unpack(rev, work)
            counts = one_tree(src, f"t{i}", args, sim, work)
            rows += [row(tree, subject, turn, c) for turn, c in counts.items()]
    finally:
        sim.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(rows)
    path = common.write_result("count_served", {"machine": info, "args": vars(args), "rows": rows})
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
