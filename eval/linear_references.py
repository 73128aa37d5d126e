"""Linear-fit references for the bandit: what a linear model on linucb's own context
vectors ranks, fitted three ways, from the least honest to the most like-for-like.

- `in_sample_scores`: least squares of the gain (strong minus weak correctness) on
  the very prompts it scores. It reads every label at once, so it is an upper
  bound, not a baseline.
- `cross_fitted_scores`: k-fold; each prompt is scored by a fit on the other folds,
  so no prompt's own label shapes its score (still a fit on nearly all the data).
- `prequential_scores`: the online reference, like-for-like with the prequential
  bandit. Prompts arrive in the same stream order; each is scored by a ridge fit on
  the prompts before it, then its outcome is added. It learns with full
  information (both models' correctness of every past prompt), which the bandit
  never has, so it is the stronger of two online learners on the same features.
- `greedy_bandit_decisions`: the online reference with the bandit's information: one
  ridge fit of correctness per model, each learning only from the prompts it served,
  the model with the higher prediction (minus a margin) chosen greedily, with no
  prior and no exploration. It shows what the exploration is for.

The first three return one score per prompt (higher = the strong model gains more); the
harness sweeps a threshold over their deciles, as for every banding router. Pure
numpy, no I/O.
"""

from __future__ import annotations

import numpy as np


def gain(weak: np.ndarray, strong: np.ndarray) -> np.ndarray:
    """What a strong call gains on each prompt: -1, 0 or 1."""
    return strong.astype(np.float64) - weak.astype(np.float64)


def in_sample_scores(x: np.ndarray, weak: np.ndarray, strong: np.ndarray) -> np.ndarray:
    """Least squares on all prompts, scored on the same prompts (reads the labels)."""
    theta, *_ = np.linalg.lstsq(x, gain(weak, strong), rcond=None)
    return np.asarray(x @ theta)


def cross_fitted_scores(
    x: np.ndarray, weak: np.ndarray, strong: np.ndarray, folds: int = 5, seed: int = 0
) -> np.ndarray:
    """Each prompt scored by a least-squares fit on the other `folds - 1` folds
    (a seeded random partition of the prompts)."""
    y = gain(weak, strong)
    fold = np.random.default_rng(seed).permutation(len(y)) % folds
    out = np.zeros(len(y))
    for k in range(folds):
        train, test = fold != k, fold == k
        theta, *_ = np.linalg.lstsq(x[train], y[train], rcond=None)
        out[test] = x[test] @ theta
    return out


def prequential_scores(
    x: np.ndarray, weak: np.ndarray, strong: np.ndarray, order: np.ndarray, ridge: float = 1.0
) -> np.ndarray:
    """Online ridge of the gain: prompt order[t] is scored by the fit on order[:t].

    Indexed by prompt (like the bandit's decisions). The same ridge strength as the
    bandit's arms (A = ridge * I before any data); the first prompt scores 0.
    """
    y = gain(weak, strong)
    d = x.shape[1]
    a_inv = np.eye(d) / ridge
    b = np.zeros(d)
    out = np.zeros(len(y))
    for i in order:
        xi = x[i]
        u = a_inv @ xi
        out[i] = float(b @ u)
        a_inv -= np.outer(u, u) / (1.0 + float(xi @ u))
        b += y[i] * xi
    return out


GREEDY_MARGINS: tuple[float, ...] = tuple(round(-0.2 + 0.04 * k, 2) for k in range(21))
"""The greedy bandit's sweep: serve strong when its predicted correctness exceeds the
weak model's by more than the margin (-0.2 to 0.6, the role the cost term plays)."""


def greedy_bandit_decisions(
    x: np.ndarray,
    weak: np.ndarray,
    strong: np.ndarray,
    order: np.ndarray,
    margins: tuple[float, ...] = GREEDY_MARGINS,
    ridge: float = 1.0,
) -> np.ndarray:
    """Decisions (prompts x margins, True = strong) of a greedy two-arm ridge bandit.

    Ties go to the weak model, so with a positive margin and no data it serves weak
    and, never seeing the strong model's outcomes, can stay there for good.
    """
    d = x.shape[1]
    out = np.zeros((len(weak), len(margins)), dtype=bool)
    outcome = (weak.astype(np.float64), strong.astype(np.float64))
    for j, margin in enumerate(margins):
        a_inv = [np.eye(d) / ridge, np.eye(d) / ridge]
        b = [np.zeros(d), np.zeros(d)]
        for i in order:
            xi = x[i]
            u = (a_inv[0] @ xi, a_inv[1] @ xi)
            arm = int(float(b[1] @ u[1]) - float(b[0] @ u[0]) > margin)
            a_inv[arm] = a_inv[arm] - np.outer(u[arm], u[arm]) / (1.0 + float(xi @ u[arm]))
            b[arm] = b[arm] + outcome[arm][i] * xi
            out[i, j] = bool(arm)
    return out


def bandit_feedback_scores(
    x: np.ndarray,
    weak: np.ndarray,
    strong: np.ndarray,
    order: np.ndarray,
    served: np.ndarray | None = None,
    propensity: np.ndarray | None = None,
    *,
    estimator: str = "direct",
    seed: int = 0,
    ridge: float = 1.0,
) -> np.ndarray:
    """Online ridge of the gain that learns only the served model's outcome of each
    prompt: the linear fit with the bandit's information.

    `served` (True = strong, indexed by prompt) is the log it learns from, with
    `propensity` (needed by "ipw") the probability the logging policy served the
    strong model; by
    default a fair coin (seeded) serves each prompt, the log with the most information
    about the gain that one outcome per prompt allows. Prompt order[t] is scored
    before its outcome is learned, as in `prequential_scores`. `estimator`:
    - "direct": one ridge of correctness per model on the prompts it served; the
      score is the difference of their predictions (what linucb's arms estimate);
    - "ipw": one ridge on the inverse-propensity pseudo-gain
      y_s 1[strong] / p - y_w 1[weak] / (1 - p), unbiased for the gain.
    """
    if estimator not in ("direct", "ipw"):
        raise ValueError(f"estimator must be direct or ipw, got {estimator!r}")
    if served is None:
        served = np.random.default_rng(seed).random(len(weak)) < 0.5
        propensity = np.full(len(weak), 0.5)
    elif propensity is None and estimator == "ipw":
        raise ValueError("inverse-propensity weighting of a given log needs its propensities")
    d = x.shape[1]
    ys, yw = strong.astype(np.float64), weak.astype(np.float64)
    a_inv = [np.eye(d) / ridge, np.eye(d) / ridge]
    b = [np.zeros(d), np.zeros(d)]
    out = np.zeros(len(weak))
    for i in order:
        xi = x[i]
        if estimator == "direct":
            u = [a_inv[0] @ xi, a_inv[1] @ xi]
            out[i] = float(b[1] @ u[1]) - float(b[0] @ u[0])
            k = int(served[i])
            y = ys[i] if k else yw[i]
        else:
            u = [a_inv[0] @ xi]
            out[i] = float(b[0] @ u[0])
            k = 0
            p = float(propensity[i])  # type: ignore[index]
            y = ys[i] / p if served[i] else -yw[i] / (1.0 - p)
        a_inv[k] = a_inv[k] - np.outer(u[k], u[k]) / (1.0 + float(xi @ u[k]))
        b[k] = b[k] + y * xi
    return out
