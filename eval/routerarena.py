"""RouterArena (sub_10 split) harness for tiergate's request-level strategies.

RouterArena's cached per-model results hold, for each of the 809 sub_10 queries, a
model's answer, its 0..1 score, and its token usage. A router only has to pick a
model per query: this harness turns the picks of tiergate's real strategies into
RouterArena's prediction-file format and scores them the way RouterArena does:

- prediction file: router_inference/predictions/<router>.json, a JSON list of
  {"global index", "prompt", "prediction", "generated_result", "cost", "accuracy",
  "for_optimality"} (router_inference/generate_prediction_file.py, then filled in
  by llm_evaluation/run.py);
- cost of a query: input_tokens x input price + output_tokens x output price, per
  1M tokens from cost.json (llm_evaluation/evaluate_models.py,
  calculate_inference_cost); cost per 1k queries = total cost / queries x 1000;
- arena score (llm_evaluation/run.py, compute_arena_score), beta = 0.1,
  c_max = 200, c_min = 0.0044, cost clamped to [c_min, c_max]:
      C = (log2 c_max - log2 cost) / (log2 c_max - log2 c_min)
      S = (1 + beta) A C / (beta A + C)

RouterArena's rule: evaluation only, never train or tune on it. Nothing here is fitted
to it: model roles come from list prices, quality priors from tiergate's catalogue.

    .venv/bin/python -m eval.routerarena [--data DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from textwrap import fill
from typing import Any

import numpy as np

from eval import common
from eval.requestlevel_metrics import (
    inference_cost,
    iso_accuracy,
    router_metrics,
)
from tiergate.config import Thresholds
from tiergate.routing import linucb
from tiergate.routing.difficulty import full_transcript_features, score
from tiergate.routing.strategies import Candidate, StrategyContext

log = logging.getLogger(__name__)

DATASET = "routerarena-sub10"
QUALITY_PRIORS: dict[str, float] = {
    "claude-3-haiku-20240307": 0.66,  # catalogue: anthropic/claude-haiku-4-5
    "gemini-2.0-flash-001": 0.64,  # catalogue: gemini/gemini-2.5-flash
}
"""Router quality priors, carried over from tiergate's built-in catalogue
(defaults.py) for the same vendors' current small models. Not fitted to RouterArena."""
DEFAULT_QUALITY = 0.6
DEFAULTS = Thresholds()
"""tiergate's default gated_adaptive thresholds, used as they ship."""


# ---- data --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelResult:
    """One model's cached answer to one query, as RouterArena scored it."""

    score: float
    input_tokens: int
    output_tokens: int
    cached_cost: float
    answer: str
    success: bool
    error: Any = None


@dataclass(frozen=True)
class ArenaQuery:
    global_index: str
    prompt: str
    results: dict[str, ModelResult]


@dataclass(frozen=True)
class ArenaData:
    queries: list[ArenaQuery]
    models: list[str]
    prices: dict[str, tuple[float, float]]  # model -> (input, output) USD per 1M tokens


def load_arena(data_dir: Path) -> ArenaData:
    """cost.json plus every <model>.jsonl; keeps the queries every model answered."""
    folder = common.require_dir(data_dir, DATASET, ["cost.json"])
    table = json.loads((folder / "cost.json").read_text(encoding="utf-8"))
    files = sorted(folder.glob("*.jsonl"))
    if len(files) < 2:
        raise common.DataMissingError(f"benchmark data incomplete: need 2+ *.jsonl in {folder}")
    per_model: dict[str, dict[str, tuple[str, ModelResult]]] = {}
    order: list[str] = []
    for path in files:
        model = path.stem
        if model not in table:
            raise ValueError(f"{path.name}: model {model!r} has no price in cost.json")
        rows: dict[str, tuple[str, ModelResult]] = {}
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                item = json.loads(line)
                ev = item.get("evaluation_result") or {}
                usage = item.get("token_usage") or {}
                rows[item["global_index"]] = (
                    item["question"],
                    ModelResult(
                        score=float(ev.get("score") or 0.0),
                        input_tokens=int(usage.get("input_tokens", 0)),
                        output_tokens=int(usage.get("output_tokens", 0)),
                        cached_cost=float(ev.get("inference_cost") or 0.0),
                        answer=item.get("generated_answer") or "",
                        success=bool(item.get("success", False)),
                        error=item.get("error"),
                    ),
                )
        per_model[model] = rows
        order = order or list(rows)  # the first file's query order
    models = sorted(per_model)
    common_ids = set.intersection(*(set(r) for r in per_model.values()))
    dropped = len(set().union(*(set(r) for r in per_model.values()))) - len(common_ids)
    if dropped:
        log.warning("%d queries are missing for some model and were dropped", dropped)
    queries = [
        ArenaQuery(gid, per_model[models[0]][gid][0], {m: per_model[m][gid][1] for m in models})
        for gid in order
        if gid in common_ids
    ]
    prices = {
        m: (
            float(table[m]["input_token_price_per_million"]),
            float(table[m]["output_token_price_per_million"]),
        )
        for m in models
    }
    return ArenaData(queries, models, prices)


def prediction_entries(data: ArenaData, picks: Sequence[str]) -> list[dict[str, Any]]:
    """RouterArena prediction entries for one router, already evaluated from the cache."""
    entries = []
    for query, model in zip(data.queries, picks, strict=True):
        r = query.results[model]
        entries.append(
            {
                "global index": query.global_index,
                "prompt": query.prompt,
                "prediction": model,
                "generated_result": {
                    "generated_answer": r.answer,
                    "success": r.success,
                    "token_usage": {
                        "input_tokens": r.input_tokens,
                        "output_tokens": r.output_tokens,
                        "total_tokens": r.input_tokens + r.output_tokens,
                    },
                    "error": r.error,
                },
                "cost": inference_cost(data.prices[model], r.input_tokens, r.output_tokens),
                "accuracy": r.score,
                "for_optimality": False,
            }
        )
    return entries


# ---- routers ------------------------------------------------------------------------------


def roles(data: ArenaData) -> tuple[Candidate, Candidate]:
    """(weak, strong) candidates for a two-model pool: strong is the pricier model.

    Decided from list prices alone, as an operator without benchmark data would.
    """
    cands = [
        common.candidate(m, QUALITY_PRIORS.get(m, DEFAULT_QUALITY), *data.prices[m])
        for m in data.models
    ]
    if len(cands) != 2:
        raise ValueError(f"the harness routes between two models, found {data.models}")
    weak, strong = sorted(cands, key=lambda c: (c.blended_price, c.name))
    return weak, strong


def strategy_picks(
    strategy: str, data: ArenaData, weak: Candidate, strong: Candidate, show: bool = True
) -> list[str]:
    """The model tiergate's `strategy` ranks first for each query (default router config)."""
    router = common.two_model_router(strategy, weak.name, strong.name)
    picks = []
    for q in common.progress(data.queries, strategy, len(data.queries), show):
        req = common.user_request(q.prompt)
        features = full_transcript_features(req)
        lexical = None if strategy == "learned" else score(features)  # learned: scored in ctx
        ctx = StrategyContext(request=req, router=router, features=features, score=lexical)
        picks.append(common.first_choice(strategy, [weak, strong], ctx))
    return picks


def linucb_picks(
    data: ArenaData, weak: Candidate, strong: Candidate, *, online: bool, seed: int = 0
) -> list[str]:
    """linucb's picks. Cold (online=False): fresh arms and no feedback, as on a new
    gateway. Online: prequential over a seeded shuffle, updating the chosen arm with
    `linucb.reward(feedback=score, cost)` after each pick; that learns from
    RouterArena's labels, so it is reported as a diagnostic, not a submission."""
    router = common.two_model_router("linucb", weak.name, strong.name)
    arms = {c.name: linucb.LinUCBArm.fresh() for c in (weak, strong)}
    picks = [""] * len(data.queries)
    order = np.random.default_rng(seed).permutation(len(data.queries))
    for i in order:
        q = data.queries[i]
        req = common.user_request(q.prompt)
        x = linucb.context_vector_for(req)
        ctx = StrategyContext(request=req, router=router, bandit_arms=arms, bandit_x=x)
        pick = common.first_choice("linucb", [weak, strong], ctx)
        picks[i] = pick
        if online:
            r = q.results[pick]
            cost = inference_cost(data.prices[pick], r.input_tokens, r.output_tokens)
            arms[pick] = linucb.update(arms[pick], x, linucb.reward(True, cost, feedback=r.score))
    return picks


def random_picks(data: ArenaData, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [data.models[int(k)] for k in rng.integers(0, len(data.models), len(data.queries))]


def oracle_picks(data: ArenaData) -> list[str]:
    """Reference only (reads the labels): the best-scoring model, cheapest on ties."""

    def best(q: ArenaQuery) -> str:
        def cost(m: str) -> float:
            r = q.results[m]
            return inference_cost(data.prices[m], r.input_tokens, r.output_tokens)

        return min(data.models, key=lambda m: (-q.results[m].score, cost(m)))

    return [best(q) for q in data.queries]


# ---- the benchmark -----------------------------------------------------------------------


@dataclass(frozen=True)
class RouterRun:
    name: str
    note: str
    picks: list[str]
    reference: bool = False  # not a router you could deploy as is: kept out of the ranking


def routers(data: ArenaData, seed: int = 0, show: bool = True) -> list[RouterRun]:
    weak, strong = roles(data)
    weight = common.two_model_router("balanced", weak.name, strong.name).balanced_quality_weight
    runs = [
        RouterRun("gated_adaptive", f"default t1 = {DEFAULTS.t1}, t2 = {DEFAULTS.t2}",
                  strategy_picks("gated_adaptive", data, weak, strong, show)),
        RouterRun("learned", "default t1 = 0.5, t2 = 0.8 on the learned score",
                  strategy_picks("learned", data, weak, strong, show)),
        RouterRun("linucb", "cold start: no feedback",
                  linucb_picks(data, weak, strong, online=False, seed=seed)),
        RouterRun("cheapest", "", strategy_picks("cheapest", data, weak, strong, show)),
        RouterRun("quality", "", strategy_picks("quality", data, weak, strong, show)),
        RouterRun("balanced", f"default quality weight {weight}",
                  strategy_picks("balanced", data, weak, strong, show)),
        RouterRun("random", f"uniform, seed {seed}", random_picks(data, seed)),
        RouterRun(f"always {weak.name}", "single-model baseline", [weak.name] * len(data.queries)),
        RouterRun(f"always {strong.name}", "single-model baseline",
                  [strong.name] * len(data.queries)),
        RouterRun("linucb-online", "learns from RouterArena labels (prequential); diagnostic",
                  linucb_picks(data, weak, strong, online=True, seed=seed), reference=True),
        RouterRun("oracle", "reads the labels; upper bound", oracle_picks(data), reference=True),
    ]  # fmt: skip
    return runs


def file_stem(name: str) -> str:
    return "tiergate-" + name.replace(" ", "-").replace("/", "_")


def run(data: ArenaData, out_dir: Path, *, seed: int = 0, show: bool = True) -> dict[str, Any]:
    """Route, write RouterArena prediction and config files, and score them."""
    weak, strong = roles(data)
    rows = []
    for r in routers(data, seed, show):
        entries = prediction_entries(data, r.picks)
        stem = file_stem(r.name)
        common.write_json(out_dir / "predictions" / f"{stem}.json", entries)
        config = {"pipeline_params": {"router_name": stem, "models": data.models}}
        common.write_json(out_dir / "config" / f"{stem}.json", config)
        loaded = json.loads((out_dir / "predictions" / f"{stem}.json").read_text("utf-8"))
        m = router_metrics(loaded)  # scored from the file, exactly as written
        rows.append({"name": r.name, "note": r.note, "reference": r.reference,
                     "file": f"predictions/{stem}.json", "accuracy": m.accuracy,
                     "total_cost": m.total_cost, "cost_per_1k": m.cost_per_1k,
                     "arena_score": m.arena_score, "picks": m.picks})  # fmt: skip
    random_runs = [
        router_metrics(prediction_entries(data, random_picks(data, s))) for s in range(100)
    ]
    scores = np.array(
        [score(full_transcript_features(common.user_request(q.prompt))) for q in data.queries]
    )
    mismatched = sum(
        1
        for q in data.queries
        for m, r in q.results.items()
        if not math.isclose(inference_cost(data.prices[m], r.input_tokens, r.output_tokens),
                            r.cached_cost, rel_tol=1e-9, abs_tol=1e-12)
    )  # fmt: skip
    return {
        "dataset": DATASET,
        "code": common.code_version(),
        "queries": len(data.queries),
        "weak_model": weak.name,
        "strong_model": strong.name,
        "quality_priors": {c.name: c.quality for c in (weak, strong)},
        "prices": {m: list(p) for m, p in data.prices.items()},
        "routers": rows,
        "random_100_seeds": {
            "accuracy_mean": float(np.mean([r.accuracy for r in random_runs])),
            "arena_mean": float(np.mean([r.arena_score for r in random_runs])),
            "arena_sd": float(np.std([r.arena_score for r in random_runs])),
        },
        "diagnostics": {
            "score_max": float(scores.max()),
            "score_median": float(np.median(scores)),
            "default_t2": DEFAULTS.t2,
            "at_default_t2": int(np.sum(scores >= DEFAULTS.t2)),
            "cost_mismatches_vs_cache": mismatched,
        },
    }


# ---- report ------------------------------------------------------------------------------


def render_markdown(results: dict[str, Any], figure: str | None = None) -> str:
    weak, strong = results["weak_model"], results["strong_model"]
    rows = []
    ranked = sorted(results["routers"], key=lambda r: (r["reference"], -r["arena_score"]))
    for r in ranked:
        share = 100 * r["picks"].get(strong, 0) / results["queries"]
        name = f"{r['name']} (reference)" if r["reference"] else r["name"]
        acc, cost, arena = r["accuracy"], r["cost_per_1k"], r["arena_score"]
        rows.append([name, f"{share:.1f}", f"{100 * acc:.2f}", f"{cost:.4f}",
                     f"{100 * arena:.2f}", r["note"]])  # fmt: skip
    headers = [
        "Router",
        "Strong picks (%)",
        "Accuracy (%)",
        "Cost / 1k queries ($)",
        "Arena score",
        "Notes",
    ]
    rnd = results["random_100_seeds"]
    d = results["diagnostics"]
    lines = [
        f"RouterArena sub_10 ({results['queries']} queries); weak = {weak}, strong = {strong} "
        f"(by list price); quality priors {results['quality_priors']}.",
        "",
        common.markdown_table(headers, rows),
        "",
    ]
    if figure:
        lines += [f"![accuracy vs cost per 1k queries]({figure})", ""]
    lines += [
        f"- Random over 100 seeds: accuracy {100 * rnd['accuracy_mean']:.2f}%, arena score "
        f"{100 * rnd['arena_mean']:.2f} (sd {100 * rnd['arena_sd']:.2f}).",
        f"- Difficulty score: median {d['score_median']:.3f}, max {d['score_max']:.3f}; "
        f"{d['at_default_t2']} queries reach the default t2 = {d['default_t2']:.2f}.",
        f"- Recomputed costs that differ from the cached inference_cost: "
        f"{d['cost_mismatches_vs_cache']}.",
        common.provenance(results["code"]),
    ]
    return "\n".join(lines) + "\n"


_MARKERS = ["o", "s", "D", "^", "v", "P", "X", "*", "<", ">"]


def plot_arena(results: dict[str, Any], path: Path) -> None:
    """Accuracy vs cost per 1k queries (log), with arena-score contours."""
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    costs = [r["cost_per_1k"] for r in results["routers"]]
    grid = np.geomspace(min(costs) / 1.6, max(costs) * 1.6, 200)
    accs = [r["accuracy"] for r in results["routers"]]
    levels = np.arange(0.5, 0.9, 0.05)
    for level in levels:
        y = iso_accuracy(float(level), grid)
        ax.plot(grid, 100 * y, color=common.OKABE_ITO["grey"], linewidth=0.7, linestyle=":")
        ok = ~np.isnan(y)
        if ok.any() and 100 * y[ok][-1] >= 100 * (min(accs) - 0.06):
            ax.annotate(f"S={100 * level:.0f}", (grid[ok][-1], 100 * y[ok][-1]), fontsize=7,
                        color="#777777", xytext=(2, 0), textcoords="offset points")  # fmt: skip
    colours = [c for k, c in common.OKABE_ITO.items() if k not in ("grey", "yellow")]
    groups: dict[tuple[float, float], list[dict[str, Any]]] = {}
    for r in results["routers"]:  # routers with the same picks share one marker
        groups.setdefault((round(r["cost_per_1k"], 9), round(r["accuracy"], 9)), []).append(r)
    for i, members in enumerate(groups.values()):
        reference = all(r["reference"] for r in members)
        label = ", ".join(r["name"] + (" (ref.)" if r["reference"] else "") for r in members)
        colour = colours[i % len(colours)]
        ax.scatter(members[0]["cost_per_1k"], 100 * members[0]["accuracy"], s=50, zorder=3,
                   marker=_MARKERS[i % len(_MARKERS)], label=fill(label, 34),
                   facecolors="none" if reference else colour, edgecolors=colour)  # fmt: skip
    ax.set_xscale("log")
    ticks = [t for t in (0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5, 10)
             if grid[0] <= t <= grid[-1]]  # fmt: skip
    ax.set_xticks(ticks, [f"${t:g}" for t in ticks])
    ax.set_xticks([], minor=True)
    ax.set_ylim(100 * (min(accs) - 0.06), 100 * (max(accs) + 0.04))
    ax.set_xlabel("Cost per 1k queries (USD, log scale)")
    ax.set_ylabel("Accuracy (%)")
    ax.set_title(f"RouterArena sub_10 ({results['queries']} queries), arena-score contours")
    ax.grid(alpha=0.25, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    common.save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.routerarena",
        description="RouterArena sub_10: prediction files, accuracy, cost per 1k, arena score.",
    )
    common.add_common_arguments(parser, common.REPO_ROOT / "eval" / "out" / "routerarena")
    parser.add_argument("--seed", type=int, default=0, help="random router / stream order")
    args = parser.parse_args(argv)
    data = load_arena(args.data)
    out: Path = args.out
    results = run(data, out, seed=args.seed, show=not args.quiet)
    common.write_json(out / "results.json", results)
    plot_arena(results, out / "routerarena.png")
    markdown = render_markdown(results, figure="routerarena.png")
    (out / "summary.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"\nwrote {out / 'results.json'}, {out / 'summary.md'}, {out / 'routerarena.png'}, "
          f"{out / 'predictions'}/")  # fmt: skip
    return 0


if __name__ == "__main__":
    common.run_cli(main)
