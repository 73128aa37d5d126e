"""The corpora the session scorer is trained and judged on: provenance, loading, cache.

Split from eval/train_session_scorer.py (which tunes and writes the artifact):
`SOURCES` is what the artifact records about its training data and their
licences; the loaders extract each corpus once (eval.session_scorer_data) and
keep the numbers in a small .npz cache.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from eval.realtraffic import independent
from eval.session_scorer_data import Extracted, extract, stream_jsonl
from tiergate.replay.generator import generate_corpus

SOURCES = [
    {
        "name": "coder",
        "what": "CodeR trajectories on SWE-bench Lite (text protocol)",
        "repository": "NL2Code/CodeR@d63468344bc2",
        "licence": "no licence file in the repository",
    },
    {
        "name": "mini-deepseek",
        "what": "mini-swe-agent 2.2.7 tool-call runs, deepseek-chat",
        "repository": "SWE-agent/mini-swe-agent@3c7d1d7f8fb8",
        "licence": "MIT",
    },
    {
        "name": "openhands-glm",
        "what": "OpenHands CodeActAgent sessions, GLM-4.6-FP8",
        "repository": "ergt10/openhands_swebench@3f8ba937f9e1",
        "licence": "MIT (OpenHands copy in the repository; no separate licence for run data)",
    },
    {
        "name": "sweagent-gpt4-1/2/3, acr-run-1/2/3, acr-val-only, acr-val-sbfl",
        "what": "SWE-agent 0.x (GPT-4) and AutoCodeRover (gpt-4-0125-preview) runs on "
        "SWE-bench Lite (text protocol), from the AutoCodeRover results folder",
        "repository": "nus-apr/auto-code-rover@3536ac292e30",
        "licence": "AGPL-3.0 or commercial (the repository's dual licence)",
    },
    {
        "name": "moatless-sonnet",
        "what": "Moatless Tools 0.0.4, Claude 3.5 Sonnet (20241022), tool calls",
        "repository": "aorwall/moatless-tools@91f87418",
        "licence": "MIT",
    },
    {
        "name": "claude-code-scb",
        "what": "Claude Code (claude-sonnet-4-5) runs on SWE-bench Lite, tool calls",
        "repository": "jiayuanz3/SWEContextBench@31bb0415",
        "licence": "no licence file in the repository",
    },
    {
        "name": "labels",
        "what": "SWE-bench Verified annotation fix-time estimates (difficulty.csv), "
        "used for Lite instances only; Verified instances held out",
        "repository": "/work/shared/data/swebench-difficulty",
        "licence": "as published with the SWE-bench Verified annotations",
    },
    {
        "name": "synthetic",
        "what": "tiergate replay default corpus (generated, seed 20260814)",
        "repository": "this repository",
        "licence": "the project's",
    },
]


def cached(path: Path, build: Callable[[], Extracted]) -> Extracted:
    if path.exists():
        return Extracted.load(path)
    data = build()
    data.save(path)
    return data


def load_development(corpus_dir: Path, cache: Path) -> dict[str, Extracted]:
    """Real (both protocols) and the default synthetic corpus: what is trained on."""
    out: dict[str, Extracted] = {}
    for protocol in ("text", "tool-call"):
        src = corpus_dir / f"realtraffic-{protocol}.jsonl"
        with tqdm(desc=f"real {protocol}", unit="session") as bar:
            out[protocol] = cached(
                cache / f"real-{protocol}.npz",
                functools.partial(extract, stream_jsonl(src), True, bar.update),
            )
    with tqdm(desc="synthetic default", unit="session") as bar:
        out["synthetic"] = cached(
            cache / "synthetic.npz", lambda: extract(generate_corpus(), False, bar.update)
        )
    return out


def load_held_out(cache: Path) -> Extracted:
    """The independent synthetic corpus: read only after the choice is made."""
    with tqdm(desc="independent (held out)", unit="session") as bar:
        return cached(
            cache / "independent.npz", lambda: extract(independent.generate(), False, bar.update)
        )
