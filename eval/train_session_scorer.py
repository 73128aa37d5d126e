"""Train the learned session scorer and rebuild its shipped artifact (issue #15, part 5).

    PYTHONPATH=src:. python -m eval.train_session_scorer --corpus-dir /tmp/rt/corpus

Training data: the real SWE-bench Lite development corpus (docs/real-traffic.md,
both protocols; Verified instances were dropped at its build) and the default
synthetic corpus (`tiergate replay`'s generator, seed 20260814). Never read:
the independent synthetic corpus and SWE-bench Verified, reported as held out.

Target: per turn, the session's bucket on an ordinal scale (easy 0, medium
0.5, hard 1) for real sessions, the turn's `needs_strong` for synthetic ones;
each session weighs the same whatever its length, and classes are balanced.
Model: L2 logistic regression (Newton's method, numpy), standardised features.
A session is escalated by the difficulty trigger when two consecutive turns
score at or above the threshold, as in the engine; the threshold is the lowest
that keeps the training easy sessions under `--easy-rate` and every non-hard
synthetic session below it (chosen on the model's score alone). The bias is
then shifted so that this threshold reads 0.55 (the shipped
`escalation.delta_t2`). Evaluated, as the engine reads it, is the model's
score floored at the turn's lexical score (`session_score`).

Evaluation: leave-one-repository-out cross-validation on the real sessions
(no SWE-bench repository is in both a training and a test fold; the synthetic
corpus stays in every training fold). Reported numbers are fold-out only,
beside the lexical delta score under the same rule and its shipped threshold.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from eval.realtraffic import independent
from eval.session_scorer_data import BUCKET_TARGET, Extracted, extract, stream_jsonl
from tiergate.replay.generator import generate_corpus
from tiergate.routing.session_scorer import ARTIFACT, FEATURE_NAMES

SHIPPED_THRESHOLD = 0.55  # escalation.delta_t2
VERSION = "session-scorer-v1"
ARTIFACT_PATH = Path("src/tiergate/routing/artifacts") / ARTIFACT
SOURCES = [
    {
        "name": "coder",
        "what": "CodeR trajectories on SWE-bench Lite (text protocol)",
        "repository": "NL2Code/CodeR@d63468344bc2",
        "licence": "no licence file in the repository",
    },
    {
        "name": "mini-deepseek",
        "what": "mini-swe-agent 2.2.7 tool-call runs, deepseek-chat",
        "repository": "SWE-agent/mini-swe-agent@3c7d1d7f8fb8",
        "licence": "MIT",
    },
    {
        "name": "openhands-glm",
        "what": "OpenHands CodeActAgent sessions, GLM-4.6-FP8",
        "repository": "ergt10/openhands_swebench@3f8ba937f9e1",
        "licence": "MIT (OpenHands copy in the repository; no separate licence for run data)",
    },
    {
        "name": "labels",
        "what": "SWE-bench Verified annotation fix-time estimates (difficulty.csv), "
        "used for Lite instances only; Verified instances held out",
        "repository": "/work/shared/data/swebench-difficulty",
        "licence": "as published with the SWE-bench Verified annotations",
    },
    {
        "name": "synthetic",
        "what": "tiergate replay default corpus (generated, seed 20260814)",
        "repository": "this repository",
        "licence": "the project's",
    },
]


# ---- data ---------------------------------------------------------------------------


def cached(path: Path, build: Callable[[], Extracted]) -> Extracted:
    if path.exists():
        return Extracted.load(path)
    data = build()
    data.save(path)
    return data


def load_all(corpus_dir: Path, cache: Path) -> dict[str, Extracted]:
    """Real (both protocols), default synthetic, independent synthetic (held out)."""
    out: dict[str, Extracted] = {}
    for protocol in ("text", "tool-call"):
        src = corpus_dir / f"realtraffic-{protocol}.jsonl"
        with tqdm(desc=f"real {protocol}", unit="session") as bar:
            out[protocol] = cached(
                cache / f"real-{protocol}.npz",
                functools.partial(extract, stream_jsonl(src), True, bar.update),
            )
    with tqdm(desc="synthetic default", unit="session") as bar:
        out["synthetic"] = cached(
            cache / "synthetic.npz", lambda: extract(generate_corpus(), False, bar.update)
        )
    with tqdm(desc="independent (held out)", unit="session") as bar:
        out["independent"] = cached(
            cache / "independent.npz", lambda: extract(independent.generate(), False, bar.update)
        )
    return out


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
        session=cat(sessions),
        session_id=cat([p.session_id for p in parts]),
        bucket=cat([p.bucket for p in parts]),
        group=cat([p.group for p in parts]),
        protocol=cat([p.protocol for p in parts]),
        framework=cat([p.framework for p in parts]),
    )


def is_synthetic(d: Extracted) -> np.ndarray:
    return np.asarray(d.framework == "synthetic")


def session_hard(d: Extracted) -> np.ndarray:
    """Per session: hard bucket (real) or any needs_strong turn (synthetic)."""
    any_strong = np.zeros(len(d.session_id), dtype=bool)
    np.logical_or.at(any_strong, d.session, d.needs_strong)
    return np.where(is_synthetic(d), any_strong, d.bucket == "hard")


def targets(d: Extracted) -> np.ndarray:
    real = np.array([BUCKET_TARGET.get(b, 0.0) for b in d.bucket])[d.session]
    return np.where(is_synthetic(d)[d.session], d.needs_strong.astype(float), real)


def weights(d: Extracted, y: np.ndarray) -> np.ndarray:
    """Each session weighs 1 in total; positives and negatives weigh the same."""
    lengths = np.bincount(d.session, minlength=len(d.session_id)).astype(float)
    w = 1.0 / lengths[d.session]
    pos = (w * y).sum()
    neg = (w * (1 - y)).sum()
    return w * np.where(y > 0.5, 0.5 / max(pos, 1e-9), 0.5 / max(neg, 1e-9)) * len(d.session_id)


# ---- model --------------------------------------------------------------------------


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


def subset(d: Extracted, keep_sessions: np.ndarray) -> Extracted:
    idx = np.flatnonzero(keep_sessions)
    remap = np.full(len(d.session_id), -1)
    remap[idx] = np.arange(len(idx))
    rows = keep_sessions[d.session]
    return Extracted(
        x=d.x[rows],
        delta=d.delta[rows],
        needs_strong=d.needs_strong[rows],
        session=remap[d.session[rows]],
        **{k: getattr(d, k)[idx] for k in ("session_id", "bucket", "group", "protocol")},
        framework=d.framework[idx],
    )


def train(d: Extracted, l2: float, easy_rate: float) -> tuple[dict[str, Any], float]:
    y = targets(d)
    model = fit(d.x, y, weights(d, y), l2)
    return model, choose_threshold(d, logits(model, d.x), easy_rate)


# ---- evaluation ---------------------------------------------------------------------


def escalated_table(d: Extracted, fired: np.ndarray) -> dict[str, dict[str, list[int]]]:
    """protocol -> bucket -> [escalated, sessions]."""
    out: dict[str, dict[str, list[int]]] = {}
    for s in range(len(d.session_id)):
        cell = out.setdefault(str(d.protocol[s]), {}).setdefault(str(d.bucket[s]), [0, 0])
        cell[0] += int(fired[s])
        cell[1] += 1
    return out


def lexical_fired(d: Extracted) -> np.ndarray:
    return trigger_peak(d.delta, d.session, len(d.session_id)) >= SHIPPED_THRESHOLD


def shipped_scale(z: np.ndarray, thr: float) -> np.ndarray:
    """Scores on the engine's scale: the chosen logit threshold reads SHIPPED_THRESHOLD."""
    shift = math.log(SHIPPED_THRESHOLD / (1 - SHIPPED_THRESHOLD)) - thr
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z + shift, -40, 40))))


def cross_validate(
    real: Extracted, synth: Extracted, l2: float, easy_rate: float
) -> tuple[np.ndarray, dict[str, list[float]]]:
    """Leave-one-repository-out: each real session scored by a model that never saw
    its repository. Returns per-session fired flags and per-turn fold-out scores
    (on the engine's scale, by session id) for the engine replay."""
    fired = np.zeros(len(real.session_id), dtype=bool)
    scores: dict[str, list[float]] = {}
    groups = sorted(set(real.group.tolist()))
    for g in tqdm(groups, desc="folds (leave one repository out)", unit="fold"):
        held = real.group == g
        model, thr = train(merge([subset(real, ~held), synth]), l2, easy_rate)
        test = subset(real, held)
        z = logits(model, test.x)
        p = np.maximum(shipped_scale(z, thr), test.delta)  # as session_score
        fired[np.flatnonzero(held)] = (
            trigger_peak(p, test.session, len(test.session_id)) >= SHIPPED_THRESHOLD
        )
        for s, sid in enumerate(test.session_id):
            scores[str(sid)] = [round(float(v), 5) for v in p[test.session == s]]
    return fired, scores


def artifact(model: dict[str, Any], thr: float, d: Extracted, args: argparse.Namespace) -> dict:
    shift = math.log(SHIPPED_THRESHOLD / (1 - SHIPPED_THRESHOLD)) - thr  # as shipped_scale
    counts = {
        f"{p}/{b}": int(((d.protocol == p) & (d.bucket == b)).sum())
        for p in sorted(set(d.protocol.tolist()))
        for b in sorted(set(d.bucket.tolist()))
        if ((d.protocol == p) & (d.bucket == b)).any()
    }
    return {
        "version": VERSION,
        "model": "logistic regression on standardised features; score = sigmoid(bias + "
        "sum(weights * (x - mean) / scale)); trigger at escalation.delta_t2 = 0.55",
        "features": list(FEATURE_NAMES),
        "mean": [round(float(v), 6) for v in model["mean"]],
        "scale": [round(float(v), 6) for v in model["scale"]],
        "weights": [round(float(v), 6) for v in model["weights"]],
        "bias": round(model["bias"] + shift, 6),
        "training": {
            "sessions": counts,
            "turns": len(d.session),
            "target": "real: bucket easy 0 / medium 0.5 / hard 1 on every turn; "
            "synthetic: the turn's needs_strong",
            "l2": args.l2,
            "easy_rate": args.easy_rate,
            "held_out": "independent synthetic corpus (eval/realtraffic/independent.py); "
            "SWE-bench Verified (never in the corpus)",
            "command": "PYTHONPATH=src:. python -m eval.train_session_scorer "
            "--corpus-dir <realtraffic build>",
        },
        "sources": SOURCES,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m eval.train_session_scorer",
        description="Train the learned session scorer on the development corpora, "
        "report leave-one-repository-out and held-out figures, write the artifact.",
    )
    ap.add_argument("--corpus-dir", type=Path, required=True, help="realtraffic build folder")
    ap.add_argument("--cache-dir", type=Path, default=Path("/tmp/session-scorer-cache"))
    ap.add_argument("--l2", type=float, default=10.0, help="L2 penalty (default 10)")
    ap.add_argument(
        "--easy-rate", type=float, default=0.05, help="train easy-session trigger rate (0.05)"
    )
    ap.add_argument("--out", type=Path, default=ARTIFACT_PATH, help="artifact path")
    ap.add_argument("--report", type=Path, help="write the evaluation JSON here")
    ap.add_argument("--no-write", action="store_true", help="evaluate only")
    ap.add_argument(
        "--foldout-scores",
        type=Path,
        help="write per-turn fold-out scores of the real sessions (JSON, numbers only) for "
        "`python -m eval.realtraffic.figures --learned-scores`",
    )
    args = ap.parse_args(argv)

    data = load_all(args.corpus_dir, args.cache_dir)
    real = merge([data["text"], data["tool-call"]])
    synth, held = data["synthetic"], data["independent"]
    foldout, foldout_scores = cross_validate(real, synth, args.l2, args.easy_rate)
    if args.foldout_scores:
        args.foldout_scores.write_text(json.dumps(foldout_scores) + "\n")
    model, thr = train(merge([real, synth]), args.l2, args.easy_rate)

    def final(d: Extracted) -> np.ndarray:
        p = np.maximum(shipped_scale(logits(model, d.x), thr), d.delta)  # as session_score
        return trigger_peak(p, d.session, len(d.session_id)) >= SHIPPED_THRESHOLD

    report = {
        "trigger_only": "difficulty trigger alone (2 consecutive turns >= threshold), no caps, "
        "no strikes; the engine figures are in docs/real-traffic.md",
        "real_foldout": {
            "learned": escalated_table(real, foldout),
            "lexical": escalated_table(real, lexical_fired(real)),
        },
        "real_train_fit": {"learned": escalated_table(real, final(real))},
        "synthetic_default": {
            "learned": escalated_table(synth, final(synth)),
            "lexical": escalated_table(synth, lexical_fired(synth)),
        },
        "independent_held_out": {
            "learned": escalated_table(held, final(held)),
            "lexical": escalated_table(held, lexical_fired(held)),
        },
        "weights": dict(
            zip(FEATURE_NAMES, [round(float(w), 3) for w in model["weights"]], strict=True)
        ),
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    if not args.no_write:
        args.out.write_text(json.dumps(artifact(model, thr, merge([real, synth]), args)) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
