"""Benchmark: turns per second of the replay harness (memory state by default).

Two stages, timed separately because the report pays the first once and the
second once per policy (about 30 engine replays for the full report):
- facts: the real codec, turn key, both difficulty scores and the strike
  producers over every turn's full cumulative history;
- engine: `read_escalation_snapshot` -> `resolve_escalation` -> `commit_escalation`
  per turn against the state store, plus the cost model.

Run: .venv/bin/python bench/bench_replay.py [--sessions 400] [--repeat 3] [--state redis://...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from tiergate.replay import experiments as ex
from tiergate.replay.features import extract
from tiergate.replay.generator import generate_corpus
from tiergate.replay.harness import run_policy
from tiergate.replay.pipeline import store_for
from tiergate.routing.difficulty import clear_scan_memo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--state", default="memory", help="memory or a redis:// URL")
    args = ap.parse_args()

    started = time.perf_counter()
    corpus = generate_corpus(sessions=args.sessions)
    gen = time.perf_counter() - started
    turns = sum(len(d["turns"]) for d in corpus)

    clear_scan_memo()
    started = time.perf_counter()
    facts = extract(corpus)
    facts_s = time.perf_counter() - started

    store_factory, label = store_for(args.state)
    engine: list[float] = []
    fixed: list[float] = []
    for _ in range(args.repeat):
        run = asyncio.run(run_policy(facts, ex.ENGINE_UNCAPPED, store_factory=store_factory))
        engine.append(run.elapsed_seconds)
        run = asyncio.run(run_policy(facts, ex.STANDARD_POLICIES["always-cheap-affinity"]))
        fixed.append(run.elapsed_seconds)

    print(f"corpus: {args.sessions} sessions, {turns} turns (generated in {gen:.2f} s)")
    print(
        f"facts  (codec + scorers + strikes): {turns / facts_s:>9,.0f} turns/s  ({facts_s:.2f} s)"
    )
    best = min(engine)
    print(
        f"engine ({label}, snapshot/resolve/commit): {turns / best:>9,.0f} turns/s  "
        f"(best of {args.repeat}: {best:.2f} s, median {statistics.median(engine):.2f} s)"
    )
    print(f"fixed-tier policy (cost model only):  {turns / min(fixed):>9,.0f} turns/s")


if __name__ == "__main__":
    main()
