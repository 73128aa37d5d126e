"""From a corpus to results: generate or load, extract facts, run the experiments.

The CLI (tiergate.replay.cli) and the benchmark call these; they hold no
argument parsing and no output formatting.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiergate.replay import e2e as e2e_mode
from tiergate.replay import experiments as ex
from tiergate.replay.analysis import targets
from tiergate.replay.corpus import corpus_summary, load_corpus
from tiergate.replay.costmodel import CostModel
from tiergate.replay.features import CorpusFacts, extract
from tiergate.replay.generator import DEFAULT_SEED, DEFAULT_SESSIONS, generate_corpus
from tiergate.replay.harness import StoreFactory, memory_store, redis_store_factory

Progress = Callable[[int], None]

#: Engine replays the full report runs (main and latency reuse the policy run).
REPORT_ENGINE_RUNS = (
    len(ex.policy_list()) + 2 * len(ex.SWEEP_T2) + len(ex.SWEEP_PERCENTILES) + 1  # adversarial
)


EXPERIMENTS = ("main", "policies", "sweep", "adversarial", "prevalence", "latency", "e2e")


@dataclass
class Prepared:
    corpus: list[dict[str, Any]]
    facts: CorpusFacts
    source: str
    summary: dict[str, Any]


def load_or_generate(
    corpus_path: str | Path | None, seed: int = DEFAULT_SEED, sessions: int = DEFAULT_SESSIONS
) -> tuple[list[dict[str, Any]], str]:
    if corpus_path:
        return load_corpus(corpus_path), f"`{Path(corpus_path).name}`"
    return generate_corpus(seed, sessions), f"generated, seed {seed}"


def prepare(
    corpus: list[dict[str, Any]], source: str, progress: Progress | None = None
) -> Prepared:
    facts = extract(corpus, progress=progress)
    summary = corpus_summary(corpus)
    summary["variety"] = variety(corpus)
    return Prepared(corpus, facts, source, summary)


def variety(corpus: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How varied the user texts are: distinct ratio, and the size of hard turns."""
    texts: list[str] = []
    hard_sizes: list[int] = []
    for doc in corpus:
        for t in doc["turns"]:
            if t.get("upstream_status", 200) != 200:
                continue
            last = t["request"]["messages"][-1]
            if last.get("role") == "user" and isinstance(last.get("content"), str):
                texts.append(last["content"])
                if t.get("needs_strong") and len(last["content"]) > 1000:
                    hard_sizes.append(len(last["content"]))
    if not texts:
        return {}
    return {
        "user_texts": len(texts),
        "distinct_user_texts": len(set(texts)),
        "distinct_ratio": round(len(set(texts)) / len(texts), 4),
        "hard_chars_min": min(hard_sizes) if hard_sizes else None,
        "hard_chars_max": max(hard_sizes) if hard_sizes else None,
        "hard_chars_median": int(statistics.median(hard_sizes)) if hard_sizes else None,
    }


def store_for(state: str | None) -> tuple[StoreFactory, str]:
    """`memory` (default) or a redis:// URL: the factory and a label for the report."""
    if not state or state == "memory":
        return memory_store, "memory"
    if state.startswith(("redis://", "rediss://", "unix://")):
        host = state.split("@")[-1]
        return redis_store_factory(state), f"Redis ({host.split('://')[-1]})"
    raise ValueError(f"--state must be 'memory' or a redis:// URL, got {state!r}")


async def run_report(
    prep: Prepared,
    store_factory: StoreFactory = memory_store,
    state_label: str = "memory",
    with_e2e: bool = True,
    e2e_sessions: int | None = None,
    progress: Progress | None = None,
    cost_model: CostModel | None = None,
    only: Collection[str] | None = None,
) -> dict[str, Any]:
    """The seven experiments (or `only` some); the results the report is built from."""
    want = set(only or EXPERIMENTS)
    if not with_e2e:
        want.discard("e2e")
    started = time.perf_counter()
    cm = cost_model or CostModel()
    rp = ex.Replayer(prep.facts, cm, store_factory, progress)
    results: dict[str, Any] = {
        "corpus": prep.summary,
        "corpus_source": prep.source,
        "state": state_label,
        "cost_model": cm.describe(),
    }
    if want & {"policies", "prevalence"}:
        results["policies"] = await ex.policies(rp)
    if "main" in want:
        results["main"] = await ex.main_replay(rp)
    if "latency" in want:
        results["latency"] = await ex.latency(rp)
    if "sweep" in want:
        results["sweep"] = await ex.threshold_sweep(rp)
    if "adversarial" in want:
        results["adversarial"] = await ex.adversarial(rp)
    if "prevalence" in want:
        results["prevalence"] = ex.prevalence(rp)
    if "e2e" in want:
        chosen = e2e_mode.pick_sessions(prep.facts, e2e_sessions)
        results["e2e"] = await e2e_mode.run_e2e(
            prep.corpus, prep.facts, chosen, cm, await rp.run(ex.ENGINE_UNCAPPED), progress
        )
    results["targets"] = targets(results)
    results["runtime_seconds"] = round(time.perf_counter() - started, 1)
    return results


async def run_policies(
    prep: Prepared,
    names: Sequence[str] | None,
    store_factory: StoreFactory = memory_store,
    with_e2e: bool = False,
    e2e_sessions: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The plain `tiergate replay`: metrics of the chosen policies (and optionally e2e)."""
    cm = CostModel()
    rp = ex.Replayer(prep.facts, cm, store_factory, progress)
    doc: dict[str, Any] = {
        "corpus": prep.summary,
        "cost_model": cm.describe(),
        "policies": await ex.policies(rp, names),
    }
    if with_e2e:
        run = await rp.run(ex.ENGINE_UNCAPPED)
        chosen = e2e_mode.pick_sessions(prep.facts, e2e_sessions)
        doc["e2e"] = await e2e_mode.run_e2e(prep.corpus, prep.facts, chosen, cm, run, progress)
    return doc
