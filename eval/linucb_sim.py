"""A batched two-arm replica of linucb's decision rule, for the development set.

One prequential pass runs every cost weight of the sweep at once (arrays of shape
(weights, arms, d, d)), so a variant of the rule costs seconds instead of minutes.
`Rule` spells out each ingredient: the prior (mean and precision per arm), what the
ranking adds to the posterior mean (UCB width), the forced-exploration schedule, and
how an observation is weighted (plain, or by inverse propensity). `Rule.gateway()` is
the rule strategies._linucb runs (tests/test_linucb_sim.py checks it against the real
strategy); `Rule.previous()` the one before issue 17's second pass. Pure numpy, no I/O.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

import numpy as np

from tiergate.routing import linucb

_LS = linucb.FEATURE_NAMES.index("learned_score")


@dataclass(frozen=True)
class Rule:
    """One variant of the two-arm rule (arm 0 weak, arm 1 strong)."""

    prior_mean: tuple[np.ndarray, np.ndarray] | None  # None: no prior (mean 0)
    prior_precision: np.ndarray  # diagonal, per weight (shared by both arms)
    alpha: float = 0.5  # UCB width added to the ranking
    min_pulls: int = linucb.MIN_PULLS
    explore: float = linucb.EXPLORE_SHARE  # hashed forced exploration share
    explore_decay: float = 0.0  # share = max(explore, explore_start * (t0 / t) ** decay)
    explore_start: float = 0.0
    decay_t0: int = 200
    ipw: bool = False  # weight each update by 1 / propensity of the served arm
    full_information: bool = False  # both arms learn every outcome (a reference)
    known_cost: bool = False  # arms learn quality only; the known cost is subtracted when ranking

    @classmethod
    def gateway(cls) -> Rule:
        """The rule strategies._linucb runs, from linucb's constants."""
        precision = np.full(linucb.DIM, linucb.PRIOR_PRECISION)
        precision[_LS] = linucb.WARM_START_PRECISION
        return cls(
            prior_mean=(linucb.arm_prior(-1.0), linucb.arm_prior(1.0)),
            prior_precision=precision,
            explore=linucb.EXPLORE_SHARE,
        )

    @classmethod
    def previous(cls) -> Rule:
        """The rule before issue 17's second pass: priors worth one observation, the
        warm start worth 100, 5% forced exploration."""
        precision = np.ones(linucb.DIM)
        precision[_LS] = 100.0
        return cls.gateway().but(prior_precision=precision, explore=0.05)

    def but(self, **changes: object) -> Rule:
        return replace(self, **changes)  # type: ignore[arg-type]

    def share(self, t: int) -> float:
        if self.explore_decay <= 0 or t <= 0:
            return self.explore
        decayed = self.explore_start * min(1.0, self.decay_t0 / t) ** self.explore_decay
        return max(self.explore, decayed)


def explore_pick(x: np.ndarray, t: int, share: float) -> int | None:
    """linucb.exploration_pick's hash with the share as a parameter."""
    key = np.round(x, 6).tobytes() + t.to_bytes(8, "little", signed=False)
    h = zlib.crc32(key)
    if (h % 10_000) >= share * 10_000:
        return None
    return (h // 10_000) % 2


def simulate(
    rule: Rule,
    x: np.ndarray,
    correct: tuple[np.ndarray, np.ndarray],
    penalty: tuple[np.ndarray, np.ndarray],
    order: np.ndarray,
    cost_weights: np.ndarray,
) -> np.ndarray:
    """Decisions (prompts x cost weights, True = strong) of one prequential pass.

    `penalty[k][i]` is the saturating cost penalty of arm k on prompt i (linucb.reward
    with cost weight 1, quality 0, negated); the reward is correct - weight * penalty.
    """
    n, d = x.shape
    kk = len(cost_weights)
    prec = np.asarray(rule.prior_precision, dtype=np.float64)
    a_inv = np.broadcast_to(np.diag(1.0 / prec), (kk, 2, d, d)).copy()
    b = np.zeros((kk, 2, d))
    if rule.prior_mean is not None:
        for k in (0, 1):
            b[:, k] = prec * rule.prior_mean[k]
    pulls = np.zeros((kk, 2), dtype=np.int64)
    out = np.zeros((n, kk), dtype=bool)
    rows = np.arange(kk)
    cw = np.asarray(cost_weights, dtype=np.float64)
    for t, i in enumerate(order):
        xi = x[i]
        u = a_inv @ xi  # (kk, 2, d)
        mu = np.einsum("kad,kad->ka", b, u)
        width = np.sqrt(np.maximum(np.einsum("kad,d->ka", u, xi), 0.0))
        ucb = mu + rule.alpha * width
        if rule.known_cost:
            ucb = ucb - cw[:, None] * np.array([penalty[0][i], penalty[1][i]])[None, :]
        greedy = (ucb[:, 1] > ucb[:, 0]).astype(np.int64)  # ties: weak, first in order
        capped = np.minimum(pulls, rule.min_pulls)
        warm = capped[:, 0] != capped[:, 1]
        pick = np.where(warm, (capped[:, 1] < capped[:, 0]).astype(np.int64), greedy)
        share = rule.share(t)
        settled = pulls.min(axis=1) >= rule.min_pulls
        e = explore_pick(xi, t, share) if share > 0 else None
        if e is not None:
            pick = np.where(settled, e, pick)
        # propensity of the served arm: the hash picks either arm on `share` of requests
        prop_pick = np.where(settled, 1.0 - share / 2.0, 1.0)
        prop_pick = np.where(settled & (pick != greedy), share / 2.0, prop_pick)
        arms = (0, 1) if rule.full_information else None
        for k in arms if arms is not None else (None,):
            a = pick if k is None else np.full(kk, k)
            w = (1.0 / prop_pick) if (rule.ipw and k is None) else np.ones(kk)
            ua = u[rows, a]  # (kk, d)
            r = np.where(a == 1, correct[1][i], correct[0][i])
            if not rule.known_cost:
                r = r - cw * np.where(a == 1, penalty[1][i], penalty[0][i])
            denom = 1.0 + w * (ua @ xi)
            a_inv[rows, a] -= (w / denom)[:, None, None] * np.einsum("kd,ke->kde", ua, ua)
            b[rows, a] += (w * r)[:, None] * xi
            pulls[rows, a] += 1
        out[i] = pick == 1
    return out


def penalties(tokens: np.ndarray, models: tuple[object, object]) -> tuple[np.ndarray, np.ndarray]:
    """Per arm and prompt, the gateway's per-token cost penalty (linucb.reward)."""
    from eval.routellm_mmlu import OUTPUT_TOKENS

    out = []
    for m in models:
        row = []
        for t in tokens:
            cost = m.estimated_cost(int(t), OUTPUT_TOKENS)  # type: ignore[attr-defined]
            row.append(-linucb.reward(False, cost, tokens=int(t) + OUTPUT_TOKENS, cost_weight=1))
        out.append(np.array(row))
    return out[0], out[1]


def sweep_apgr(decisions: np.ndarray, weak: np.ndarray, strong: np.ndarray,
               params: np.ndarray) -> float:  # fmt: skip
    """APGR of a decision sweep, anchored at both ends (as eval.routellm_mmlu does)."""
    from eval.requestlevel_metrics import apgr, curve_from_decisions, with_endpoints

    wa, sa = float(weak.mean()), float(strong.mean())
    curve = curve_from_decisions(decisions, weak, strong, [float(p) for p in params])
    return apgr(with_endpoints(curve, wa, sa), wa, sa)
