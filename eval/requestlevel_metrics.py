"""The request-level benchmarks' metrics, as pure functions (no I/O).

RouteLLM (APGR, CPT): the paper (Ong et al., "RouteLLM: Learning to Route LLMs with
Preference Data", arXiv 2406.18665, evaluation metrics) and its code,
lm-sys/RouteLLM routellm/evals/evaluate.py (pct_call_metric, auc_metric,
apgr_metric) and routellm/evals/benchmarks.py (quantile cut-offs, optimal accuracy).

RouterArena (cost, arena score): RouteWorks/RouterArena llm_evaluation/run.py
(compute_arena_score, compute_router_metrics) and llm_evaluation/evaluate_models.py
(calculate_inference_cost).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CurvePoint:
    """One operating point: strong-call share and accuracy, both fractions in [0, 1]."""

    share: float
    accuracy: float
    param: float = math.nan  # the swept knob (t2, cost weight or p)


def pgr(accuracy: float, weak: float, strong: float) -> float:
    """Performance gap recovered: 0 at the weak model's accuracy, 1 at the strong one's."""
    return (accuracy - weak) / (strong - weak)


def with_endpoints(points: Sequence[CurvePoint], weak: float, strong: float) -> list[CurvePoint]:
    """Add the all-weak (0, weak) and all-strong (1, strong) points any router can reach.

    RouteLLM's quantile sweep always contains both; a cost-weight sweep need not, and
    without them APGR would be normalised over a narrower share range.
    """
    return [CurvePoint(0.0, weak), *points, CurvePoint(1.0, strong)]


def apgr(points: Sequence[CurvePoint], weak: float, strong: float) -> float:
    """RouteLLM's APGR: (AUC - AUC_weak) / (AUC_strong - AUC_weak), trapezoids over share.

    AUC_weak and AUC_strong are the flat lines at each model's accuracy over the same
    share range (evaluate.py: apgr_metric), so a straight line from (0, weak) to
    (1, strong), i.e. the random router's expectation, scores exactly 0.5.
    """
    ordered = sorted(points, key=lambda p: p.share)
    x = np.array([p.share for p in ordered])
    y = np.array([p.accuracy for p in ordered])
    span = float(x[-1] - x[0])
    if span <= 0 or strong == weak:
        raise ValueError("APGR needs points at two strong-call shares and a performance gap")
    auc = float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))
    return (auc - weak * span) / ((strong - weak) * span)


def cpt(points: Sequence[CurvePoint], weak: float, strong: float, fraction: float) -> float | None:
    """Call-performance threshold: the smallest strong-call share reaching PGR `fraction`.

    Walks the piecewise-linear curve in share order and returns the first crossing
    of acc_weak + fraction * (acc_strong - acc_weak), or None if it is never reached.
    On a monotone curve this equals RouteLLM's np.interp(target, accuracy, share);
    on a non-monotone one np.interp is undefined, and the first crossing is the
    paper's "minimum % of calls" definition.
    """
    target = weak + fraction * (strong - weak)
    ordered = sorted(points, key=lambda p: p.share)
    if ordered[0].accuracy >= target:
        return ordered[0].share
    for a, b in itertools.pairwise(ordered):
        if b.accuracy >= target > a.accuracy:
            return a.share + (b.share - a.share) * (target - a.accuracy) / (b.accuracy - a.accuracy)
    return None


def optimal_accuracy(weak: np.ndarray, strong: np.ndarray, share: float) -> float:
    """The oracle router (RouteLLM's get_optimal_accuracy): strong calls go first to the
    prompts only the strong model answers, up to `share` of all prompts."""
    bonus = min(share * len(weak), float(np.sum(~weak & strong)))
    return (float(np.sum(weak)) + bonus) / len(weak)


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of `scores` for boolean `labels` (Mann-Whitney U, ties
    at half weight): 0.5 means the score carries no information about the label."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):  # average ranks over ties
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    positives = int(np.sum(labels))
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return math.nan
    u = float(np.sum(ranks[labels])) - positives * (positives + 1) / 2.0
    return u / (positives * negatives)


def curve_from_decisions(
    decisions: np.ndarray, weak: np.ndarray, strong: np.ndarray, params: Sequence[float]
) -> list[CurvePoint]:
    """Operating points of a decision matrix (prompts x settings, True = strong)."""
    correct = np.where(decisions, strong[:, None], weak[:, None])
    shares, accs = decisions.mean(axis=0), correct.mean(axis=0)
    return [
        CurvePoint(float(s), float(a), float(p))
        for s, a, p in zip(shares, accs, params, strict=True)
    ]


def bootstrap_apgr(
    decision_sets: Sequence[np.ndarray],
    weak: np.ndarray,
    strong: np.ndarray,
    *,
    draws: int = 500,
    seed: int = 0,
) -> tuple[float, float]:
    """95 % percentile interval of the (run-averaged) APGR, resampling prompts.

    Each decision matrix (prompts x settings) comes from the real router; only the
    prompts are resampled, so the interval is sampling noise of the benchmark, with
    each curve anchored at its endpoints as in `with_endpoints`.
    """
    rng = np.random.default_rng(seed)
    n = len(weak)
    values = np.zeros(draws)
    for start in range(0, draws, 100):
        size = min(100, draws - start)
        counts = [np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(size)]
        w = np.stack(counts).astype(np.float64) / n  # resampling weights, rows sum to 1
        acc_weak, acc_strong = w @ weak, w @ strong
        for d in decision_sets:
            share = w @ d
            acc = w @ np.where(d, strong[:, None], weak[:, None])
            x = np.hstack([np.zeros((size, 1)), share, np.ones((size, 1))])
            y = np.hstack([acc_weak[:, None], acc, acc_strong[:, None]])
            order = np.argsort(x, axis=1, kind="mergesort")
            x, y = np.take_along_axis(x, order, 1), np.take_along_axis(y, order, 1)
            auc = np.sum((x[:, 1:] - x[:, :-1]) * (y[:, 1:] + y[:, :-1]) / 2.0, axis=1)
            values[start : start + size] += (auc - acc_weak) / (acc_strong - acc_weak)
    values /= len(decision_sets)
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def threshold_grid(scores: np.ndarray, bins: int) -> list[float]:
    """RouteLLM's cut-offs: the `bins`-quantiles of the scores, min and max included.

    The top cut-off is nudged just above the maximum, because RouteLLM compares the
    last cut-off with ">" (nothing routed strong) and the gate compares with ">=".
    """
    cuts = [float(c) for c in np.quantile(scores, np.linspace(0.0, 1.0, bins + 1))]
    cuts[-1] = min(float(np.nextafter(cuts[-1], np.inf)), 1.0)
    return cuts


def verdict(interval: tuple[float, float]) -> str:
    """Compare an APGR interval with the random router's exact expectation, 0.5."""
    lo, hi = interval
    if lo > 0.5:
        return "better than random"
    if hi < 0.5:
        return "**worse than random**"
    return "**no better than random** (interval contains 0.5)"


def within_domain_auroc(scores: np.ndarray, labels: np.ndarray, domains: Sequence[str]) -> float:
    """AUROC inside each MMLU subject, averaged weighted by subject size: whether the
    score ranks questions of one subject, not just subjects against each other."""
    names = np.array(domains)
    values, weights = [], []
    for name in sorted(set(domains)):
        inside = names == name
        if 0 < int(labels[inside].sum()) < int(inside.sum()):
            values.append(auroc(scores[inside], labels[inside]))
            weights.append(int(inside.sum()))
    return float(np.average(values, weights=weights)) if values else float("nan")


def subject_correlation(scores: np.ndarray, labels: np.ndarray, domains: Sequence[str]) -> float:
    """Pearson correlation, over subjects, of the mean score and the label rate."""
    names = np.array(domains)
    subjects = sorted(set(domains))
    if len(subjects) < 3:
        return float("nan")
    means = [float(scores[names == s].mean()) for s in subjects]
    rates = [float(labels[names == s].mean()) for s in subjects]
    return float(np.corrcoef(means, rates)[0, 1])


def mean_or_none(values: Sequence[float | None]) -> float | None:
    """The mean, or None when any value is None (a CPT some run never reached)."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known and len(known) == len(values) else None


# ---- RouterArena ------------------------------------------------------------------------

ARENA_BETA = 0.1
ARENA_C_MAX = 200.0
ARENA_C_MIN = 0.0044


def inference_cost(price: tuple[float, float], input_tokens: int, output_tokens: int) -> float:
    """USD of one query: tokens x list price per 1M (RouterArena's calculate_inference_cost)."""
    return input_tokens / 1e6 * price[0] + output_tokens / 1e6 * price[1]


def arena_score(
    cost_per_1k: float,
    accuracy: float,
    beta: float = ARENA_BETA,
    c_max: float = ARENA_C_MAX,
    c_min: float = ARENA_C_MIN,
) -> float:
    """RouterArena's S_beta: a weighted harmonic mean of accuracy and log-scaled cost.

    The cost is clamped to [c_min, c_max] (USD per 1k queries), as in run.py.
    """
    if not cost_per_1k > 0:
        raise ValueError(f"cost per 1k queries must be positive, got {cost_per_1k}")
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"accuracy must be in [0, 1], got {accuracy}")
    cost = max(c_min, min(cost_per_1k, c_max))
    c = (math.log2(c_max) - math.log2(cost)) / (math.log2(c_max) - math.log2(c_min))
    return (1 + beta) * accuracy * c / (beta * accuracy + c)


@dataclass(frozen=True)
class ArenaMetrics:
    accuracy: float
    total_cost: float
    cost_per_1k: float
    arena_score: float
    queries: int
    picks: dict[str, int]


def router_metrics(entries: Sequence[Mapping[str, Any]]) -> ArenaMetrics:
    """Accuracy, cost and arena score of a prediction file, as RouterArena computes them
    (run.py, compute_router_metrics): optimality entries are left out, accuracy is the
    mean over entries that have one, cost sums the positive costs over all queries."""
    regular = [e for e in entries if not e.get("for_optimality", False)]
    accuracies = [float(e["accuracy"]) for e in regular if e.get("accuracy") is not None]
    costs = [float(e["cost"]) for e in regular if e.get("cost") is not None and e["cost"] > 0]
    if not accuracies or not costs:
        raise ValueError("prediction file has no evaluated entries (accuracy and cost)")
    accuracy = sum(accuracies) / len(accuracies)
    total = sum(costs)
    per_1k = total / len(regular) * 1000
    picks = Counter(str(e["prediction"]) for e in regular)
    return ArenaMetrics(accuracy, total, per_1k, arena_score(per_1k, accuracy), len(regular),
                        dict(sorted(picks.items())))  # fmt: skip


def iso_accuracy(target: float, cost_per_1k: np.ndarray) -> np.ndarray:
    """Accuracy at which the arena score equals `target` for each cost (NaN if none):
    S = (1 + b) A C / (b A + C) solved for A = S C / ((1 + b) C - S b)."""
    clamped = np.clip(cost_per_1k, ARENA_C_MIN, ARENA_C_MAX)
    c = (math.log2(ARENA_C_MAX) - np.log2(clamped)) / (
        math.log2(ARENA_C_MAX) - math.log2(ARENA_C_MIN)
    )
    denom = (1 + ARENA_BETA) * c - target * ARENA_BETA
    with np.errstate(divide="ignore", invalid="ignore"):
        acc = np.where(denom > 0, target * c / denom, np.nan)
    return np.where((acc >= 0) & (acc <= 1), acc, np.nan)
