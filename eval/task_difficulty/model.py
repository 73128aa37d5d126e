"""The task-difficulty model offline: design matrices, weighted L2 logistic fit, AUROC.

The features are computed by the request-time code (tiergate.routing.task_difficulty
`hashed` and `shape`), so what is trained is what the gateway scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tiergate.routing.task_difficulty import SHAPE_NAMES, hashed, shape


@dataclass(frozen=True)
class Setting:
    """One grid point: which features, their L2 strengths, the medium target."""

    mode: str  # "length" | "shape" | "both"
    l2_ngram: float
    l2_shape: float = 0.01
    medium: float = 0.5

    def label(self) -> str:
        return f"{self.mode}/l2={self.l2_ngram:g}/medium={self.medium:g}"


@dataclass
class Design:
    """Rows are texts (session first messages and problem statements)."""

    shape: np.ndarray  # (n, len(SHAPE_NAMES))
    ngrams: np.ndarray  # (n, buckets) float32, unit-length rows
    instance: np.ndarray  # (n,) str
    bucket: np.ndarray  # (n,) str


def design(
    texts: list[str], instances: list[str], buckets_of: list[str], buckets: int, bigrams: bool
) -> Design:
    s = np.array([shape(t) for t in texts], dtype=np.float64)
    g = np.zeros((len(texts), buckets), dtype=np.float32)
    for r, t in enumerate(texts):
        for i, v in hashed(t, buckets, bigrams).items():
            g[r, i] = v
    return Design(s, g, np.array(instances), np.array(buckets_of))


def targets(bucket: np.ndarray, medium: float) -> np.ndarray:
    return np.array([{"easy": 0.0, "medium": medium, "hard": 1.0}[b] for b in bucket])


def row_weights(d: Design, rows: np.ndarray) -> np.ndarray:
    """Each instance weighs the same in total (however many agents ran it), and the
    three buckets weigh the same; weights sum to 1."""
    inst = d.instance[rows]
    _, inv, counts = np.unique(inst, return_inverse=True, return_counts=True)
    w = 1.0 / counts[inv]
    for b in ("easy", "medium", "hard"):
        m = d.bucket[rows] == b
        if m.any():
            w[m] *= 1.0 / w[m].sum()
    return w / w.sum()


def _columns(d: Design, rows: np.ndarray, mode: str) -> tuple[np.ndarray, int]:
    """(dense shape block, number of shape columns) for the mode; n-grams appended later."""
    if mode == "length":
        return d.shape[rows][:, :1], 1
    return d.shape[rows], len(SHAPE_NAMES)


def fit(d: Design, rows: np.ndarray, setting: Setting, iters: int = 200) -> dict[str, Any]:
    """Weighted L2 logistic regression (soft ordinal target), accelerated gradient descent.
    Shape columns are standardised; n-gram columns are used as they are (unit rows)."""
    xs, k = _columns(d, rows, setting.mode)
    mean = xs.mean(axis=0)
    scale = xs.std(axis=0)
    scale[scale < 1e-9] = 1.0
    zs = (xs - mean) / scale
    use_ngrams = setting.mode == "both"
    xg = d.ngrams[rows] if use_ngrams else np.zeros((len(rows), 0), dtype=np.float32)
    x = np.hstack([zs.astype(np.float32), xg, np.ones((len(rows), 1), dtype=np.float32)])
    y = targets(d.bucket[rows], setting.medium)
    w = row_weights(d, rows)
    pen = np.concatenate(
        [np.full(k, setting.l2_shape), np.full(xg.shape[1], setting.l2_ngram), [0.0]]
    )
    # Lipschitz bound of the gradient: 0.25 * ||X^T W X||_2 + max penalty (power iteration)
    v = np.ones(x.shape[1]) / np.sqrt(x.shape[1])
    wf = w.astype(np.float32)
    for _ in range(30):
        v = x.T @ (wf * (x @ v.astype(np.float32)))
        v /= np.linalg.norm(v) + 1e-12
    lip = 0.25 * float(v @ (x.T @ (wf * (x @ v.astype(np.float32))))) + float(pen.max()) + 1e-9
    beta = np.zeros(x.shape[1])
    prev = beta.copy()
    for t in range(1, iters + 1):
        look = beta + (t - 1) / (t + 2) * (beta - prev)
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ look.astype(np.float32), -40, 40)))
        grad = (x.T @ (w * (p - y)).astype(np.float32)).astype(np.float64) + pen * look
        prev, beta = beta, look - grad / lip
    return {
        "mode": setting.mode,
        "mean": mean,
        "scale": scale,
        "shape_weights": beta[:k],
        "ngram_weights": beta[k:-1],
        "bias": float(beta[-1]),
    }


def logits(model: dict[str, Any], d: Design, rows: np.ndarray) -> np.ndarray:
    xs, _ = _columns(d, rows, model["mode"])
    z = ((xs - model["mean"]) / model["scale"]) @ model["shape_weights"] + model["bias"]
    if model["mode"] == "both":
        z = z + d.ngrams[rows].astype(np.float64) @ model["ngram_weights"]
    return np.asarray(z)


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    """Mann-Whitney AUROC, ties counted half; nan when a class is empty."""
    pos, neg = score[positive], score[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    allv = np.concatenate([pos, neg])[order]
    ranks = np.empty(len(allv))
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1] == allv[i]:
            j += 1
        ranks[i : j + 1] = (i + j) / 2.0 + 1.0
        i = j + 1
    r = np.empty(len(allv))
    r[order] = ranks
    return float((r[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def instance_scores(d: Design, rows: np.ndarray, z: np.ndarray) -> dict[str, float]:
    """Per instance, the mean logit over its texts."""
    out: dict[str, list[float]] = {}
    for inst, v in zip(d.instance[rows].tolist(), z.tolist(), strict=True):
        out.setdefault(inst, []).append(v)
    return {k: float(np.mean(v)) for k, v in out.items()}


def separation(scores: dict[str, float], bucket_of: dict[str, str]) -> dict[str, float]:
    """Instance-level AUROC: hard vs rest and easy vs hard."""
    keys = sorted(scores)
    s = np.array([scores[k] for k in keys])
    b = np.array([bucket_of[k] for k in keys])
    eh = b != "medium"
    return {
        "hard_vs_rest": round(auroc(s, b == "hard"), 3),
        "easy_vs_hard": round(auroc(s[eh], b[eh] == "hard"), 3),
        "instances": len(keys),
        "hard": int((b == "hard").sum()),
        "easy": int((b == "easy").sum()),
    }
