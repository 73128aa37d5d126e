"""Where linucb's APGR goes, on the development set: each ingredient changed alone.

linucb differs from the prequential ridge (eval.linear_references) in its information
(each arm learns only from the prompts it served), its exploration (MIN_PULLS first,
then EXPLORE_SHARE of requests hashed to an arm) and its prior (optimistic intercept,
warm-start slope on learned_score). This replays linucb's two-arm rule with the
batched replica (eval.linucb_sim; `Rule.gateway()` decides exactly as the real
strategy, which a test checks) with one ingredient changed at a time, under the
gateway's per-token reward, over the training subjects with out-of-fold learned
scores, next to the linear-fit references on the same stream orders. It never reads
the held-out subjects.

    .venv/bin/python -m eval.linucb_diagnostics [--data DIR] [--seeds N] [--first-seed K]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from eval import common
from eval.linear_references import bandit_feedback_scores, prequential_scores
from eval.linucb_sim import Rule, penalties, simulate, sweep_apgr
from eval.routellm_mmlu import DEFAULT_COST_WEIGHTS, STRONG, WEAK, load_mmlu, score_prompts
from eval.train_request_scorer import score_metrics
from tiergate.routing import linucb

_LS = linucb.FEATURE_NAMES.index("learned_score")


def _precision(rest: float, warm: float, intercept: float | None = None) -> np.ndarray:
    p = np.full(linucb.DIM, rest)
    p[_LS] = warm
    if intercept is not None:
        p[0] = intercept
    return p


def _slope_prior(weak_slope: float, strong_slope: float) -> tuple[np.ndarray, np.ndarray]:
    """The gateway's prior (optimistic intercept) with other learned_score slopes."""
    lo, hi = linucb.arm_prior(-1.0), linucb.arm_prior(1.0)
    lo[_LS], hi[_LS] = weak_slope, strong_slope
    return lo, hi


def _least_squares_prior(x: np.ndarray, weak: np.ndarray, strong: np.ndarray) -> tuple[
    np.ndarray, np.ndarray
]:  # fmt: skip
    """Each model's correctness regressed on all 13 context features (least squares on
    the development set, a prior fitted where it is scored: its best case)."""
    out = []
    for y in (weak, strong):
        theta, *_ = np.linalg.lstsq(x, y.astype(np.float64), rcond=None)
        out.append(theta)
    return out[0], out[1]


def _calibrated_prior(x: np.ndarray, weak: np.ndarray, strong: np.ndarray) -> tuple[
    np.ndarray, np.ndarray
]:  # fmt: skip
    """Each model's correctness as intercept + slope on learned_score (least squares on
    the development set: four numbers, the prior's best case)."""
    design = np.column_stack([np.ones(len(weak)), x[:, _LS]])
    out = []
    for y in (weak, strong):
        (c, s), *_ = np.linalg.lstsq(design, y.astype(np.float64), rcond=None)
        m = np.zeros(linucb.DIM)
        m[0], m[_LS] = c, s
        out.append(m)
    return out[0], out[1]


def rules(x: np.ndarray, weak: np.ndarray, strong: np.ndarray) -> list[tuple[str, Rule]]:
    g = Rule.gateway()
    pinned = _precision(1e9, 1e9)
    calibrated = _calibrated_prior(x, weak, strong)
    firm = _precision(1000.0, 1000.0, intercept=10.0)  # intercept as now, every slope 1,000
    firmer = _precision(1000.0, 1e4, intercept=10.0)
    fitted_slopes = _slope_prior(calibrated[0][_LS], calibrated[1][_LS])
    return [
        ("**linucb as shipped now**", g),
        ("linucb before this change (priors worth 1, warm start 100, 5% exploration)",
         Rule.previous()),
        ("now, but exploration 5%", g.but(explore=0.05)),
        ("now, but priors worth 1 observation", g.but(prior_precision=_precision(1.0, 1000.0))),
        ("now, but warm start worth 100", g.but(prior_precision=_precision(10.0, 100.0))),
        ("now, but no exploration after MIN_PULLS", g.but(explore=0.0)),
        ("now, but ranked by the posterior mean (alpha 0)", g.but(alpha=0.0)),
        ("now, but updates weighted by 1 / propensity", g.but(ipw=True)),
        ("now, but arms learn quality only, cost subtracted when ranking",
         g.but(known_cost=True)),
        ("now, but exploration 20% decaying to 2% (1 / sqrt(t) after 200)",
         g.but(explore_start=0.2, explore_decay=0.5)),
        ("now, with full information (both arms learn every outcome)",
         g.but(full_information=True)),
        ("prior alone: every weight pinned to the fitted prior, cost subtracted, no "
         "exploration", g.but(prior_mean=calibrated, prior_precision=pinned, known_cost=True,
                              explore=0.0, min_pulls=0)),
        ("prior, intercepts learned (slopes pinned), no exploration",
         g.but(prior_precision=np.r_[10.0, [1e9] * 12], explore=0.0)),
        ("prior, intercepts learned (slopes pinned), 2% exploration",
         g.but(prior_precision=np.r_[10.0, [1e9] * 12])),
        ("prior alone (as above), but 2% exploration",
         g.but(prior_mean=calibrated, prior_precision=pinned, known_cost=True, min_pulls=0)),
        ("fitted intercepts and slope pinned, intercepts learned from both outcomes, 2% "
         "exploration", g.but(prior_mean=calibrated, prior_precision=_precision(1e9, 1e9, 10.0),
                              known_cost=True, full_information=True)),
        ("tried, not kept: every slope's prior worth 1,000 (intercept 10)",
         g.but(prior_precision=firm)),
        ("tried, not kept: warm start +/-0.3 worth 10,000, other slopes 1,000, intercept 10",
         g.but(prior_mean=_slope_prior(-0.3, 0.3), prior_precision=firmer)),
        ("tried, not kept: the same, exploration 1%",
         g.but(prior_mean=_slope_prior(-0.3, 0.3), prior_precision=firmer, explore=0.01)),
        ("tried, not kept: warm start slopes fitted (least squares on learned_score), worth "
         "10,000, other slopes 1,000, intercept 10",
         g.but(prior_mean=fitted_slopes, prior_precision=firmer)),
        ("tried, not kept: all 13 weights' prior fitted per model (least squares), slopes "
         "1,000, intercept 10", g.but(prior_mean=_least_squares_prior(x, weak, strong),
                                      prior_precision=firm)),
    ]  # fmt: skip


def references(
    x: np.ndarray, weak: np.ndarray, strong: np.ndarray, logs: dict[int, np.ndarray]
) -> list[tuple[str, Callable[[int, np.ndarray], np.ndarray]]]:
    """Linear fits swept over their score's deciles, one per stream order: each is called
    with the order's seed (which also seeds the fair coin) and the order."""
    return [
        ("learned score alone (out-of-fold)", lambda s, o: x[:, _LS]),
        ("linear fit, prequential, full information (both outcomes of every past prompt)",
         lambda s, o: prequential_scores(x, weak, strong, o)),
        ("linear fit, prequential, bandit information: a fair coin's log, per-model ridges",
         lambda s, o: bandit_feedback_scores(x, weak, strong, o, seed=s)),
        ("linear fit, prequential, bandit information: a fair coin's log, IPW ridge",
         lambda s, o: bandit_feedback_scores(x, weak, strong, o, seed=s, estimator="ipw")),
        ("linear fit, prequential, bandit information: linucb's own log at cost weight "
         f"{linucb.DEFAULT_COST_WEIGHT}, per-model ridges",
         lambda s, o: bandit_feedback_scores(x, weak, strong, o, logs[s])),
    ]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.linucb_diagnostics",
        description="linucb's ingredients changed one by one, on the development set.",
    )
    parser.add_argument("--data", type=Path, default=common.default_data_dir())
    parser.add_argument("--seeds", type=int, default=5, help="stream orders")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seed of the first order (5: confirmation orders 5-9)")  # fmt: skip
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    from eval.train_request_scorer import held_out_subjects, out_of_fold_scores

    data = load_mmlu(args.data)
    held = set(held_out_subjects(sorted(set(data.domains))))
    data = data.subset(np.flatnonzero([d not in held for d in data.domains]))
    oof = out_of_fold_scores(data, show=not args.quiet)
    scored = score_prompts(data.prompts, show=not args.quiet)
    x = np.stack(scored.contexts)
    x[:, _LS] = oof
    weak, strong = data.weak, data.strong
    pen = penalties(scored.prompt_tokens, (WEAK, STRONG))
    weights = np.array(DEFAULT_COST_WEIGHTS)
    j0 = int(np.argmin(np.abs(weights - linucb.DEFAULT_COST_WEIGHT)))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    orders = [np.random.default_rng(s).permutation(len(data)) for s in seeds]
    rows: list[list[str]] = []
    logs: dict[int, np.ndarray] = {}
    for k, (label, rule) in enumerate(rules(x, weak, strong)):
        runs, shares = [], []
        for seed, o in zip(seeds, orders, strict=True):
            d = simulate(rule, x, (weak * 1.0, strong * 1.0), pen, o, weights)
            runs.append(sweep_apgr(d, weak, strong, weights))
            shares.append(float(d[:, j0].mean()))
            if k == 0:  # the gateway's rule: its log feeds the last reference
                logs[seed] = d[:, j0]
        rows.append([label, f"{np.mean(runs):.3f}", ", ".join(f"{r:.3f}" for r in runs),
                     f"{min(shares):.0%}-{max(shares):.0%}"])  # fmt: skip
        if not args.quiet:
            print(rows[-1], flush=True)
    for label, fit in references(x, weak, strong, logs):
        runs = [score_metrics(fit(s, o), weak, strong)["apgr"]
                for s, o in zip(seeds, orders, strict=True)]  # fmt: skip
        rows.append([label, f"{np.mean(runs):.3f}", ", ".join(f"{r:.3f}" for r in runs), "-"])
        if not args.quiet:
            print(rows[-1], flush=True)
    headers = ["variant (development set)", "APGR", "per stream order",
               f"strong share at cost weight {linucb.DEFAULT_COST_WEIGHT}"]  # fmt: skip
    print(common.markdown_table(headers, rows))
    return 0


if __name__ == "__main__":
    common.run_cli(main)
