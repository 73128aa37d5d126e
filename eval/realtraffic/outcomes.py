"""Build the development corpora with outcomes, for counterfactual scoring (issue #29).

    python -m eval.realtraffic.outcomes --repos /work/.mirror --out /work/cache/cfscore/corpus

Every session gets `resolved` (r: did the run resolve its task, read from the
run's own results file in the same snapshot) and `strong_odds` (p: the strong
model's chance on the task), and `source.dataset` names repository@commit.

- **SWE-bench Lite** (`outcomes-swebench-lite.jsonl`): the runs of the
  development corpus (eval/realtraffic/build.py) that ship a results file:
  CodeR (`results.json`), the three SWE-agent GPT-4 runs
  (`cost_2_N/final_report.json`) and the five AutoCodeRover runs
  (`new_eval_results/report.json`, the re-evaluation on the newer harness). p is
  `frontier_solve_rate` from /work/shared/data/swebench-solve-rates/instances.csv,
  which has no SWE-bench Verified row: Verified instances are dropped at the
  join, before any trajectory is read. Unlike corpus v2 this keeps the Lite
  instances that have no human fix-time label (they have p); those with one
  keep it as `label` (hard ones `needs_strong`, as before).
  The mini-swe-agent, OpenHands, Moatless and Claude Code runs have no results
  file in their snapshots (OpenHands' `output.jsonl` is left out of it as too
  large), so they have no outcome and are not here.
- **Multi-SWE-bench Java** (`outcomes-msb-java.jsonl`): SWE-agent with four
  models on the same 91 Java instances, multi-swe-bench/experiments
  `evaluation/java/verified/20240825_SWE-agent_<model>/` (`trajs/*.traj`,
  `results/results.json`). The gpt-4o-mini run's results file covers one
  instance, so that run is left out. p is the instance's solve rate among the
  *other* runs (leave-out: a run's own outcome is never in its own p).
  ("verified" there is Multi-SWE-bench's own split, not SWE-bench Verified.)
- **Terminal-Bench** (`outcomes-terminal-bench.jsonl`): the mini-swe-agent
  (Claude 4 Sonnet) trials of laude-institute/terminal-bench-leaderboard
  `results/terminal-bench-core@0.1.1/20250825_swe-agent-mini_claude-4-sonnet/`,
  read from each trial's console (`sessions/agent.log`, importer
  `terminal-bench`); r is the trial's `is_resolved`. The other agents' consoles
  show no conversation, so only their outcomes are used: p is the task's solve
  rate over every trial of the three best runs by overall solve rate, leaving
  out the run being scored (leave-out, so a trial's own outcome is never in p).

Nothing fetched is committed; the outputs go to `--out` (a cache folder), with
`outcomes-manifest.csv` (ids, run, instance, r, p, turns; no content).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from eval.realtraffic.build import (
    ACR_COMMIT,
    ACR_REPO,
    BUCKETS,
    HARD,
    SOURCES,
    Source,
    checkout,
    git_dir,
)
from tiergate.replay.corpus import write_corpus
from tiergate.replay.importers import ImportStats, import_sessions
from tiergate.replay.importers.labels import Labels

SOLVE_RATES = Path("/work/shared/data/swebench-solve-rates/instances.csv")
DIFFICULTY = Path("/work/shared/data/swebench-difficulty/difficulty.csv")
MSB_REPO = "multi-swe-bench/experiments"
MSB_COMMIT = "89888f1604001fcd80b0799a37af42a1bfebfd8f"
MSB_RUNS = ("deepseek-chat-v2", "deepseek-coder-v2", "doubao-pro-128k", "gpt-4o-2024-05-13")
NO_FIX_TIME = "no fix-time label"


@dataclass(frozen=True)
class Run:
    """A source of trajectories and the results file that says which tasks it resolved."""

    source: Source
    results: str
    benchmark: str


def _lite_results(name: str) -> str:
    if name == "coder":
        return "results.json"
    if name.startswith("sweagent-gpt4-"):
        return f"results/swe-agent-results/cost_2_{name.rsplit('-', 1)[1]}/final_report.json"
    return f"results/{name}/new_eval_results/report.json"


LITE_RUNS = tuple(
    Run(s, _lite_results(s.name), "swe-bench-lite")
    for s in SOURCES
    if s.name == "coder" or s.name.startswith(("sweagent-gpt4-", "acr-"))
)
assert all(r.source.repo in ("NL2Code/CodeR", ACR_REPO) for r in LITE_RUNS)
assert all(r.source.commit == ACR_COMMIT for r in LITE_RUNS if r.source.repo == ACR_REPO)

MSB_RUNS_ = tuple(
    Run(
        Source(
            f"msb-java-{model}",
            MSB_REPO,
            MSB_COMMIT,
            f"evaluation/java/verified/20240825_SWE-agent_{model}/trajs",
            r"\.traj$",
            "swe-agent",
        ),
        f"evaluation/java/verified/20240825_SWE-agent_{model}/results/results.json",
        "multi-swe-bench-java",
    )
    for model in MSB_RUNS
)

TB_REPO = "laude-institute/terminal-bench-leaderboard"
TB_COMMIT = "8e1925a397d7ed859c027cc19b3a3d90c16ef8df"
TB_ROOT = "results/terminal-bench-core@0.1.1"
TB_RUNS = ("20250825_swe-agent-mini_claude-4-sonnet",)
TB_BEST = 3
TB_MIN_TRIALS = 300

_TRAILING_COMMA = re.compile(r",(\s*[\]}])")


def resolved_ids(text: str) -> set[str]:
    """The `resolved` instance ids of a SWE-bench-style report (CodeR's has trailing commas)."""
    doc = json.loads(_TRAILING_COMMA.sub(r"\1", text))
    ids = doc.get("resolved", doc.get("resolved_ids"))
    if not isinstance(ids, list):
        raise ValueError("no list of resolved instance ids")
    return {str(i) for i in ids}


def read_results(repos: Path, run: Run) -> set[str]:
    gd = git_dir(repos, run.source.repo)
    blob = subprocess.run(
        ["git", "-C", str(gd), "show", f"{run.source.commit}:{run.results}"],
        check=True,
        capture_output=True,
    ).stdout
    return resolved_ids(blob.decode())


def leave_out_odds(
    resolved: Mapping[str, set[str]], tasks: Iterable[str]
) -> dict[str, dict[str, float]]:
    """Per run and task: the share of the *other* runs that resolved the task."""
    out: dict[str, dict[str, float]] = {}
    names = sorted(resolved)
    for name in names:
        others = [resolved[o] for o in names if o != name]
        out[name] = {
            t: (sum(t in o for o in others) / len(others) if others else 0.0) for t in tasks
        }
    return out


def lite_labels(solve_rates: Path, difficulty: Path) -> tuple[Labels, dict[str, float]]:
    """The Lite instances with p (none of them Verified), labelled with fix time where known."""
    odds: dict[str, float] = {}
    with open(solve_rates, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["in_lite"] == "true":
                odds[row["instance_id"]] = float(row["frontier_solve_rate"])
    fix: dict[str, str] = {}
    with open(difficulty, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row.get("in_verified") == "false":
                fix[row["instance_id"]] = row["difficulty"]
    by_key = {i: fix.get(i, NO_FIX_TIME) for i in odds}
    return Labels(by_key, frozenset(HARD), {**BUCKETS, NO_FIX_TIME: "unlabelled"}), odds


def _import(
    run: Run,
    root: Path,
    labels: Labels,
    resolved: set[str],
    odds: Mapping[str, float],
    out: Any,
    manifest: list[dict[str, Any]],
    by_session: bool = False,
) -> ImportStats:
    """Import one run; `resolved` holds instance ids (or, `by_session`, session ids)."""
    stats = ImportStats()
    bar = tqdm(desc=f"import {run.source.name}", unit="file", file=sys.stderr)
    docs = import_sessions(
        [root], run.source.fmt, labels, keep_unlabelled=False, stats=stats, progress=bar.update
    )
    src = run.source
    for doc in docs:
        key = doc["source"]["key"]
        if key not in odds:
            continue
        own = doc["session_id"].split("#", 1)[0] if by_session else key
        doc["session_id"] = f"{src.name}/{doc['session_id']}"
        doc["source"]["file"] = doc["source"]["file"].split(f"{src.name}/", 1)[-1]
        doc["source"]["dataset"] = f"{src.repo}@{src.commit}"
        doc["source"]["results"] = f"{src.repo}@{src.commit}:{run.results}"
        doc["source"]["benchmark"] = run.benchmark
        doc["resolved"] = own in resolved
        doc["strong_odds"] = odds[key]
        write_corpus([doc], out)
        manifest.append(
            {
                "session_id": doc["session_id"],
                "run": src.name,
                "benchmark": run.benchmark,
                "framework": doc["source"]["framework"],
                "protocol": doc["source"]["protocol"],
                "instance_id": key,
                "resolved": int(doc["resolved"]),
                "strong_odds": doc["strong_odds"],
                "label": doc.get("label", ""),
                "turns": len(doc["turns"]),
            }
        )
    bar.close()
    return stats


def build(
    repos: Path,
    out: Path,
    work: Path,
    solve_rates: Path = SOLVE_RATES,
    difficulty: Path = DIFFICULTY,
    only: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    manifest: list[dict[str, Any]] = []
    labels, lite_odds = lite_labels(solve_rates, difficulty)
    wanted = [r for r in (*LITE_RUNS, *MSB_RUNS_) if not only or r.source.name in only]
    lite = [r for r in wanted if r.benchmark == "swe-bench-lite"]
    if lite:
        with open(out / "outcomes-swebench-lite.jsonl", "wb") as fh:
            for run in lite:
                root, n = checkout(run.source, repos, work)
                resolved = read_results(repos, run)
                stats = _import(run, root, labels, resolved, lite_odds, fh, manifest)
                print(
                    f"{run.source.name}: {n} files, {stats.sessions} sessions, "
                    f"{len(resolved)} resolved in the report",
                    file=sys.stderr,
                )
    java = [r for r in wanted if r.benchmark == "multi-swe-bench-java"]
    if java:
        resolved_by = {r.source.name: read_results(repos, r) for r in MSB_RUNS_}
        roots = {r.source.name: checkout(r.source, repos, work)[0] for r in java}
        tasks = {p.stem for root in roots.values() for p in root.glob("*.traj")}
        odds = leave_out_odds(resolved_by, tasks)
        java_labels = Labels({t: "multi-swe-bench java" for t in tasks})
        with open(out / "outcomes-msb-java.jsonl", "wb") as fh:
            for run in java:
                name = run.source.name
                stats = _import(
                    run, roots[name], java_labels, resolved_by[name], odds[name], fh, manifest
                )
                print(
                    f"{name}: {stats.sessions} sessions, {len(resolved_by[name])} resolved",
                    file=sys.stderr,
                )
    if not only or "terminal-bench" in only:
        build_terminal_bench(repos, work, out, manifest)
    with open(out / "outcomes-manifest.csv", "w", newline="", encoding="utf-8") as mf:
        writer = csv.DictWriter(mf, fieldnames=list(manifest[0]) if manifest else ["session_id"])
        writer.writeheader()
        writer.writerows(manifest)
    return manifest


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def tb_outcomes(repos: Path) -> dict[str, dict[str, list[bool]]]:
    """Run -> task -> the trials' `is_resolved`, from every `results.json` at the commit."""
    gd = git_dir(repos, TB_REPO)
    names = subprocess.run(
        ["git", "-C", str(gd), "ls-tree", "-r", "-z", "--name-only", TB_COMMIT, "--", TB_ROOT],
        check=True,
        capture_output=True,
    ).stdout.decode()
    paths = [p for p in names.split("\0") if p.endswith("/results.json")]
    proc = subprocess.run(
        ["git", "-C", str(gd), "cat-file", "--batch"],
        input="".join(f"{TB_COMMIT}:{p}\n" for p in paths).encode(),
        check=True,
        capture_output=True,
    ).stdout
    out: dict[str, dict[str, list[bool]]] = {}
    pos = 0
    for p in paths:
        end = proc.index(b"\n", pos)
        size = int(proc[pos:end].split()[2])
        doc = json.loads(proc[end + 1 : end + 1 + size])
        pos = end + 2 + size
        run = p[len(TB_ROOT) + 1 :].split("/", 1)[0]
        if isinstance(doc, dict) and doc.get("task_id"):
            out.setdefault(run, {}).setdefault(str(doc["task_id"]), []).append(
                _truthy(doc.get("is_resolved"))
            )
    return out


def tb_odds(outcomes: Mapping[str, Mapping[str, list[bool]]], scored: str) -> dict[str, float]:
    """p per task: the solve rate over all trials of the best runs other than `scored`."""

    def rate(trials: Iterable[list[bool]]) -> float:
        flat = [x for t in trials for x in t]
        return sum(flat) / len(flat) if flat else 0.0

    big = {
        r: tasks
        for r, tasks in outcomes.items()
        if r != scored and sum(len(t) for t in tasks.values()) >= TB_MIN_TRIALS
    }
    best = sorted(big, key=lambda r: rate(big[r].values()), reverse=True)[:TB_BEST]
    tasks = {t for r in best for t in big[r]}
    return {t: rate(big[r].get(t, []) for r in best) for t in sorted(tasks)}


def build_terminal_bench(
    repos: Path, work: Path, out: Path, manifest: list[dict[str, Any]]
) -> dict[str, Any]:
    outcomes = tb_outcomes(repos)
    info: dict[str, Any] = {}
    with open(out / "outcomes-terminal-bench.jsonl", "wb") as fh:
        for run_name in TB_RUNS:
            odds = tb_odds(outcomes, run_name)
            src = Source(
                f"tb-{run_name.split('_', 1)[1]}",
                TB_REPO,
                TB_COMMIT,
                f"{TB_ROOT}/{run_name}",
                r"/(sessions/agent\.log|results\.json)$",
                "terminal-bench",
            )
            root, _ = checkout(src, repos, work)
            resolved = {
                str(p.parent.name)
                for p in root.rglob("results.json")
                if _truthy(json.loads(p.read_bytes()).get("is_resolved"))
            }
            run = Run(src, f"{TB_ROOT}/{run_name}/**/results.json", "terminal-bench")
            trials = Labels({t: "terminal-bench" for t in odds})
            stats = _import(run, root, trials, resolved, odds, fh, manifest, by_session=True)
            info[src.name] = {"sessions": stats.sessions, "failed": len(stats.failed)}
            print(
                f"{src.name}: {stats.sessions} sessions, {len(stats.failed)} unreadable "
                f"({'; '.join(stats.failed[:2])})",
                file=sys.stderr,
            )
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m eval.realtraffic.outcomes",
        description="Build the development corpora with outcomes (resolved, strong_odds).",
    )
    p.add_argument("--repos", type=Path, required=True, help="folder of the source git clones")
    p.add_argument("--out", type=Path, required=True, help="output folder (a cache, not the repo)")
    p.add_argument("--work", type=Path, help="where to extract trajectories (default: temp)")
    p.add_argument("--solve-rates", type=Path, default=SOLVE_RATES)
    p.add_argument("--difficulty", type=Path, default=DIFFICULTY)
    p.add_argument(
        "--only",
        nargs="+",
        metavar="RUN",
        default=(),
        choices=[r.source.name for r in (*LITE_RUNS, *MSB_RUNS_)] + ["terminal-bench"],
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="outcomes-") as tmp:
        manifest = build(
            args.repos,
            args.out,
            args.work or Path(tmp),
            args.solve_rates,
            args.difficulty,
            tuple(args.only),
        )
    runs: dict[str, list[int]] = {}
    for row in manifest:
        runs.setdefault(row["run"], []).append(row["resolved"])
    for name, rs in runs.items():
        print(f"{name}: {len(rs)} sessions, {sum(rs)} resolved")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
