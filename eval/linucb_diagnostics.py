"""Where linucb's APGR goes, on the development set: each ingredient switched off.

linucb differs from the prequential ridge (eval.linear_references) in three ways:
bandit feedback (each arm learns only from the prompts it served), exploration
(MIN_PULLS first, then EXPLORE_SHARE of requests hashed to an arm), and the prior
(optimistic intercept, warm-start slope on learned_score). This replays linucb's
decision rule (strategies._linucb for two arms; `variant(bandit=True, explore=True,
prior=True)` makes the same decisions as the real strategy, which a test checks) with
each ingredient on or off, under the gateway's per-token reward, over the training
subjects with out-of-fold learned scores. It never reads the held-out subjects.

    .venv/bin/python -m eval.linucb_diagnostics [--data DIR] [--seeds N]
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval import common
from eval.requestlevel_metrics import apgr, curve_from_decisions, with_endpoints
from eval.routellm_mmlu import (
    DEFAULT_COST_WEIGHTS,
    OUTPUT_TOKENS,
    STRONG,
    WEAK,
    Scored,
    load_mmlu,
    score_prompts,
)
from tiergate.routing import linucb


@dataclass(frozen=True)
class Variant:
    bandit: bool  # False: both arms learn every prompt's outcome (full information)
    explore: bool  # MIN_PULLS first and EXPLORE_SHARE hashed exploration
    prior: bool  # optimistic intercept and the learned-score warm start

    @property
    def label(self) -> str:
        return (
            f"{'bandit feedback' if self.bandit else 'full information'}, "
            f"exploration {'on' if self.explore else 'off'}, prior {'on' if self.prior else 'off'}"
        )


def decisions(
    v: Variant,
    scored: Scored,
    weak: np.ndarray,
    strong: np.ndarray,
    order: np.ndarray,
    cost_weight: float,
    alpha: float = 0.5,
) -> np.ndarray:
    """linucb's two-arm decision rule (index 0 weak, first in balanced order) per prompt."""
    arms = [linucb.LinUCBArm.fresh(), linucb.LinUCBArm.fresh()]
    priors = [linucb.arm_prior(-1.0), linucb.arm_prior(1.0)] if v.prior else [None, None]
    models, outcomes = (WEAK, STRONG), (weak, strong)
    out = np.zeros(len(weak), dtype=bool)
    for i in order:
        x = scored.contexts[i]
        ucb = [arms[k].ucb(x, alpha, priors[k]) for k in (0, 1)]
        pulls = [a.pulls for a in arms]
        if v.explore and min(pulls) < linucb.MIN_PULLS:
            pick = min((min(pulls[k], linucb.MIN_PULLS), -ucb[k], k) for k in (0, 1))[2]
        else:
            pick = 0 if ucb[0] >= ucb[1] else 1
            explored = linucb.exploration_pick(x, sum(pulls), 2) if v.explore else None
            pick = pick if explored is None else explored
        tokens = int(scored.prompt_tokens[i])
        for k in (pick,) if v.bandit else (0, 1):
            cost = models[k].estimated_cost(tokens, OUTPUT_TOKENS)
            correct = bool(outcomes[k][i])
            r = linucb.reward(correct, cost, tokens=tokens + OUTPUT_TOKENS, cost_weight=cost_weight)
            arms[k] = linucb.update(arms[k], x, r)
        out[i] = pick == 1
    return out


def variant_apgr(
    v: Variant, scored: Scored, weak: np.ndarray, strong: np.ndarray, order: np.ndarray
) -> float:
    d = np.stack([decisions(v, scored, weak, strong, order, w) for w in DEFAULT_COST_WEIGHTS], 1)
    wa, sa = float(weak.mean()), float(strong.mean())
    curve = curve_from_decisions(d, weak, strong, DEFAULT_COST_WEIGHTS)
    return apgr(with_endpoints(curve, wa, sa), wa, sa)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.linucb_diagnostics",
        description="linucb's ingredients switched off one by one, on the development set.",
    )
    parser.add_argument("--data", type=Path, default=common.default_data_dir())
    parser.add_argument("--seeds", type=int, default=2, help="stream orders")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    from eval.train_request_scorer import held_out_subjects, out_of_fold_scores

    data = load_mmlu(args.data)
    held = set(held_out_subjects(sorted(set(data.domains))))
    data = data.subset(np.flatnonzero([d not in held for d in data.domains]))
    oof = out_of_fold_scores(data, show=not args.quiet)
    scored = score_prompts(data.prompts, show=not args.quiet)
    for x, value in zip(scored.contexts, oof, strict=True):
        x[linucb.FEATURE_NAMES.index("learned_score")] = value
    orders = [np.random.default_rng(s).permutation(len(data)) for s in range(args.seeds)]
    rows = []
    for bandit, explore, prior in itertools.product((True, False), repeat=3):
        v = Variant(bandit, explore, prior)
        runs = [variant_apgr(v, scored, data.weak, data.strong, o) for o in orders]
        rows.append([v.label, f"{np.mean(runs):.3f}", ", ".join(f"{r:.3f}" for r in runs)])
        if not args.quiet:
            print(rows[-1], flush=True)
    print(common.markdown_table(["linucb variant", "APGR", "per stream order"], rows))
    return 0


if __name__ == "__main__":
    common.run_cli(main)
