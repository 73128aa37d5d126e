"""Where the gateway's time goes: py-spy samples one gateway process under load.

Starts the simulator and one gateway (`agent` variant by default: router +
session affinity + escalation, memory state), drives it with the load
generator, and samples it with py-spy for the same window. Prints the top
functions by self time and by inclusive time, as a share of busy samples, and
the share per source area (routing, formats, HTTP server, upstream client ...).

py-spy is a benchmark tool, not a project dependency:
    .venv/bin/pip install py-spy
Run: .venv/bin/python bench/profile_gateway.py [--variant agent] [--seconds 15]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import common
from loadgen import run_loadgen

AREAS = (
    ("tiergate/routing/", "tiergate routing (decide)"),
    ("tiergate/gateway/", "tiergate gateway (pipeline, planner)"),
    ("tiergate/formats/", "tiergate formats (parse/render)"),
    ("tiergate/providers/client.py", "tiergate upstream HTTP client"),
    ("tiergate/providers/exchange.py", "tiergate upstream HTTP client"),
    ("tiergate/providers/pool.py", "tiergate upstream HTTP client"),
    ("tiergate/providers/", "tiergate providers (upstream adapters)"),
    ("tiergate/state/resp.py", "tiergate Redis client"),
    ("tiergate/state/", "tiergate state store"),
    ("tiergate/core/", "tiergate core model/tokens"),
    ("tiergate/", "tiergate other"),
    ("starlette/", "starlette"),
    ("uvicorn/", "uvicorn"),
    ("aiohttp/", "aiohttp"),
    ("httptools/", "httptools"),
    ("redis/", "redis-py"),
    ("logging/", "logging"),
    ("asyncio/", "asyncio"),
)


def parse_collapsed(text: str) -> list[tuple[list[str], int]]:
    """py-spy --format raw: 'frame;frame;...;leaf count' per line (root first)."""
    stacks = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def area_of(frame: str) -> str:
    for needle, name in AREAS:
        if needle in frame:
            return name
    return "other (stdlib, C, interpreter)"


def summarize(stacks: list[tuple[list[str], int]], top: int) -> dict[str, Any]:
    total = sum(c for _, c in stacks) or 1
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    roots: Counter[str] = Counter()
    for frames, count in stacks:
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        self_time[frames[-1]] += count
        areas[area_of(frames[-1])] += count
        roots[frames[0]] += count
        for f in set(frames):
            if "tiergate/" in f and "tiergate/__main__" not in f and "tiergate/cli" not in f:
                inclusive[f] += count

    def rows(c: Counter[str]) -> list[list[Any]]:
        return [[f, round(100 * n / total, 1)] for f, n in c.most_common(top)]

    return {
        "samples": total,
        "self": rows(self_time),
        "inclusive": rows(inclusive),
        "areas": [[a, round(100 * n / total, 1)] for a, n in areas.most_common()],
        "roots": [[r, round(100 * n / total, 1)] for r, n in roots.most_common(5)],
    }


def short(frame: str) -> str:
    """'fn (/long/path/site-packages/pkg/mod.py:12)' -> 'fn (pkg/mod.py:12)'."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    return f"{name} ({where})" if where else name


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--variant", default="agent", choices=sorted(common.VARIANT_HELP))
    p.add_argument("--state", default="memory", choices=["memory", "redis"])
    p.add_argument("--stream", action="store_true", help="profile streaming requests")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--top", type=int, default=25)
    p.add_argument(
        "--body-kb", type=int, default=0, help="grow the request to this many KB of agent history"
    )
    p.add_argument("--native", action="store_true", help="py-spy --native: C frames too")
    p.add_argument("--keep", type=Path, help="also copy py-spy's raw collapsed stacks here")
    p.add_argument(
        "--py-spy", default=shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    )
    args = p.parse_args()
    if not Path(args.py_spy).exists():
        print("py-spy not found: .venv/bin/pip install py-spy", file=sys.stderr)
        return 2
    info = common.machine_info()
    common.print_machine(info)
    gw_cpu, load_cpu = common.cpu_layout()
    workdir = Path(tempfile.mkdtemp(prefix="tiergate-profile-"))
    prefix = common.new_prefix("profile")
    sim = common.start_sim(workdir, load_cpu)
    cfg = common.gateway_config(sim.url, args.variant, state=args.state, prefix=prefix)
    gw = common.start_gateway(cfg, workdir, gw_cpu)
    raw = workdir / "profile.txt"
    try:
        spy = subprocess.Popen(
            [
                args.py_spy,
                "record",
                "--pid",
                str(gw.pid),
                "--format",
                "raw",
                "--rate",
                str(args.rate),
                "--duration",
                str(int(args.seconds) + 2),
                "--output",
                str(raw),
                # py-spy reads native stacks only with the process paused per sample
                *(["--native"] if args.native else ["--nonblocking"]),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        model = common.MODELS[args.variant]
        phase = {
            "label": "profile",
            "ports": [int(gw.url.rsplit(":", 1)[1])],
            "headers": {"authorization": f"Bearer {common.TOKEN}"},
            "body": json.dumps(common.agent_body(model, stream=args.stream, pad_kb=args.body_kb)),
            "session_header": "x-orcarouter-session-id" if args.variant == "agent" else None,
            "session_prefix": uuid.uuid4().hex[:8],
            "concurrency": args.concurrency,
            "requests": 10**9,
            "duration": args.seconds,
            "warmup": 0,
        }
        res = run_loadgen({"cpu": load_cpu, "watch": {"gateway": gw.pid}, "phases": [phase]})[
            "phases"
        ][0]
        _, err = spy.communicate(timeout=args.seconds + 30)
        if spy.returncode != 0 or not raw.exists():
            print(f"py-spy failed: {err.decode()[-1500:]}", file=sys.stderr)
            return 1
    finally:
        gw.stop()
        sim.stop()
        if args.state == "redis":
            common.redis_cleanup(prefix)
    if args.keep:
        shutil.copy(raw, args.keep)
    summary = summarize(parse_collapsed(raw.read_text()), args.top)
    gw_us = res["watch_cpu_s"]["gateway"] / max(1, res["count"]) * 1e6
    print(
        f"\nload: {res['count']} requests, {res['rps']:.0f} req/s at c={args.concurrency}, "
        f"gateway CPU {gw_us:.0f} us/request; {summary['samples']} busy samples\n"
    )
    print("## Share of gateway busy time by area (leaf frame)\n")
    print(common.table(["area", "%"], summary["areas"]))
    print("\n## Top functions by self time\n")
    print(common.table(["function", "% self"], [[short(f), v] for f, v in summary["self"]]))
    print("\n## tiergate functions by inclusive time\n")
    print(common.table(["function", "% incl"], [[short(f), v] for f, v in summary["inclusive"]]))
    print("\n## Stack roots (stacks py-spy could not unwind to the top start mid-way)\n")
    print(common.table(["root frame", "%"], [[short(f), v] for f, v in summary["roots"]]))
    path = common.write_result(
        "profile",
        {
            "machine": info,
            "args": vars(args),
            "load": {k: v for k, v in res.items() if not k.endswith("_us")},
            "gateway_cpu_us_per_request": gw_us,
            **summary,
        },
    )
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
