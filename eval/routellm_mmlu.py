"""RouteLLM's MMLU benchmark for tiergate's request-level strategies.

Each MMLU prompt (RouteLLM's cached responses: per-question correctness of
Mixtral-8x7B-Instruct and gpt-4-1106-preview) becomes a one-message ChatRequest,
is scored by the real difficulty scorer and routed by the real strategies:

- gated_adaptive: strong iff score >= t2, with t2 swept over score quantiles
  (RouteLLM's sweep: `pd.qcut(thresholds, 10)` cut-offs, the top one exclusive);
- linucb: prequential (choose, score the choice, then update the chosen arm) over a
  seeded shuffle of the prompts, swept over the reward's cost weight;
- random: strong with probability p, p swept over 0..1, averaged over iterations.

Metrics follow RouteLLM (routellm/evals/evaluate.py and the paper, arXiv 2406.18665):
PGR = (acc - acc_weak) / (acc_strong - acc_weak); APGR is the trapezoid area under
accuracy vs strong-call share, normalised the same way; CPT(x%) is the smallest
strong-call share that reaches PGR x%. Contaminated prompts are excluded first.

    .venv/bin/python -m eval.routellm_mmlu [--data DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval import common
from eval.linear_references import (
    GREEDY_MARGINS,
    bandit_feedback_scores,
    cross_fitted_scores,
    greedy_bandit_decisions,
    in_sample_scores,
    prequential_scores,
)
from eval.mmlu_report import plot_curves, render_markdown
from eval.requestlevel_metrics import (
    CurvePoint,
    apgr,
    auroc,
    bootstrap_apgr,
    cpt,
    curve_from_decisions,
    mean_or_none,
    optimal_accuracy,
    subject_correlation,
    threshold_grid,
    with_endpoints,
    within_domain_auroc,
)
from tiergate.config import Thresholds
from tiergate.routing import learned, linucb
from tiergate.routing.difficulty import full_transcript_features, score
from tiergate.routing.strategies import Candidate, StrategyContext

DATASET = "routellm-mmlu"
WEAK_COLUMN = "mistralai/Mixtral-8x7B-Instruct-v0.1"
STRONG_COLUMN = "gpt-4-1106-preview"

# Router facts for the pair. Quality priors are tiergate's catalogue tiers (defaults.py:
# tier-1 models 0.60-0.66, frontier 0.86-0.90), not fitted to MMLU. Prices are the
# pair's list prices in RouterArena's cost.json (USD / 1M tokens).
WEAK = common.candidate("mixtral-8x7b-instruct", quality=0.60, input_price=0.6, output_price=0.6)
STRONG = common.candidate("gpt-4-1106-preview", quality=0.86, input_price=10.0, output_price=30.0)
DEFAULTS = Thresholds()
"""tiergate's default gated_adaptive thresholds (t1 = 0.35, t2 = 0.70)."""
OUTPUT_TOKENS = 1
"""RouteLLM generated these answers with max_new_tokens=1 (mmlu/generate_responses.py)."""

DEFAULT_COST_WEIGHTS: tuple[float, ...] = (
    0.0,
    *(float(f"{w:.3g}") for w in np.geomspace(0.01, 10.0, 49)),
)
"""linucb sweep: the cost_weight of `linucb.reward` (default 0.3): 0, then 0.01 to 10 in
equal ratios (16 points a decade). The strong share falls from most calls to a few
per cent over a narrow band of weights, and where that band sits depends on how cost
is priced (per call near 1, per token near 0.3), so an equal-ratio grid resolves it
under every pricing. It is a sweep resolution, fixed in advance and the same for
every stream order, not a fit."""

COST_MODES = ("per-token", "per-call", "absolute")
"""How the harness prices linucb's cost term. per-token: the gateway's reward, the
request's cost per billed token (`linucb.reward(..., tokens=...)`); per-call: the list
price at the data set's mean prompt size, APGR's own cost model; absolute: the request's
USD (`linucb.reward` without tokens), the gateway's reward before issue 17."""


# ---- data --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MMLUData:
    prompts: list[str]
    domains: list[str]
    weak: np.ndarray  # bool per prompt: the weak model answered correctly
    strong: np.ndarray
    excluded: int  # contaminated prompts dropped

    def __len__(self) -> int:
        return len(self.prompts)

    def subset(self, index: np.ndarray) -> MMLUData:
        return MMLUData(
            [self.prompts[i] for i in index],
            [self.domains[i] for i in index],
            self.weak[index],
            self.strong[index],
            self.excluded,
        )


def _flag(value: str, where: str) -> bool:
    if value not in ("True", "False"):
        raise ValueError(f"{where}: expected True/False, got {value!r}")
    return value == "True"


def load_mmlu(data_dir: Path) -> MMLUData:
    """Every mmlu_<domain>.csv, minus the prompts in contaminated_prompts.jsonl.

    RouteLLM drops a row when its prompt equals a contaminated `eval_prompt`.
    """
    folder = common.require_dir(data_dir, DATASET, ["contaminated_prompts.jsonl"])
    files = sorted(folder.glob("mmlu_*.csv"))
    if not files:
        raise common.DataMissingError(f"benchmark data incomplete: no mmlu_*.csv in {folder}")
    with (folder / "contaminated_prompts.jsonl").open(encoding="utf-8") as fh:
        contaminated = {json.loads(line)["eval_prompt"] for line in fh if line.strip()}
    prompts: list[str] = []
    domains: list[str] = []
    weak: list[bool] = []
    strong: list[bool] = []
    excluded = 0
    for path in files:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            for row in reader:
                if row["prompt"] in contaminated:
                    excluded += 1
                    continue
                where = f"{path.name}:{reader.line_num}"
                prompts.append(row["prompt"])
                domains.append(path.stem.removeprefix("mmlu_"))
                weak.append(_flag(row[WEAK_COLUMN], where))
                strong.append(_flag(row[STRONG_COLUMN], where))
    return MMLUData(prompts, domains, np.array(weak), np.array(strong), excluded)


# ---- routing with the real strategies ----------------------------------------------------


@dataclass
class Scored:
    """What the router knows about each prompt: its score and the bandit's context."""

    scores: np.ndarray
    contexts: list[np.ndarray]
    requests: list[Any]
    prompt_tokens: np.ndarray
    learned: np.ndarray  # the learned request scorer's score (routing.learned)
    chars: np.ndarray  # prompt length, the baseline every scorer must beat


def score_prompts(prompts: Sequence[str], show: bool = True) -> Scored:
    """Difficulty, learned score and the linucb context vector of each prompt."""
    scores, contexts, requests, tokens, learned_scores = [], [], [], [], []
    scorer = learned.load_scorer()
    for text in common.progress(prompts, "scoring prompts", len(prompts), show):
        req = common.user_request(text)
        features = full_transcript_features(req)
        scores.append(score(features))
        learned_scores.append(scorer.score(req))
        contexts.append(linucb.context_vector_for(req, features, learned_score=learned_scores[-1]))
        requests.append(req)
        tokens.append(features.prompt_tokens)
    chars = np.array([len(p) for p in prompts], dtype=np.float64)
    return Scored(np.array(scores), contexts, requests, np.array(tokens),
                  np.array(learned_scores), chars)  # fmt: skip


def gated_decisions(
    scored: Scored,
    thresholds: Sequence[float],
    show: bool = True,
    strategy: str = "gated_adaptive",
    scores: np.ndarray | None = None,
) -> np.ndarray:
    """A banding strategy's pick for every prompt at every t2 (True = strong model)."""
    cands = [WEAK, STRONG]
    values = scored.scores if scores is None else scores
    out = np.zeros((len(values), len(thresholds)), dtype=bool)
    for j, t2 in enumerate(common.progress(thresholds, f"{strategy} t2 sweep", None, show)):
        router = common.two_model_router(strategy, WEAK.name, STRONG.name, t2=t2)
        for i, (req, s) in enumerate(zip(scored.requests, values, strict=True)):
            ctx = StrategyContext(request=req, router=router, score=float(s))
            out[i, j] = common.first_choice(strategy, cands, ctx) == STRONG.name
    return out


def linucb_prequential(
    scored: Scored,
    weak: np.ndarray,
    strong: np.ndarray,
    order: np.ndarray,
    cost_weight: float,
    alpha: float,
    cost_mode: str = "per-token",
) -> np.ndarray:
    """One online pass: per prompt, choose with the current arms, score, then update.

    Returns the decisions (True = strong) indexed by prompt. The reward is
    `linucb.reward` (1 if correct, minus cost_weight x the saturating cost penalty),
    the cost priced as `cost_mode` says (COST_MODES): by default as the gateway does,
    the list price of the prompt's tokens plus one output token, divided by those
    tokens, so the penalty compares the arms and not the prompts' lengths.
    """
    if cost_mode not in COST_MODES:
        raise ValueError(f"cost_mode must be one of {COST_MODES}, got {cost_mode!r}")
    cands: list[Candidate] = [WEAK, STRONG]
    router = common.two_model_router("linucb", WEAK.name, STRONG.name, alpha=alpha)
    arms = {c.name: linucb.LinUCBArm.fresh() for c in cands}
    chose_strong = np.zeros(len(order), dtype=bool)
    mean_tokens = round(float(np.mean(scored.prompt_tokens)))
    for i in order:
        x = scored.contexts[i]
        ctx = StrategyContext(
            request=scored.requests[i],
            router=router,
            score=float(scored.scores[i]),
            bandit_arms=arms,
            bandit_x=x,
        )
        pick = common.first_choice("linucb", cands, ctx)
        is_strong = pick == STRONG.name
        correct = bool(strong[i] if is_strong else weak[i])
        model = STRONG if is_strong else WEAK
        tokens = mean_tokens if cost_mode == "per-call" else int(scored.prompt_tokens[i])
        cost = model.estimated_cost(tokens, OUTPUT_TOKENS)
        billed = tokens + OUTPUT_TOKENS if cost_mode == "per-token" else None
        r = linucb.reward(correct, cost, tokens=billed, cost_weight=cost_weight)
        arms[pick] = linucb.update(arms[pick], x, r)
        chose_strong[i] = is_strong
    return chose_strong


# ---- the benchmark -----------------------------------------------------------------------


@dataclass
class RouterResult:
    """A router's sweep. `curves` holds one curve per run (stream order or random seed)."""

    name: str
    knob: str
    curves: list[list[CurvePoint]]  # per run, without the added endpoints
    apgr: float  # mean over runs
    interval: tuple[float, float]  # 95 % bootstrap interval over prompts
    cpt50: float | None  # mean over runs
    cpt80: float | None
    averaged: bool  # runs are exchangeable (random): report their mean curve
    run_apgrs: list[float] = field(default_factory=list)

    def mean_curve(self) -> list[CurvePoint]:
        n = len(self.curves)
        return [
            CurvePoint(
                sum(c[k].share for c in self.curves) / n,
                sum(c[k].accuracy for c in self.curves) / n,
                self.curves[0][k].param,
            )
            for k in range(len(self.curves[0]))
        ]


def _summarise(
    name: str,
    knob: str,
    decision_sets: list[np.ndarray],
    params: Sequence[float],
    data: MMLUData,
    draws: int,
    averaged: bool = False,
) -> RouterResult:
    """APGR and CPT per run (each curve anchored at its endpoints), then their means.

    Per run, not on a mean curve: linucb's runs at one cost weight can land at
    opposite ends, and their average would be an operating point no run reached.
    """
    weak_acc, strong_acc = float(data.weak.mean()), float(data.strong.mean())
    curves = [curve_from_decisions(d, data.weak, data.strong, params) for d in decision_sets]
    anchored = [with_endpoints(c, weak_acc, strong_acc) for c in curves]
    run_apgrs = [apgr(c, weak_acc, strong_acc) for c in anchored]
    return RouterResult(
        name=name,
        knob=knob,
        curves=curves,
        apgr=float(np.mean(run_apgrs)),
        interval=bootstrap_apgr(decision_sets, data.weak, data.strong, draws=draws),
        cpt50=mean_or_none([cpt(c, weak_acc, strong_acc, 0.5) for c in anchored]),
        cpt80=mean_or_none([cpt(c, weak_acc, strong_acc, 0.8) for c in anchored]),
        averaged=averaged,
        run_apgrs=run_apgrs,
    )


def _score_sweep(
    name: str, runs: list[np.ndarray], bins: int, data: MMLUData, draws: int
) -> RouterResult:
    """A score's threshold sweep over its own deciles, one curve per run (stream order)."""
    decision_sets, grids = [], []
    for values in runs:
        grid = [float(c) for c in np.quantile(values, np.linspace(0.0, 1.0, bins + 1))]
        grid[-1] = float(np.nextafter(grid[-1], np.inf))  # the top cut-off: nothing strong
        decision_sets.append(np.stack([values >= t for t in grid], axis=1))
        grids.append(grid)
    return _summarise(name, "threshold", decision_sets, grids[0], data, draws)


def run(
    data: MMLUData,
    *,
    bins: int = 10,
    seeds: int = 3,
    alpha: float = 0.5,
    random_iters: int = 10,
    cost_weights: Sequence[float] = DEFAULT_COST_WEIGHTS,
    draws: int = 500,
    cost_mode: str = "per-token",
    show: bool = True,
    learned_scores: np.ndarray | None = None,
) -> dict[str, Any]:
    """Score, route and summarise; returns the JSON-ready results. `learned_scores`
    replaces the shipped scorer's scores (and linucb's learned_score feature)."""
    scored = score_prompts(data.prompts, show)
    if learned_scores is not None:
        scored.learned = learned_scores
        for x, value in zip(scored.contexts, learned_scores, strict=True):
            x[linucb.FEATURE_NAMES.index("learned_score")] = value
    n = len(data)

    thresholds = threshold_grid(scored.scores, bins)
    gated = _summarise(
        "gated_adaptive", "t2", [gated_decisions(scored, thresholds, show)], thresholds, data, draws
    )
    learned_grid = threshold_grid(scored.learned, bins)
    learned_decisions = gated_decisions(scored, learned_grid, show, "learned", scored.learned)
    learned_router = _summarise("learned", "t2", [learned_decisions], learned_grid, data, draws)
    length_grid = [float(c) for c in np.quantile(scored.chars, np.linspace(0, 1, bins + 1))]
    length_grid[-1] = float(np.nextafter(length_grid[-1], np.inf))
    length_decisions = np.stack([scored.chars >= t for t in length_grid], axis=1)
    length = _summarise("prompt_length", "chars", [length_decisions], length_grid, data, draws)

    runs = [(seed, cw) for seed in range(seeds) for cw in cost_weights]
    per_seed: list[list[np.ndarray]] = [[] for _ in range(seeds)]
    for seed, cw in common.progress(runs, "linucb prequential runs", len(runs), show):
        order = np.random.default_rng(seed).permutation(n)
        per_seed[seed].append(
            linucb_prequential(scored, data.weak, data.strong, order, cw, alpha, cost_mode)
        )
    bandit = _summarise(
        "linucb", "cost_weight", [np.stack(d, axis=1) for d in per_seed], cost_weights, data, draws
    )

    probabilities = [float(p) for p in np.linspace(0.0, 1.0, bins + 1)]
    random_sets = []
    for it in range(random_iters):
        rng = np.random.default_rng(1000 + it)
        random_sets.append(np.stack([rng.random(n) < p for p in probabilities], axis=1))
    rand = _summarise("random", "p", random_sets, probabilities, data, draws, averaged=True)

    x = np.stack(scored.contexts)
    orders = [np.random.default_rng(seed).permutation(n) for seed in range(seeds)]
    linear = [
        _score_sweep(name, runs, bins, data, draws)
        for name, runs in (
            ("linear_fit_in_sample", [in_sample_scores(x, data.weak, data.strong)]),
            ("linear_fit_cross_fitted", [cross_fitted_scores(x, data.weak, data.strong)]),
            ("linear_fit_prequential",
             [prequential_scores(x, data.weak, data.strong, o) for o in orders]),
        )
    ]  # fmt: skip
    # the linear fit with the bandit's information: one outcome per prompt, from a fair
    # coin's log (seeded per order) or from linucb's own log at the default cost weight
    j0 = int(np.argmin([abs(w - linucb.DEFAULT_COST_WEIGHT) for w in cost_weights]))
    linear += [
        _score_sweep(name, runs, bins, data, draws)
        for name, runs in (
            ("linear_fit_bandit_coin_direct",
             [bandit_feedback_scores(x, data.weak, data.strong, o, seed=s)
              for s, o in enumerate(orders)]),
            ("linear_fit_bandit_coin_ipw",
             [bandit_feedback_scores(x, data.weak, data.strong, o, seed=s, estimator="ipw")
              for s, o in enumerate(orders)]),
            ("linear_fit_linucb_log_direct",
             [bandit_feedback_scores(x, data.weak, data.strong, o, per_seed[s][j0])
              for s, o in enumerate(orders)]),
        )
    ]  # fmt: skip
    greedy_sets = [greedy_bandit_decisions(x, data.weak, data.strong, o) for o in orders]
    greedy = _summarise("greedy_bandit", "margin", greedy_sets, GREEDY_MARGINS, data, draws)

    weak_acc, strong_acc = float(data.weak.mean()), float(data.strong.mean())
    oracle_points = [
        CurvePoint(p, optimal_accuracy(data.weak, data.strong, p), p) for p in probabilities
    ]
    strong_only = ~data.weak & data.strong
    return {
        "dataset": DATASET,
        "code": common.code_version(),
        "prompts": n,
        "excluded_contaminated": data.excluded,
        "weak_model": WEAK_COLUMN,
        "strong_model": STRONG_COLUMN,
        "weak_accuracy": weak_acc,
        "strong_accuracy": strong_acc,
        "settings": {
            "bins": bins,
            "seeds": seeds,
            "alpha": alpha,
            "random_iters": random_iters,
            "cost_mode": cost_mode,
        },
        "routers": [
            _result_json(r) for r in (learned_router, gated, bandit, *linear, greedy, length, rand)
        ],
        "optimal": {
            "apgr": apgr(oracle_points, weak_acc, strong_acc),
            "cpt50": cpt(oracle_points, weak_acc, strong_acc, 0.5),
            "cpt80": cpt(oracle_points, weak_acc, strong_acc, 0.8),
            "points": [_point_json(p) for p in oracle_points],
        },
        "diagnostics": {
            "linucb_strong_share_at_default_cost_weight": _share_at(
                bandit, linucb.DEFAULT_COST_WEIGHT
            ),
            "score_quantiles": {
                str(q): float(np.quantile(scored.scores, q)) for q in (0, 0.5, 0.9, 0.99, 1)
            },
            "default_thresholds": [DEFAULTS.t1, DEFAULTS.t2],
            "share_at_default_t2": float(np.mean(scored.scores >= DEFAULTS.t2)),
            "share_at_default_t1": float(np.mean(scored.scores >= DEFAULTS.t1)),
            "strong_only_correct": float(strong_only.mean()),
            "weak_only_correct": float((data.weak & ~data.strong).mean()),
            "auroc_strong_only": auroc(scored.scores, strong_only),
            "auroc_weak_wrong": auroc(scored.scores, ~data.weak),
            "auroc_within_domain": within_domain_auroc(scored.scores, strong_only, data.domains),
            "subject_correlation": subject_correlation(scored.scores, strong_only, data.domains),
            "feature_auroc": {
                name: auroc(np.array([x[k] for x in scored.contexts]), strong_only)
                for k, name in enumerate(linucb.FEATURE_NAMES)
                if len({float(x[k]) for x in scored.contexts}) > 1
            },
        },
    }


def _share_at(r: RouterResult, weight: float) -> list[float]:
    """Per stream order, the strong share at the sweep point nearest `weight`: no order
    may lock onto one arm (issue 17)."""
    return [min(c, key=lambda p: abs(p.param - weight)).share for c in r.curves]


def _point_json(p: CurvePoint) -> dict[str, float]:
    return {"param": p.param, "share": p.share, "accuracy": p.accuracy}


def _result_json(r: RouterResult) -> dict[str, Any]:
    return {
        "name": r.name,
        "knob": r.knob,
        "runs": len(r.curves),
        "averaged": r.averaged,
        "apgr": r.apgr,
        "apgr_runs": r.run_apgrs,
        "apgr_ci95": list(r.interval),
        "cpt50": r.cpt50,
        "cpt80": r.cpt80,
        "mean_points": [_point_json(p) for p in r.mean_curve()],
        "run_points": [[_point_json(p) for p in c] for c in r.curves],
    }


# ---- report ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.routellm_mmlu",
        description="RouteLLM MMLU benchmark (APGR, CPT) for gated_adaptive, linucb, random.",
    )
    common.add_common_arguments(parser, common.REPO_ROOT / "eval" / "out" / "routellm_mmlu")
    parser.add_argument("--bins", type=int, default=10, help="sweep points (RouteLLM: 10)")
    parser.add_argument("--seeds", type=int, default=3, help="linucb stream orders")
    parser.add_argument("--alpha", type=float, default=0.5, help="linucb exploration alpha")
    parser.add_argument("--random-iters", type=int, default=10, help="random router runs")
    parser.add_argument("--limit", type=int, default=None, help="seeded subset (quick runs)")
    parser.add_argument(
        "--subjects",
        choices=("all", "train", "held-out"),
        default="all",
        help="the learned scorer's subject split (eval.train_request_scorer)",
    )
    parser.add_argument(
        "--linucb-cost",
        choices=COST_MODES,
        default="per-token",
        help="linucb's cost: per-token (the gateway's reward: cost per billed token), "
        "per-call (list price at the mean prompt size, APGR's cost model) or absolute "
        "(the request's USD, the gateway's reward before issue 17)",
    )
    parser.add_argument(
        "--learned-oof",
        action="store_true",
        help="with --subjects train: out-of-fold learned scores (a development set)",
    )
    args = parser.parse_args(argv)

    data = load_mmlu(args.data)
    if args.subjects != "all":
        from eval.train_request_scorer import held_out_subjects

        held = set(held_out_subjects(sorted(set(data.domains))))
        keep = [(d in held) == (args.subjects == "held-out") for d in data.domains]
        data = data.subset(np.flatnonzero(keep))
    if args.limit is not None and args.limit < len(data):
        pick = np.sort(np.random.default_rng(0).choice(len(data), args.limit, replace=False))
        data = data.subset(pick)
    oof = None
    if args.learned_oof:
        if args.subjects != "train" or args.limit is not None:
            parser.error("--learned-oof needs --subjects train and no --limit")
        from eval.train_request_scorer import out_of_fold_scores

        oof = out_of_fold_scores(data, show=not args.quiet)
    results = run(
        data, learned_scores=oof, bins=args.bins, seeds=args.seeds, alpha=args.alpha,
        random_iters=args.random_iters, show=not args.quiet,
        cost_mode=args.linucb_cost,
    )  # fmt: skip
    results["subjects"] = args.subjects
    results["linucb_cost"] = args.linucb_cost
    results["learned_oof"] = args.learned_oof
    out: Path = args.out
    common.write_json(out / "results.json", results)
    plot_curves(results, out / "mmlu_curve.png")
    markdown = render_markdown(results, figure="mmlu_curve.png")
    (out / "summary.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"\nwrote {out / 'results.json'}, {out / 'summary.md'}, {out / 'mmlu_curve.png'}")
    return 0


if __name__ == "__main__":
    common.run_cli(main)
