"""Counterfactual escalation value: did the strong turns rescue sessions the base was losing?

DESIGN.md, "Counterfactual escalation value". Per logged session two facts
are known: its own outcome **r** (did the agent, on the base model, resolve
the task?) and **p**, the strong model's chance on the task. A policy that
served s of the session's n turns strong earns the credit

    q = r + (1 - r) * p * s / n

`PGR = (Q_policy - Q_base) / (Q_strong - Q_base)` over a group of sessions,
where `Q_base = mean(r)` and `Q_strong = mean(r + (1 - r) p)`. The cost axis
is the share of turns served strong. Every policy is compared with a
baseline ladder at its own strong-turn share:

- random: escalate each session at turn 1 with probability equal to the
  share; in expectation its PGR *is* the share (exactly, not by sampling);
- the length rule: escalate every session when it reaches turn N, N swept,
  linearly interpolated between the two N around the policy's share;
- the oracle: rescue the sessions with the largest `(1 - r) p` per strong
  turn it costs first, from turn 1, the last one partly. Because the credit
  is linear in s, this fractional-knapsack order is the exact optimum at a
  strong-turn budget, so no policy can beat it at the same share (ranking by
  `(1 - r) p` alone, ignoring n, would not be an upper bound).

Intervals resample task instances with replacement (every session of a drawn
instance comes along), as eval/realtraffic/intervals.py does: runs of one
task by several agents are correlated. Pure: numbers in, numbers out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

#: Resamples for the 95 % intervals by default.
DEFAULT_RESAMPLES = 1000


#: Words for r = 1 and r = 0 in the outcomes operators already log (CI, PRs, benchmarks).
_TRUE = {"1", "true", "yes", "y", "pass", "passed", "resolved", "merged", "success", "ok"}
_FALSE = {"0", "false", "no", "n", "fail", "failed", "unresolved", "closed", "failure", "error"}

#: Every word `parse_outcome` reads as an outcome (lower case).
OUTCOME_WORDS = frozenset(_TRUE | _FALSE)


def parse_outcome(value: Any) -> float | None:
    """r from a log's word for it (bool, 0/1, pass/fail, merged/closed); None if unknown."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value) if 0.0 <= float(value) <= 1.0 else None
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in _TRUE:
        return 1.0
    if text in _FALSE:
        return 0.0
    return parse_odds(text)


def parse_odds(value: Any) -> float | None:
    """p as a number in [0, 1]; None if missing or out of range."""
    if value is None or isinstance(value, bool):
        return None
    try:
        p = float(value)
    except (TypeError, ValueError):
        return None
    return p if 0.0 <= p <= 1.0 else None


@dataclass(frozen=True, slots=True)
class SessionValue:
    """One session as the counterfactual score needs it, under one policy."""

    session_id: str
    instance: str
    resolved: float
    """r: 1 when the agent resolved the task (CI passed, PR merged), else 0."""
    odds: float
    """p: the strong model's chance on the task, in [0, 1]."""
    turns: int
    """n: billed turns of the session."""
    strong: int = 0
    """s: turns the strong tier served."""
    first_strong: int | None = None
    """1-based turn of the first strong serve; None when never escalated."""

    @property
    def escalated(self) -> bool:
        return self.strong > 0

    @property
    def cut_off(self) -> bool:
        """Escalated, but strong served fewer turns than from its first strong turn to the end."""
        if self.first_strong is None:
            return False
        return self.strong < self.turns - self.first_strong + 1


def credit(resolved: float, odds: float, strong: int, turns: int) -> float:
    """q = r + (1 - r) p s / n: a rescue is worth p, scaled by the share served strong."""
    if turns <= 0:
        return resolved
    return resolved + (1.0 - resolved) * odds * min(max(strong, 0), turns) / turns


@dataclass(frozen=True)
class Arrays:
    """A group of sessions as arrays, indexed like `instance_index` (for resampling)."""

    r: Floats
    p: Floats
    n: Floats
    s: Floats
    escalated: Floats
    cut: Floats
    instance_index: npt.NDArray[np.int64]
    instances: int

    @classmethod
    def of(cls, values: Sequence[SessionValue]) -> Arrays:
        names: dict[str, int] = {}
        idx = [names.setdefault(v.instance, len(names)) for v in values]
        return cls(
            r=np.array([v.resolved for v in values], dtype=np.float64),
            p=np.array([v.odds for v in values], dtype=np.float64),
            n=np.array([max(v.turns, 1) for v in values], dtype=np.float64),
            s=np.array([min(max(v.strong, 0), max(v.turns, 1)) for v in values], dtype=np.float64),
            escalated=np.array([v.escalated for v in values], dtype=np.float64),
            cut=np.array([v.cut_off for v in values], dtype=np.float64),
            instance_index=np.array(idx, dtype=np.int64),
            instances=len(names),
        )

    @property
    def gain(self) -> Floats:
        """(1 - r) p: what a full rescue of each session is worth."""
        result: Floats = (1.0 - self.r) * self.p
        return result


def _ratio(num: float, den: float) -> float | None:
    return None if den <= 0 else num / den


def strong_share(a: Arrays, w: Floats) -> float:
    """Share of turns served strong (turn-weighted)."""
    return float((w * a.s).sum() / (w * a.n).sum())


def pgr(a: Arrays, w: Floats) -> float | None:
    """(Q_policy - Q_base) / (Q_strong - Q_base); None when no session can be rescued."""
    return _ratio(float((w * a.gain * a.s / a.n).sum()), float((w * a.gain).sum()))


def waste(a: Arrays, w: Floats) -> float | None:
    """Share of resolved (r = 1) sessions the policy escalated anyway."""
    return _ratio(float((w * a.r * a.escalated).sum()), float((w * a.r).sum()))


def cut_off(a: Arrays, w: Floats) -> float | None:
    """Share of escalated sessions whose strong serve stopped before the end."""
    return _ratio(float((w * a.cut).sum()), float((w * a.escalated).sum()))


def random_pgr(share: float) -> float:
    """Random escalation at turn 1 with probability `share`: expected PGR = share."""
    return min(max(share, 0.0), 1.0)


def length_rule_curve(a: Arrays, w: Floats) -> tuple[Floats, Floats]:
    """(share, PGR) of the length rule for N = 1 .. max n + 1, share increasing."""
    top = int(a.n.max()) if len(a.n) else 0
    starts = np.arange(1, top + 2, dtype=np.float64)[:, None]
    strong = np.clip(a.n[None, :] - starts + 1.0, 0.0, None)
    share = (strong * w).sum(axis=1) / (w * a.n).sum()
    den = float((w * a.gain).sum())
    value = (strong * (w * a.gain / a.n)).sum(axis=1)
    curve = value / den if den > 0 else np.zeros_like(value)
    return share[::-1].copy(), curve[::-1].copy()


def length_rule_pgr(a: Arrays, w: Floats, share: float) -> float | None:
    """The length rule's PGR at `share`, interpolated between neighbouring N."""
    if float((w * a.gain).sum()) <= 0:
        return None
    x, y = length_rule_curve(a, w)
    return float(np.interp(share, x, y))


def oracle_curve(a: Arrays, w: Floats) -> tuple[Floats, Floats]:
    """(share, PGR) breakpoints of the oracle: best value per strong turn first."""
    density = a.gain / a.n
    order = np.lexsort((-a.gain, -density))
    turns = np.concatenate([[0.0], np.cumsum((w * a.n)[order])])
    value = np.concatenate([[0.0], np.cumsum((w * a.gain)[order])])
    den = value[-1]
    return turns / turns[-1], (value / den if den > 0 else np.zeros_like(value))


def oracle_pgr(a: Arrays, w: Floats, share: float) -> float | None:
    if float((w * a.gain).sum()) <= 0:
        return None
    x, y = oracle_curve(a, w)
    return float(np.interp(share, x, y))


def point(a: Arrays, w: Floats) -> dict[str, float | None]:
    """Every figure of one group under weights `w` (ones: the sample itself)."""
    share = strong_share(a, w)
    value = pgr(a, w)
    length = length_rule_pgr(a, w, share)
    oracle = oracle_pgr(a, w, share)
    rand = random_pgr(share) if value is not None else None
    return {
        "pgr": value,
        "strong_share": share,
        "waste": waste(a, w),
        "cut_off": cut_off(a, w),
        "random": rand,
        "length_rule": length,
        "oracle": oracle,
        "pgr_minus_random": None if value is None or rand is None else value - rand,
        "pgr_minus_length_rule": None if value is None or length is None else value - length,
    }


def _bootstrap_weights(a: Arrays, resamples: int, seed: int) -> Floats:
    """Session weights per resample: how often each session's instance was drawn."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, a.instances, size=(resamples, a.instances))
    counts = np.zeros((resamples, a.instances), dtype=np.float64)
    np.add.at(counts, (np.arange(resamples)[:, None], draws), 1.0)
    result: Floats = counts[:, a.instance_index]
    return result


def score(
    values: Sequence[SessionValue], resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """Point figures plus instance-clustered 95 % intervals (2.5 / 97.5 percentiles)."""
    a = Arrays.of(values)
    out: dict[str, Any] = {
        "sessions": len(values),
        "instances": a.instances,
        "turns": int(a.n.sum()),
        "q_base": float(a.r.mean()) if len(values) else None,
        "q_strong": float((a.r + a.gain).mean()) if len(values) else None,
        "resolved": int(a.r.sum()),
        "escalated": int(a.escalated.sum()),
    }
    if not values:
        return out
    est = point(a, np.ones(len(values)))
    out.update(est)
    boots: dict[str, list[float]] = {k: [] for k in est}
    if resamples > 0 and a.instances > 1:
        for w in _bootstrap_weights(a, resamples, seed):
            for k, v in point(a, w).items():
                if v is not None:
                    boots[k].append(v)
    out["interval"] = {
        k: ([float(x) for x in np.percentile(v, [2.5, 97.5])] if len(v) >= 20 else None)
        for k, v in boots.items()
    }
    out["resamples"] = resamples
    return out


def curves(values: Sequence[SessionValue], points: int = 51) -> dict[str, list[float]]:
    """The length rule and the oracle on a share grid from 0 to 1 (for the plot)."""
    a = Arrays.of(values)
    w = np.ones(len(values))
    grid = np.linspace(0.0, 1.0, points)
    if not values or float(a.gain.sum()) <= 0:
        return {"share": grid.tolist(), "length_rule": [], "oracle": []}
    lx, ly = length_rule_curve(a, w)
    ox, oy = oracle_curve(a, w)
    return {
        "share": grid.tolist(),
        "length_rule": np.interp(grid, lx, ly).tolist(),
        "oracle": np.interp(grid, ox, oy).tolist(),
    }
