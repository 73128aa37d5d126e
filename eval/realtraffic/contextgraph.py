"""Outcome-only SWE-agent sessions from ContextGraph's sample of nebius/SWE-agent-trajectories.

    PYTHONPATH=src:. python -m eval.realtraffic.contextgraph \\
        --repos /work/.mirror --out /work/cache/cfscore/corpus

Why: issue #29's value study (eval/value_study.py) learns "is the base agent
losing, and is the session cheap to rescue" from per-turn features on four
frameworks and scores the fifth; its training data is ~2,300 sessions of ~300
tasks. wzh4464/ContextGraph commits 3,591 SWE-agent sessions (Llama 3.1 8B, 70B
and 405B) on Python repositories outside SWE-bench, each with its outcome
(`target`). They carry no strong-model odds p, so they can be *trained on* but
not scored by counterfactual value: the study adds them to every training fold
(`--extra-train contextgraph`) and still scores only the five outcome corpora.

Each trajectory is `[system, user (the task), ai, user (observation), ai, ...]`;
turn k's request is everything before the k-th `ai` message, as the agent sent
it, in the OpenAI chat format the other corpora use. Sessions on the twelve
SWE-bench repositories are dropped (the held-out Verified split lives there).
Licence: the dataset card of nebius/SWE-agent-trajectories (CC BY 4.0); the
ContextGraph repository adds no licence of its own. Nothing fetched is committed:
this writes `outcomes-contextgraph.jsonl` beside the other corpora.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from eval.realtraffic.build import blobs, git_dir, list_files

REPO = "wzh4464/ContextGraph"
COMMIT = "1319787c5abf54f591ca3fbf408e4b0ac601b51b"
PREFIX = "swe_trajectories/trajectories/"
#: The harness: leave-one-framework-out drops these sessions with the other SWE-agent ones.
FRAMEWORK = "swe-agent"
#: SWE-bench's twelve repositories (owner__name, as instance ids start).
SWE_BENCH_REPOS = frozenset(
    {
        "astropy__astropy",
        "django__django",
        "matplotlib__matplotlib",
        "mwaskom__seaborn",
        "pallets__flask",
        "psf__requests",
        "pydata__xarray",
        "pylint-dev__pylint",
        "pytest-dev__pytest",
        "scikit-learn__scikit-learn",
        "sphinx-doc__sphinx",
        "sympy__sympy",
    }
)
ROLES = {"system": "system", "user": "user", "ai": "assistant"}


def _text(entry: dict[str, Any]) -> str:
    """The message text; the dataset writes a missing field as the string 'None'."""
    field = "system_prompt" if entry.get("role") == "system" else "text"
    value = entry.get(field)
    return "" if value is None or value == "None" else str(value)


def session_doc(traj: dict[str, Any], path: str) -> dict[str, Any] | None:
    """One trajectory as a corpus session (None when it has no agent reply, or its
    task is on a SWE-bench repository)."""
    key = str(traj["instance_id"])
    if key.rsplit("-", 1)[0] in SWE_BENCH_REPOS:
        return None
    messages = [
        {"role": ROLES[e["role"]], "content": _text(e)}
        for e in traj["trajectory"]
        if e.get("role") in ROLES
    ]
    turns = [
        {"request": {"model": "orcarouter/coding", "messages": messages[:i]}}
        for i, m in enumerate(messages)
        if m["role"] == "assistant" and i > 0
    ]
    if not turns:
        return None
    model = str(traj.get("model_name") or "")
    return {
        "session_id": f"contextgraph/{model}/{key}",
        "archetype": "contextgraph",
        "label": "",
        "source": {
            "framework": FRAMEWORK,
            "protocol": "text",
            "model": model or None,
            "file": path,
            "key": key,
            "dataset": f"{REPO}@{COMMIT}",
            "benchmark": "nebius-swe-agent-trajectories",
        },
        "turns": turns,
        "resolved": bool(traj.get("target")),
        "strong_odds": None,
    }


def build(repos: Path, out: Path) -> tuple[int, int]:
    """Write outcomes-contextgraph.jsonl; returns (sessions, resolved)."""
    gd = git_dir(repos, REPO)
    paths = sorted(p for p in list_files(gd, COMMIT, PREFIX) if p.endswith(".json"))
    out.mkdir(parents=True, exist_ok=True)
    sessions = resolved = 0
    with open(out / "outcomes-contextgraph.jsonl", "wb") as fh:
        for path, data in tqdm(blobs(gd, COMMIT, paths), total=len(paths), desc="contextgraph"):
            doc = session_doc(orjson.loads(data), path)
            if doc is None:
                continue
            fh.write(orjson.dumps(doc) + b"\n")
            sessions += 1
            resolved += doc["resolved"]
    return sessions, resolved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repos", type=Path, required=True, help="folder of fetched mirrors")
    ap.add_argument("--out", type=Path, required=True, help="corpus folder")
    args = ap.parse_args(argv)
    sessions, resolved = build(args.repos, args.out)
    print(f"contextgraph: {sessions} sessions, {resolved} resolved", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
