"""Benchmark: per-request cost of the learned session scorer beside the lexical delta score.

Both run on the same requests: each turn of the longest sessions of the default
synthetic corpus (`tiergate replay`'s generator), parsed by the gateway's codec.
Per turn it times, in one run:

- lexical: `difficulty.delta_score(req)` (what `escalation.scorer: lexical` costs);
- learned: `delta_score(req)` + `session_scorer.explain(summary, delta)` (features,
  score, lexical floor, reasons: what `escalation.scorer: learned` runs in
  `_decide_tier`);
- summary: `transcript.summarize(req, previous)`, the running summary the planner
  keeps for every session whatever the scorer (shown for context: both pay it).

The learned part must not grow with the session: the features read counters.

Run: PYTHONPATH=src .venv/bin/python bench/bench_session_scorer.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

from tiergate.core.model import ChatRequest
from tiergate.formats.openai import parse_request
from tiergate.replay.generator import generate_corpus
from tiergate.routing.difficulty import delta_score
from tiergate.routing.session_scorer import explain
from tiergate.routing.transcript import TranscriptSummary, summarize


def _per_call_us(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best * 1e6


def sessions(count: int) -> list[list[ChatRequest]]:
    corpus = sorted(generate_corpus(), key=lambda d: -len(d["turns"]))[:count]
    return [[parse_request(t["request"]) for t in doc["turns"]] for doc in corpus]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sessions and repeats")
    args = ap.parse_args(argv)
    repeat = 20 if args.quick else 200
    rows: dict[str, list[float]] = {"lexical": [], "learned": [], "summary": []}
    depth_learned: list[tuple[int, float]] = []
    for reqs in sessions(3 if args.quick else 10):
        previous: TranscriptSummary | None = None
        for req in reqs:
            prior = previous
            summary = summarize(req, prior)

            def learned(req: ChatRequest = req, summary: TranscriptSummary = summary) -> object:
                return explain(summary, delta_score(req))

            rows["lexical"].append(_per_call_us(partial(delta_score, req), repeat))
            rows["learned"].append(_per_call_us(learned, repeat))
            rows["summary"].append(
                _per_call_us(partial(summarize, req, prior), max(repeat // 10, 2))
            )
            depth_learned.append((len(req.messages), rows["learned"][-1] - rows["lexical"][-1]))
            previous = summary
    print(f"turns measured: {len(rows['lexical'])}")
    print("per request, microseconds (best of 5 per turn; p50 / p95 over turns):")
    for name, values in rows.items():
        q = statistics.quantiles(values, n=20)
        print(f"  {name:8s} p50 {statistics.median(values):7.1f}  p95 {q[18]:7.1f}")
    added = [b - a for a, b in zip(rows["lexical"], rows["learned"], strict=True)]
    print(f"  learned minus lexical: p50 {statistics.median(added):.1f} us")
    shallow = [v for d, v in depth_learned if d <= 10]
    deep = [v for d, v in depth_learned if d >= 40]
    if shallow and deep:
        print(
            f"  added by depth: <=10 messages {statistics.median(shallow):.1f} us, "
            f">=40 messages {statistics.median(deep):.1f} us"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
