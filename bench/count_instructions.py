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

`--session-turns N` asks issue #30's turn-200 question instead: does a turn
late in a long session cost more than an early one? bench/bench_session_cpu.py
`--count` sends a warm-up session, then turns 1..OLD of a session and 1..YOUNG
of another (same shape, its own task), three times under callgrind: (N-10, 1),
(N, 1) and (N-10, 11). The differences with the first are turns N-9..N of the
long session and turns 2-11 of the young one, per turn. `--cache-sim` also
simulates the caches (valgrind's model of this CPU's L1 and last level): the
misses, and callgrind's cycle estimate Ir + 10 x L1 misses + 100 x LL misses,
say what the bytes a long body makes the gateway touch cost, which timings on
this VM could not separate from its drift (docs/performance.md, sessions 13-16).

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
_TOTAL = re.compile(rb"^(?:summary|totals):([ \d]+)$", re.MULTILINE)
_EVENTS = re.compile(rb"^events:([ \w]+)$", re.MULTILINE)
#: callgrind's cache events: first-level and last-level misses (instruction
#: fetch, data read, data write).
L1_MISSES = ("I1mr", "D1mr", "D1mw")
LL_MISSES = ("ILmr", "DLmr", "DLmw")


def events(callgrind_out: Path) -> dict[str, int]:
    """The totals of a callgrind output file, by event name (Ir; the cache
    events too when it ran with --cache-sim=yes)."""
    data = callgrind_out.read_bytes()
    names, total = _EVENTS.search(data), _TOTAL.search(data)
    if names is None or total is None:
        raise ValueError(f"{callgrind_out}: no events, or no summary or totals line")
    values = [int(v) for v in total.group(1).split()]
    return dict(zip(names.group(1).decode().split(), values, strict=False))


def instructions(callgrind_out: Path) -> int:
    """The total instruction count (Ir) of a callgrind output file."""
    return events(callgrind_out)["Ir"]


def estimated_cycles(counts: dict[str, float]) -> float:
    """callgrind's (and KCachegrind's) cycle estimate: an L1 miss 10 cycles, a
    last-level miss 100."""
    l1 = sum(counts.get(e, 0) for e in L1_MISSES)
    ll = sum(counts.get(e, 0) for e in LL_MISSES)
    return counts["Ir"] + 10 * l1 + 100 * ll


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


def request_command(requests: int, args: argparse.Namespace, sim_url: str) -> list[str]:
    """profile_request.py: the warm-up, then `requests` more of the same request."""
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
    return cmd


def session_command(old: int, young: int, args: argparse.Namespace, sim_url: str) -> list[str]:
    """bench_session_cpu.py --count: turns 1..old of one session, 1..young of another."""
    script = ROOT / "bench" / "bench_session_cpu.py"
    return [
        *(sys.executable, str(script), "--count", f"{old},{young}", "--sim-url", sim_url),
        *("--turns", str(args.session_turns)),
        *("--variant", args.variant, "--state", args.state, "--format", args.format),
        *("--upstream", args.upstream),
    ]


def one_run(src: Path, cmd: list[str], args: argparse.Namespace, out: Path) -> dict[str, int]:
    """Run `cmd` on `src`, under callgrind unless --quick: its event totals."""
    if not args.quick:
        sim = ["--cache-sim=yes"] if args.cache_sim else []
        cmd = ["valgrind", "--tool=callgrind", *sim, f"--callgrind-out-file={out}", *cmd]
    # One BLAS thread: OpenBLAS's idle workers spin on their own schedule, which
    # under callgrind's one-thread-at-a-time added up to 1.5 M instructions to
    # whichever run they happened to land in (the request path calls no BLAS).
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, env=env, check=False)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).decode(errors="replace")[-1500:]
        raise RuntimeError(f"{src}: {Path(cmd[-1]).name} run exited {proc.returncode}\n{tail}")
    return {} if args.quick else events(out)


def per_request(low: dict[str, int], high: dict[str, int], n: int) -> dict[str, float]:
    """The events of one of the `n` requests the high run made beyond the low one."""
    return {k: (high[k] - low[k]) / n for k in high if k in low}


def measure(
    src: Path, name: str, args: argparse.Namespace, sim_url: str, work: Path
) -> dict[str, dict[str, float]]:
    """One tree's events per request, by window: `request` (the same request
    repeated), or `young` (turns 2-11) and `old` (turns N-9..N) with --session-turns."""
    out = work / f"cg.{name}"
    if not args.session_turns:
        low = one_run(src, request_command(args.low, args, sim_url), args, Path(f"{out}.low"))
        high = one_run(src, request_command(args.high, args, sim_url), args, Path(f"{out}.high"))
        return {"request": per_request(low, high, args.high - args.low)} if high else {}
    n = args.session_turns
    runs = {"base": (n - 10, 1), "old": (n, 1), "young": (n - 10, 11)}
    got = {
        name: one_run(src, session_command(*turns, args, sim_url), args, Path(f"{out}.{name}"))
        for name, turns in runs.items()
    }
    if not got["base"]:
        return {}
    return {w: per_request(got["base"], got[w], 10) for w in ("young", "old")}


def summarize(windows: list[dict[str, dict[str, float]]], name: str, key: str) -> float | None:
    """The median over runs of one window's Ir (`key` "Ir") or cycle estimate ("cycles")."""
    values = [
        w[name]["Ir"] if key == "Ir" else estimated_cycles(w[name]) for w in windows if name in w
    ]
    return statistics.median(values) if values else None


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
    p.add_argument(
        "--session-turns",
        type=int,
        default=0,
        help="count turns N-9..N of an N-turn session against turns 2-11 (0: off)",
    )
    p.add_argument(
        "--format",
        default="openai",
        choices=["openai", "anthropic"],
        help="--session-turns: the client's wire format",
    )
    p.add_argument(
        "--upstream",
        default="openai",
        choices=["openai", "anthropic"],
        help="--session-turns: the upstream's API (the same models)",
    )
    p.add_argument("--cache-sim", action="store_true", help="also simulate the caches")
    p.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep the callgrind outputs here (for callgrind_annotate), named tree.run.window",
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per tree, trees alternating")
    p.add_argument("--quick", action="store_true", help="smoke test: no valgrind, tiny runs")
    args = p.parse_args(argv)
    if args.quick:
        args.low, args.high, args.warmup, args.repeat = 3, 6, 2, 1
        args.session_turns = min(args.session_turns, 22) if args.session_turns else 0
    elif shutil.which("valgrind") is None:
        p.error("valgrind is not installed (apt-get install valgrind), or run --quick")
    if args.high <= args.low:
        p.error("--high must be above --low")
    if args.session_turns and args.session_turns < 22:
        p.error("--session-turns must be at least 22 (two 10-turn windows apart)")
    info = common.machine_info()
    common.print_machine(info)
    work = Path(tempfile.mkdtemp(prefix="tiergate-count-"))
    sim = common.start_sim(work, None)
    counts: dict[str, list[dict[str, dict[str, float]]]] = {rev: [] for rev in args.trees}
    try:
        srcs = {rev: unpack(rev, work) for rev in args.trees}
        runs = [(r, rev) for r in range(args.repeat) for rev in args.trees]
        for r, rev in tqdm(runs, desc="callgrind runs", unit="tree", file=sys.stderr):
            name = f"{'working-tree' if rev == WORKING_TREE else rev}.{r}"
            got = measure(srcs[rev], name, args, sim.url, work)
            if got:
                counts[rev].append(got)
    finally:
        sim.stop()
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for out in work.glob("cg.*"):
                shutil.move(out, args.keep / out.name)
        shutil.rmtree(work, ignore_errors=True)
    rows = [row(rev, counts[rev], counts[args.trees[0]], args) for rev in args.trees]
    print_rows(rows, args)
    path = common.write_result(
        "count_instructions", {"machine": info, "args": vars(args), "trees": rows}
    )
    print(f"\nJSON: {path}")
    return 0


def row(
    rev: str,
    runs: list[dict[str, dict[str, float]]],
    reference: list[dict[str, dict[str, float]]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One tree's figures: medians over its runs, and against the first tree."""
    commit, subject = describe(rev)
    out: dict[str, Any] = {"tree": rev, "commit": commit, "subject": subject, "events": runs}
    if not args.session_turns:
        out["runs"] = [w["request"]["Ir"] for w in runs]
        out["median"] = summarize(runs, "request", "Ir")
        ref = summarize(reference, "request", "Ir")
        out["change"] = None if out["median"] is None or not ref else out["median"] / ref - 1
        if args.cache_sim:
            out["cycles"] = summarize(runs, "request", "cycles")
        return out
    for key in ("Ir", "cycles") if args.cache_sim else ("Ir",):
        young, old = summarize(runs, "young", key), summarize(runs, "old", key)
        out[key] = {"young": young, "old": old, "ratio": old / young if old and young else None}
    return out


def _m(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e6:.3f}"


def print_rows(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    if args.session_turns:
        n = args.session_turns
        route = f"{args.format} client, {args.upstream} upstream"
        print(f"\nper turn, {args.variant}/{args.state}, {route}, {n}-turn session")
        keys = ("Ir", "cycles") if args.cache_sim else ("Ir",)
        print(
            f"| tree | commit | measure | turns 2-11 (M) | turns {n - 9}-{n} (M) | late / early |"
        )
        print("|---|---|---|---|---|---|")
        names = {"Ir": "instructions", "cycles": "estimated cycles (cache model)"}
        for r in rows:
            for key in keys:
                f = r[key]
                ratio = "-" if f["ratio"] is None else f"{f['ratio']:.2f}"
                print(
                    f"| {r['tree']} | {r['commit']} | {names[key]} | {_m(f['young'])} "
                    f"| {_m(f['old'])} | {ratio} |"
                )
        return
    body = f"{args.body_kb} KB" if args.body_kb else "~12 KB"
    if args.tools != "body":
        body += f", {args.tools} tools"
    print(f"\ninstructions per request: {args.variant}/{args.state}, {body} body")
    cycles = " estimated cycles (M) |" if args.cache_sim else ""
    print(f"| tree | commit | subject | runs (M) | median (M) | against the first |{cycles}")
    print("|---|---|---|---|---|---|" + ("---|" if args.cache_sim else ""))
    for r in rows:
        runs_m = ", ".join(f"{c / 1e6:.3f}" for c in r["runs"]) or "-"
        change_s = "-" if r["change"] is None else f"{r['change'] * 100:+.1f} %"
        extra = f" {_m(r.get('cycles'))} |" if args.cache_sim else ""
        print(
            f"| {r['tree']} | {r['commit']} | {r['subject']} | {runs_m} "
            f"| {_m(r['median'])} | {change_s} |{extra}"
        )


if __name__ == "__main__":
    sys.exit(main())
