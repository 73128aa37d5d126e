"""The learned session scorer's model, folds and trigger arithmetic (numpy, offline).

Split from eval/train_session_scorer.py (the command line, the tuning grid and
the artifact) so the study and the tests use the same pieces:

- `fit`: weighted L2 logistic regression on standardised features (Newton);
- `trigger_peak`: per session, the highest score two consecutive turns both
  reach, i.e. the engine's difficulty trigger fires iff peak >= threshold;
- `strike_fired`: an approximation of the strike trigger (two struck turns
  within `STRIKE_WINDOW` turns), for tuning only: the engine figures come from
  the real replay (eval/realtraffic/figures.py);
- `instance_folds`: instance-grouped, bucket-stratified k-fold assignment, so
  no SWE-bench task (whichever agent ran it) is on both sides of a fold.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from eval.session_scorer_data import BUCKET_TARGET, Extracted

SHIPPED_THRESHOLD = 0.55  # escalation.delta_t2
#: Struck turns within this many turns make the approximate strike trigger fire
#: (the engine's 900 s decay window is about 30 turns at the corpora's pace).
STRIKE_WINDOW = 30


def merge(parts: list[Extracted]) -> Extracted:
    offset, sessions = 0, []
    for p in parts:
        sessions.append(p.session + offset)
        offset += len(p.session_id)
    cat = np.concatenate
    return Extracted(
        x=cat([p.x for p in parts]),
        delta=cat([p.delta for p in parts]),
        needs_strong=cat([p.needs_strong for p in parts]),
        strike=cat([p.strike for p in parts]),
        session=cat(sessions),
        **{
            k: cat([getattr(p, k) for p in parts])
            for k in ("session_id", "bucket", "group", "instance", "protocol", "framework")
        },
    )


def subset(d: Extracted, keep_sessions: np.ndarray) -> Extracted:
    idx = np.flatnonzero(keep_sessions)
    remap = np.full(len(d.session_id), -1)
    remap[idx] = np.arange(len(idx))
    rows = keep_sessions[d.session]
    return Extracted(
        x=d.x[rows],
        delta=d.delta[rows],
        needs_strong=d.needs_strong[rows],
        strike=d.strike[rows],
        session=remap[d.session[rows]],
        **{
            k: getattr(d, k)[idx]
            for k in ("session_id", "bucket", "group", "instance", "protocol", "framework")
        },
    )


def is_synthetic(d: Extracted) -> np.ndarray:
    return np.asarray(d.framework == "synthetic")


def session_hard(d: Extracted) -> np.ndarray:
    """Per session: hard bucket (real) or any needs_strong turn (synthetic)."""
    any_strong = np.zeros(len(d.session_id), dtype=bool)
    np.logical_or.at(any_strong, d.session, d.needs_strong)
    return np.where(is_synthetic(d), any_strong, d.bucket == "hard")


def targets(d: Extracted, medium: float = BUCKET_TARGET["medium"]) -> np.ndarray:
    table = {**BUCKET_TARGET, "medium": medium}
    real = np.array([table.get(b, 0.0) for b in d.bucket])[d.session]
    return np.where(is_synthetic(d)[d.session], d.needs_strong.astype(float), real)


def session_lengths(d: Extracted) -> np.ndarray:
    """Turns per session."""
    return np.bincount(d.session, minlength=len(d.session_id)).astype(float)


def weights(d: Extracted, y: np.ndarray, share: np.ndarray | None = None) -> np.ndarray:
    """Each session weighs 1 in total; positives and negatives weigh the same. `share`
    (per turn, summing to 1 over each session) spreads a session's weight over its
    turns; by default evenly (`mil_shares` concentrates it)."""
    w = 1.0 / session_lengths(d)[d.session] if share is None else share
    pos = (w * y).sum()
    neg = (w * (1 - y)).sum()
    return w * np.where(y > 0.5, 0.5 / max(pos, 1e-9), 0.5 / max(neg, 1e-9)) * len(d.session_id)


#: Multiple-instance reweighting (Setting.mil): "off"; "peak" (half of an easy or
#: medium session's weight on the two turns of its highest two-turn streak); "top@q"
#: (half on its top q share of turns by score, at least 2); "softmax@T" (all of it
#: by softmax(score / T) over the session's turns, a smooth session maximum). A
#: "/all" suffix treats real hard sessions the same way (classic MIL: a positive bag
#: needs one high turn, not every turn high).
MIL_KINDS = ("off", "peak", "top", "softmax")
MIL_MIX = 0.5
MIL_ROUNDS = 2
"""Refits after the first: score the training turns, reweight, refit."""


def parse_mil(spec: str) -> tuple[str, float, bool]:
    """ "top@0.1" -> ("top", 0.1, False); "peak/all" -> ("peak", 0.0, True)."""
    body, slash, scope = spec.partition("/")
    if slash and (scope != "all" or body == "off"):
        raise ValueError(f"mil {spec!r}: the only suffix is /all")
    kind, _, param = body.partition("@")
    if kind not in MIL_KINDS or (kind in ("top", "softmax")) != bool(param):
        raise ValueError(f"mil {spec!r}: off, peak, top@Q or softmax@T")
    value = float(param) if param else 0.0
    if kind in ("top", "softmax") and value <= 0:
        raise ValueError(f"mil {spec!r}: the parameter must be positive")
    return kind, value, bool(slash)


def mil_shares(d: Extracted, z: np.ndarray, spec: str) -> np.ndarray:
    """Per turn, its share of its session's weight (1 per session). Why: a session
    escalates on its highest two-turn streak, not its mean turn, so a negative
    (real easy or medium) session's loss should sit on its highest-scoring turns;
    hard and synthetic sessions (per-turn targets) keep the even share."""
    kind, param, hard_too = parse_mil(spec)
    n = len(d.session_id)
    lengths = session_lengths(d)
    even = 1.0 / lengths[d.session]
    if kind == "off":
        return even
    buckets = ("easy", "medium", "hard") if hard_too else ("easy", "medium")
    rows = (~is_synthetic(d) & np.isin(d.bucket, buckets))[d.session]
    if kind == "softmax":
        top = np.full(n, -np.inf)
        np.maximum.at(top, d.session, z / param)
        e = np.exp(z / param - top[d.session])
        focus = e / np.bincount(d.session, weights=e, minlength=n)[d.session]
        return np.where(rows, focus, even)
    mask = np.zeros(len(z), dtype=bool)
    if kind == "peak":
        same = np.flatnonzero(d.session[1:] == d.session[:-1]) + 1
        pair = np.minimum(z[same], z[same - 1])
        order = np.lexsort((-pair, d.session[same]))
        first = np.r_[True, np.diff(d.session[same][order]) != 0]
        best = same[order][first]
        mask[best] = mask[best - 1] = True
        mask |= lengths[d.session] == 1
    else:
        order = np.lexsort((-z, d.session))
        start = np.r_[0, np.cumsum(np.bincount(d.session[order], minlength=n))][:-1]
        rank = np.arange(len(z)) - start[d.session[order]]
        k = np.maximum(np.minimum(2, lengths), np.ceil(param * lengths))
        mask[order] = rank < k[d.session[order]]
    size = np.bincount(d.session, weights=mask.astype(float), minlength=n)
    focus = mask / np.maximum(size, 1.0)[d.session]
    return np.where(rows, (1 - MIL_MIX) * even + MIL_MIX * focus, even)


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float) -> dict[str, Any]:
    """Weighted L2 logistic regression on standardised features (Newton steps)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ beta, -40, 40)))
        grad = z.T @ (w * (p - y)) + penalty * beta
        hess = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return {"mean": mean, "scale": scale, "weights": beta[:-1], "bias": float(beta[-1])}


def logits(model: dict[str, Any], x: np.ndarray) -> np.ndarray:
    return np.asarray(((x - model["mean"]) / model["scale"]) @ model["weights"] + model["bias"])


def trigger_peak(score: np.ndarray, session: np.ndarray, n: int) -> np.ndarray:
    """Per session, max over consecutive turn pairs of min(score): the trigger fires iff
    this is >= the threshold (two consecutive evaluated turns at or above it)."""
    peak = np.full(n, -np.inf)
    same = session[1:] == session[:-1]
    pair = np.minimum(score[1:], score[:-1])
    np.maximum.at(peak, session[1:][same], pair[same])
    return peak


def strike_fired(d: Extracted, window: int = STRIKE_WINDOW) -> np.ndarray:
    """Per session: two struck turns within `window` turns (approximates the engine's
    strike trigger, whose decay window is in seconds)."""
    fired = np.zeros(len(d.session_id), dtype=bool)
    last: dict[int, int] = {}
    for i in np.flatnonzero(d.strike):
        s = int(d.session[i])
        if s in last and i - last[s] <= window:
            fired[s] = True
        last[s] = int(i)
    return fired


def choose_threshold(d: Extracted, z: np.ndarray, easy_rate: float) -> float:
    """Lowest logit threshold with train easy sessions <= easy_rate and no non-hard
    synthetic session triggered."""
    peak = trigger_peak(z, d.session, len(d.session_id))
    easy = peak[(d.bucket == "easy") & ~is_synthetic(d)]
    synthetic_neg = peak[is_synthetic(d) & ~session_hard(d)]
    thr = float(np.quantile(easy, 1.0 - easy_rate)) if len(easy) else -np.inf
    if len(synthetic_neg):
        thr = max(thr, float(synthetic_neg.max()) + 1e-6)
    return thr


def shipped_scale(z: np.ndarray, thr: float) -> np.ndarray:
    """Scores on the engine's scale: the chosen logit threshold reads SHIPPED_THRESHOLD."""
    shift = math.log(SHIPPED_THRESHOLD / (1 - SHIPPED_THRESHOLD)) - thr
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z + shift, -40, 40))))


def engine_scores(model: dict[str, Any], thr: float, d: Extracted, cols: np.ndarray) -> np.ndarray:
    """Per turn, what `session_score` returns: the model's score floored at the lexical one."""
    return np.maximum(shipped_scale(logits(model, d.x[:, cols]), thr), d.delta)


def fired_by(scores: np.ndarray, d: Extracted) -> np.ndarray:
    return trigger_peak(scores, d.session, len(d.session_id)) >= SHIPPED_THRESHOLD


def _stable(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


def instance_folds(d: Extracted, k: int) -> np.ndarray:
    """Per session, its fold (0..k-1): instances dealt round-robin within each bucket
    in a stable hashed order, so hard instances spread over the folds and every run
    of one instance (CodeR, mini-swe-agent, OpenHands) lands in the same fold."""
    bucket_of: dict[str, str] = {}
    for inst, b in zip(d.instance.tolist(), d.bucket.tolist(), strict=True):
        bucket_of.setdefault(inst, b)
    fold_of = instance_fold_table(bucket_of, k)
    return np.array([fold_of[i] for i in d.instance.tolist()], dtype=np.int64)


def instance_fold_table(bucket_of: dict[str, str], k: int) -> dict[str, int]:
    """instance -> fold, from instance -> bucket (`instance_folds` per instance; the
    task-difficulty trainer uses it so its folds are the session scorer's)."""
    fold_of: dict[str, int] = {}
    for b in sorted(set(bucket_of.values())):
        members = sorted((i for i, v in bucket_of.items() if v == b), key=_stable)
        for n, inst in enumerate(members):
            fold_of[inst] = (n + _stable(b)) % k
    return fold_of


def rates(d: Extracted, fired: np.ndarray) -> dict[str, float]:
    """Share of sessions fired per bucket."""
    return {str(b): float(fired[d.bucket == b].mean()) for b in sorted(set(d.bucket.tolist()))}


def escalated_table(d: Extracted, fired: np.ndarray) -> dict[str, dict[str, list[int]]]:
    """protocol -> bucket -> [escalated, sessions]."""
    out: dict[str, dict[str, list[int]]] = {}
    for s in range(len(d.session_id)):
        cell = out.setdefault(str(d.protocol[s]), {}).setdefault(str(d.bucket[s]), [0, 0])
        cell[0] += int(fired[s])
        cell[1] += 1
    return out
