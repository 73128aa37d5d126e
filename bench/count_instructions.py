"""Instructions per request of several trees of the gateway, counted by callgrind.

    .venv/bin/python bench/count_instructions.py [--trees 854432f HEAD .]
        [--variant agent] [--state redis] [--body-kb 0] [--repeat 1]

Why: timings on a shared VM drift by more than the regressions worth catching
(one tree's 12 KB agent request moved by 2x between sessions), so each session
compared its tree only with the one before it, and a 13 % growth since the
README's headline tree went unseen (docs/performance.md, "Session 17").
Instruction counts do not drift: this compares any trees in one command.

For each tree, `git archive <rev> src` is unpacked into a temporary folder (`.`
is the working tree's own `src/`, uncommitted changes included), and THIS
checkout's `bench/profile_request.py --mode count` drives that `src/` through
`PYTHONPATH` under `valgrind --tool=callgrind`, twice: `--low` and `--high`
requests after the same warm-up. (count(high) - count(low)) / (high - low) is
the instructions of one request, start-up and warm-up cancelled out. One
simulator process (this checkout's) serves every run; it runs outside valgrind.

Read with care: callgrind counts the whole gateway process, background tasks
included, and under valgrind a timer-driven task (the virtual-keys poll, the
usage recorder's flush) runs many times per request more than when served.
One tree's runs spread by about 50 K instructions at 12 KB; `--repeat` runs
each tree again, trees alternating.

`--quick` (the smoke test) runs the same steps without valgrind and reports no
count. Needs valgrind (`apt-get install valgrind`) otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from tqdm import tqdm

import common

ROOT = Path(__file__).resolve().parents[1]
#: The commit whose run the README's headline performance table is (session 5).
HEADLINE_TREE = "854432f"
WORKING_TREE = "."
_TOTAL = re.compile(rb"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def instructions(callgrind_out: Path) -> int:
    """The total instruction count (Ir) of a callgrind output file."""
    m = _TOTAL.search(callgrind_out.read_bytes())
    if m is None:
        raise ValueError(f"{callgrind_out}: no summary or totals line")
    return int(m.group(1))


def describe(rev: str) -> tuple[str, str]:
    """(short commit, subject) of a revision; the working tree is HEAD plus changes."""
    if rev == WORKING_TREE:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--", "src")
        return head + ("+changes" if dirty else ""), "the working tree"
    return _git("rev-parse", "--short", rev), _git("log", "-1", "--format=%s", rev)[:70]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def unpack(rev: str, into: Path) -> Path:
    """The `src/` of `rev` in a folder of its own (the working tree's own for `.`)."""
    if rev == WORKING_TREE:
        return ROOT / "src"
    archive = into / f"{rev}.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], stdout=fh, check=True)
    dest = into / rev
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return dest / "src"


def one_run(
    src: Path, requests: int, args: argparse.Namespace, sim_url: str, out: Path
) -> int | None:
    """Run `requests` counted requests of `src` (under callgrind unless --quick)."""
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "profile_request.py"),
        "--mode",
        "count",
        "--variant",
        args.variant,
        "--state",
        args.state,
        "--requests",
        str(requests),
        "--warmup",
        str(args.warmup),
        "--sim-url",
        sim_url,
    ]
    if args.body_kb:
        cmd += ["--body-kb", str(args.body_kb)]
    if args.tools != "body":
        cmd += ["--tools", args.tools]
    if not args.quick:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd]
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    proc = subprocess.run(cmd, capture_output=True, env=env, check=False)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).decode(errors="replace")[-1500:]
        raise RuntimeError(f"{src}: profile_request exited {proc.returncode}\n{tail}")
    return None if args.quick else instructions(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--trees",
        nargs="+",
        default=[HEADLINE_TREE, WORKING_TREE],
        help=f"revisions to compare, first is the reference ('.': the working tree; "
        f"default: {HEADLINE_TREE}, the README headline's tree, and '.')",
    )
    p.add_argument("--variant", default="agent", choices=sorted(common.VARIANT_HELP))
    p.add_argument("--state", default="redis", choices=["memory", "redis"])
    p.add_argument("--body-kb", type=int, default=0, help="request body size (0: the ~12 KB one)")
    p.add_argument(
        "--tools",
        default="body",
        choices=["body", "claude-code"],
        help="the body's own tools, or a Claude-Code-shaped list (bench/agent_tools.py)",
    )
    p.add_argument("--low", type=int, default=100, help="requests of the shorter run")
    p.add_argument("--high", type=int, default=400, help="requests of the longer run")
    p.add_argument("--warmup", type=int, default=200, help="requests before counting starts")
    p.add_argument("--repeat", type=int, default=1, help="runs per tree, trees alternating")
    p.add_argument("--quick", action="store_true", help="smoke test: no valgrind, tiny runs")
    args = p.parse_args(argv)
    if args.quick:
        args.low, args.high, args.warmup, args.repeat = 3, 6, 2, 1
    elif shutil.which("valgrind") is None:
        p.error("valgrind is not installed (apt-get install valgrind), or run --quick")
    if args.high <= args.low:
        p.error("--high must be above --low")
    info = common.machine_info()
    common.print_machine(info)
    work = Path(tempfile.mkdtemp(prefix="tiergate-count-"))
    sim = common.start_sim(work, None)
    counts: dict[str, list[float]] = {rev: [] for rev in args.trees}
    try:
        srcs = {rev: unpack(rev, work) for rev in args.trees}
        runs = [(r, rev) for r in range(args.repeat) for rev in args.trees]
        for r, rev in tqdm(runs, desc="callgrind runs", unit="tree", file=sys.stderr):
            low = one_run(srcs[rev], args.low, args, sim.url, work / f"cg.{r}.low")
            high = one_run(srcs[rev], args.high, args, sim.url, work / f"cg.{r}.high")
            if low is not None and high is not None:
                counts[rev].append((high - low) / (args.high - args.low))
    finally:
        sim.stop()
        shutil.rmtree(work, ignore_errors=True)
    rows: list[dict[str, Any]] = []
    reference = statistics.median(counts[args.trees[0]]) if counts[args.trees[0]] else None
    for rev in args.trees:
        commit, subject = describe(rev)
        median = statistics.median(counts[rev]) if counts[rev] else None
        change = None if median is None or not reference else median / reference - 1
        rows.append(
            {
                "tree": rev,
                "commit": commit,
                "subject": subject,
                "runs": counts[rev],
                "median": median,
                "change": change,
            }
        )
    body = f"{args.body_kb} KB" if args.body_kb else "~12 KB"
    if args.tools != "body":
        body += f", {args.tools} tools"
    print(f"\ninstructions per request: {args.variant}/{args.state}, {body} body")
    print("| tree | commit | subject | runs (M) | median (M) | against the first |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        runs_m = ", ".join(f"{c / 1e6:.3f}" for c in row["runs"]) or "-"
        median_m = "-" if row["median"] is None else f"{row['median'] / 1e6:.3f}"
        change_s = "-" if row["change"] is None else f"{row['change'] * 100:+.1f} %"
        print(
            f"| {row['tree']} | {row['commit']} | {row['subject']} | {runs_m} "
            f"| {median_m} | {change_s} |"
        )
    path = common.write_result(
        "count_instructions", {"machine": info, "args": vars(args), "trees": rows}
    )
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
