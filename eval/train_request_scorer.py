"""Train the learned request scorer (tiergate.routing.learned) and write its artifact.

Data: RouteLLM's MMLU outcomes (../shared/data/routellm-mmlu, Apache-2.0), minus the
contaminated prompts. Whole subjects are held out: `HELD_OUT_SUBJECTS` (every fourth
subject in alphabetical order, fixed in advance) are never read by training or
tuning and are scored once at the end. Tuning (label, L2 strength, feature
frequency floor) is grouped 5-fold cross-validation over the *training subjects*,
so every tuning figure is also measured on subjects the fit did not see.
RouterArena and RouteLLM's GSM8K / MT-Bench files are never read here.

The model is L2-regularised linear on the sparse binary features of
`learned.ask_features`, fitted by full-batch Adam in numpy. The label is chosen by
cross-validation between the gain of a strong call (strong minus weak correctness,
squared loss), "only the strong model is right" and "the weak model is wrong"
(both log-loss); features are kept when they occur in at least `--min-df` training prompts
spread over at least `--min-subjects` training subjects (so a feature is not just
a subject's name).

    .venv/bin/python -m eval.train_request_scorer [--data DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval import common
from eval.requestlevel_metrics import (
    apgr,
    cpt,
    curve_from_decisions,
    threshold_grid,
    with_endpoints,
)
from eval.routellm_mmlu import MMLUData, load_mmlu
from tiergate.routing import learned

ARTIFACT_VERSION = "mmlu-subject-split-v1"
LABELS = ("gap", "strong_only", "weak_wrong")
L2_GRID = (0.01, 0.03, 0.1)
MIN_DF_GRID = (20,)
FOLDS = 5
QUANTILES = 201


def held_out_subjects(subjects: Sequence[str]) -> list[str]:
    """Every fourth subject in alphabetical order (indices 1, 5, 9, ...): fixed in advance."""
    return [s for i, s in enumerate(sorted(subjects)) if i % 4 == 1]


# ---- the model ----------------------------------------------------------------------------


@dataclass
class Sparse:
    """A binary prompts x features matrix as (row, column) index pairs."""

    rows: np.ndarray
    cols: np.ndarray
    n_rows: int
    n_cols: int

    def dot(self, w: np.ndarray) -> np.ndarray:
        return np.bincount(self.rows, weights=w[self.cols], minlength=self.n_rows)

    def t_dot(self, r: np.ndarray) -> np.ndarray:
        return np.bincount(self.cols, weights=r[self.rows], minlength=self.n_cols)


def build_matrix(features: Sequence[set[str]], vocab: dict[str, int]) -> Sparse:
    rows, cols = [], []
    for i, feats in enumerate(features):
        for f in feats:
            j = vocab.get(f)
            if j is not None:
                rows.append(i)
                cols.append(j)
    return Sparse(np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64),
                  len(features), len(vocab))  # fmt: skip


def choose_vocab(
    features: Sequence[set[str]], subjects: Sequence[str], min_df: int, min_subjects: int
) -> dict[str, int]:
    """Features frequent enough and spread over enough subjects, in sorted order."""
    df: Counter[str] = Counter()
    where: defaultdict[str, set[str]] = defaultdict(set)
    for feats, subject in zip(features, subjects, strict=True):
        df.update(feats)
        for f in feats:
            where[f].add(subject)
    kept = sorted(f for f, n in df.items() if n >= min_df and len(where[f]) >= min_subjects)
    return {f: j for j, f in enumerate(kept)}


def fit_linear(
    x: Sparse, y: np.ndarray, l2: float, squared: bool = False, steps: int = 150, lr: float = 0.1
) -> tuple[float, np.ndarray]:
    """Bias and weights minimising mean log-loss (or, `squared`, half the mean squared
    error) + l2/2 |w|^2, by full-batch Adam."""
    w = np.zeros(x.n_cols)
    if squared:
        b = float(y.mean())
    else:
        b = float(np.log(max(y.mean(), 1e-6) / max(1 - y.mean(), 1e-6)))
    m, v = np.zeros(x.n_cols + 1), np.zeros(x.n_cols + 1)
    beta1, beta2 = 0.9, 0.999
    for t in range(1, steps + 1):
        z = x.dot(w) + b
        p = z if squared else 1.0 / (1.0 + np.exp(-z))
        r = (p - y) / x.n_rows
        g = np.concatenate([[r.sum()], x.t_dot(r) + l2 * w])
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        step = lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + 1e-8)
        b -= float(step[0])
        w -= step[1:]
    return b, w


def labels_for(data: MMLUData, label: str) -> np.ndarray:
    """gap: strong minus weak correctness (-1, 0, 1), what a strong call gains; the
    other two are the binary events APGR's gains and the weak model's misses."""
    if label == "gap":
        return data.strong.astype(np.float64) - data.weak.astype(np.float64)
    if label == "strong_only":
        return (data.strong & ~data.weak).astype(np.float64)
    return (~data.weak).astype(np.float64)


# ---- metrics ------------------------------------------------------------------------------


def score_metrics(scores: np.ndarray, weak: np.ndarray, strong: np.ndarray) -> dict[str, Any]:
    """APGR and CPT of a threshold sweep over the scores' deciles, as in eval.routellm_mmlu."""
    grid = threshold_grid(scores, 10)
    decisions = np.stack([scores >= t for t in grid], axis=1)
    wa, sa = float(weak.mean()), float(strong.mean())
    curve = with_endpoints(curve_from_decisions(decisions, weak, strong, grid), wa, sa)
    return {
        "prompts": len(scores),
        "apgr": apgr(curve, wa, sa),
        "cpt50": cpt(curve, wa, sa, 0.5),
        "cpt80": cpt(curve, wa, sa, 0.8),
    }


def prompt_length(prompts: Sequence[str]) -> np.ndarray:
    """The baseline every router must beat: characters of the prompt."""
    return np.array([len(p) for p in prompts], dtype=np.float64)


# ---- training -----------------------------------------------------------------------------


@dataclass
class Setting:
    label: str
    l2: float
    min_df: int


def fit(
    features: Sequence[set[str]], data: MMLUData, s: Setting, min_subjects: int
) -> tuple[dict[str, int], float, np.ndarray]:
    vocab = choose_vocab(features, data.domains, s.min_df, min_subjects)
    y = labels_for(data, s.label)
    b, w = fit_linear(build_matrix(features, vocab), y, s.l2, squared=s.label == "gap")
    return vocab, b, w


def logits(
    features: Sequence[set[str]], vocab: dict[str, int], b: float, w: np.ndarray
) -> np.ndarray:
    return build_matrix(features, vocab).dot(w) + b


def cross_validate(
    features: list[set[str]], data: MMLUData, settings: list[Setting], min_subjects: int,
    show: bool,
) -> list[dict[str, Any]]:  # fmt: skip
    """Grouped k-fold over training subjects: out-of-fold APGR per setting."""
    subjects = sorted(set(data.domains))
    fold_of = {s: i % FOLDS for i, s in enumerate(subjects)}
    folds = np.array([fold_of[d] for d in data.domains])
    out = []
    for s in common.progress(settings, "cross-validation", len(settings), show):
        oof = np.zeros(len(data))
        for k in range(FOLDS):
            tr, te = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
            sub = data.subset(tr)
            vocab, b, w = fit([features[i] for i in tr], sub, s, min_subjects)
            z = logits([features[i] for i in te], vocab, b, w)
            # per fold: ranks within the fold, so folds share one scale
            oof[te] = np.argsort(np.argsort(z)) / max(len(te) - 1, 1)
        m = score_metrics(oof, data.weak, data.strong)
        out.append({"label": s.label, "l2": s.l2, "min_df": s.min_df, **m})
    return out


def out_of_fold_scores(data: MMLUData, show: bool = False) -> np.ndarray:
    """The shipped setting's learned score of each training prompt from the fold of the
    grouped cross-validation that did not see its subject: a score as honest as on
    held-out subjects, for developing what reads the score (linucb) on training
    subjects without looking at the held-out ones. Ranks within each fold, in [0, 1]."""
    features = [learned.ask_features(p) for p in data.prompts]
    subjects = sorted(set(data.domains))
    fold_of = {s: i % FOLDS for i, s in enumerate(subjects)}
    folds = np.array([fold_of[d] for d in data.domains])
    chosen = Setting("gap", 0.03, MIN_DF_GRID[0])
    out = np.zeros(len(data))
    for k in common.progress(range(FOLDS), "out-of-fold learned scores", FOLDS, show):
        tr, te = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
        vocab, b, w = fit([features[i] for i in tr], data.subset(tr), chosen, 10)
        z = logits([features[i] for i in te], vocab, b, w)
        out[te] = np.argsort(np.argsort(z)) / max(len(te) - 1, 1)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.train_request_scorer",
        description="Train the learned request scorer on MMLU with whole subjects held out.",
    )
    parser.add_argument("--data", type=Path, default=common.default_data_dir(), metavar="DIR",
                        help="folder holding routellm-mmlu/ (default: %(default)s)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=learned.ARTIFACT_PATH, metavar="FILE",
                        help="artifact to write (default: %(default)s)")  # fmt: skip
    parser.add_argument("--report", type=Path, metavar="FILE",
                        default=common.REPO_ROOT / "eval" / "out" / "train_request_scorer.json",
                        help="training report JSON (default: %(default)s)")  # fmt: skip
    parser.add_argument("--min-subjects", type=int, default=10,
                        help="a feature must occur in this many training subjects")  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    show = not args.quiet

    data = load_mmlu(args.data)
    held = set(held_out_subjects(sorted(set(data.domains))))
    is_test = np.array([d in held for d in data.domains])
    train, test = data.subset(np.flatnonzero(~is_test)), data.subset(np.flatnonzero(is_test))
    feats_train = [
        learned.ask_features(p)
        for p in common.progress(train.prompts, "features", len(train), show)
    ]

    settings = [
        Setting(lb, l2, df) for lb, l2, df in itertools.product(LABELS, L2_GRID, MIN_DF_GRID)
    ]
    cv = cross_validate(feats_train, train, settings, args.min_subjects, show)
    best = max(cv, key=lambda r: r["apgr"])
    chosen = Setting(best["label"], best["l2"], best["min_df"])
    vocab, b, w = fit(feats_train, train, chosen, args.min_subjects)
    z_train = logits(feats_train, vocab, b, w)
    quantiles = [float(q) for q in np.quantile(z_train, np.linspace(0, 1, QUANTILES))]
    names = sorted(vocab, key=vocab.__getitem__)
    weights = {f: round(float(w[vocab[f]]), 5) for f in names if abs(w[vocab[f]]) >= 1e-4}
    scorer = learned.RequestScorer(ARTIFACT_VERSION, round(b, 6), weights, tuple(quantiles))

    test_scores = np.array([scorer.score_text(p) for p in test.prompts])
    report: dict[str, Any] = {
        "artifact": ARTIFACT_VERSION,
        "data": "routellm-mmlu (RouteLLM, Apache-2.0), contaminated prompts removed",
        "weak_model": "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "strong_model": "gpt-4-1106-preview",
        "held_out_subjects": sorted(held),
        "train_prompts": len(train),
        "test_prompts": len(test),
        "chosen": {
            "label": chosen.label,
            "l2": chosen.l2,
            "min_df": chosen.min_df,
            "min_subjects": args.min_subjects,
            "features": len(weights),
        },
        "cross_validation": cv,
        "train_in_sample": score_metrics(z_train, train.weak, train.strong),
        "train_cv_best": best,
        "held_out": score_metrics(test_scores, test.weak, test.strong),
        "prompt_length": {
            "train": score_metrics(prompt_length(train.prompts), train.weak, train.strong),
            "held_out": score_metrics(prompt_length(test.prompts), test.weak, test.strong),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    common.write_json(args.out, scorer.to_json())
    common.write_json(args.report, report)
    for key in ("train_in_sample", "train_cv_best", "held_out"):
        r = report[key]
        print(f"{key:16s} APGR {r['apgr']:.3f}  CPT50 {r['cpt50']}  CPT80 {r['cpt80']}")
    for key, r in report["prompt_length"].items():
        print(f"length {key:9s} APGR {r['apgr']:.3f}")
    print(f"chosen {report['chosen']}; wrote {args.out} and {args.report}")
    return 0


if __name__ == "__main__":
    common.run_cli(main)
