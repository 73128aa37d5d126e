"""Train the task-difficulty model, report its AUROCs, write its artifact (issue #15).

    PYTHONPATH=src:. python -m eval.train_task_difficulty --data /tmp/issuetext \\
        --scores /tmp/issuetext/td-scores.json --report /tmp/issuetext/td-report.json

Data (eval/task_difficulty/build.py, texts kept in /tmp): per labelled,
non-Verified SWE-bench instance that has a text, its problem statement and the
first user message of every real-traffic session of it (the issue inside each
agent's prompt wrapper, what the gateway reads). Only the 138 Lite instances of
the real-traffic dev corpus have texts (the full-split texts could not be had:
docs/task-difficulty.md), so there is no separate training set: the model is
judged by instance-grouped 5-fold cross-validation on those instances, with the
session scorer's folds (eval.session_scorer_model.instance_fold_table), and the
setting (features, L2) is chosen inside each training set by an inner
leave-one-fold-out CV (nested), never on the fold it is judged on.

Target: easy 0 / medium 0.5 / hard 1 (soft logistic target); each instance
weighs the same, so does each bucket. Reported: instance-level AUROC (mean
logit over the instance's texts) of hard against the rest and of hard against
easy, out of fold, beside the text-length baseline (log characters of the
problem statement, no fitting).

`--scores` writes, for the session scorer's fold-out (eval/train_session_scorer.py
--task-difficulty-scores), every real session's score by models that never saw
its instance: for each fold f the model trained without fold f, and for each
pair (f, g) the model trained without both (the score of a training session of
outer fold f), plus each default-synthetic session's score by the model
trained without fold f. The artifact is the setting chosen by CV on all folds,
fitted on all instances.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from eval.session_scorer_model import instance_fold_table
from eval.task_difficulty.build import first_user_text
from eval.task_difficulty.model import (
    Design,
    Setting,
    design,
    fit,
    instance_scores,
    logits,
    separation,
)
from tiergate.replay.generator import generate_corpus
from tiergate.routing.task_difficulty import ARTIFACT, SHAPE_NAMES

VERSION = "task-difficulty-v1"
BUCKETS = 4096
BIGRAMS = True
FOLDS = 5
GRID: tuple[Setting, ...] = (
    Setting("length", 0.0),
    Setting("shape", 0.0),
    Setting("both", 0.1),
    Setting("both", 0.01),
    Setting("both", 0.03),
)
"""Simplest first: a later point is chosen only if it is strictly better."""
ARTIFACT_PATH = Path("src/tiergate/routing/artifacts") / ARTIFACT


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]


def criterion(sep: dict[str, float]) -> float:
    """What the inner CV maximises: mean of the two AUROCs (nan counts as 0.5)."""
    vals = [sep["hard_vs_rest"], sep["easy_vs_hard"]]
    return float(np.mean([0.5 if math.isnan(v) else v for v in vals]))


def loo(
    d: Design, fold: np.ndarray, folds: list[int], setting: Setting
) -> tuple[dict[str, float], dict[int, dict[str, Any]]]:
    """Leave-one-fold-out over `folds`: out-of-fold instance scores, and the model
    that left each fold out (trained on the other folds of `folds` only)."""
    out: dict[str, float] = {}
    models: dict[int, dict[str, Any]] = {}
    for f in folds:
        train = np.flatnonzero(np.isin(fold, folds) & (fold != f))
        test = np.flatnonzero(fold == f)
        models[f] = fit(d, train, setting)
        out.update(instance_scores(d, test, logits(models[f], d, test)))
    return out, models


@dataclass
class Choice:
    setting: Setting
    models: dict[int, dict[str, Any]]  # the chosen setting's leave-one-fold-out models
    table: dict[str, dict[str, float]]  # every setting's out-of-fold separation


def choose(d: Design, fold: np.ndarray, folds: list[int], bucket_of: dict[str, str]) -> Choice:
    """The grid point with the best leave-one-fold-out criterion over `folds`."""
    best: Choice | None = None
    best_c = -1.0
    table: dict[str, dict[str, float]] = {}
    for setting in GRID:
        scores, models = loo(d, fold, folds, setting)
        sep = separation(scores, bucket_of)
        table[setting.label()] = sep
        c = criterion(sep)
        if c > best_c + 1e-9:
            best, best_c = Choice(setting, models, table), c
    assert best is not None
    best.table = table
    return best


def artifact(model: dict[str, Any], setting: Setting, counts: dict[str, int]) -> dict[str, Any]:
    w = np.asarray(model["ngram_weights"])
    keep = np.flatnonzero(np.abs(w) >= 5e-5)
    shape_w = np.zeros(len(SHAPE_NAMES))
    mean = np.zeros(len(SHAPE_NAMES))
    scale = np.ones(len(SHAPE_NAMES))
    k = len(model["shape_weights"])
    shape_w[:k], mean[:k], scale[:k] = model["shape_weights"], model["mean"], model["scale"]
    return {
        "version": VERSION,
        "model": "ordinal logistic regression; score = sigmoid(bias + sum(shape_weights * "
        "(shape - mean) / scale) + sum over hashed n-grams of weight * 1/sqrt(distinct))",
        "buckets": BUCKETS,
        "bigrams": BIGRAMS,
        "shape": list(SHAPE_NAMES),
        "mean": [round(float(v), 6) for v in mean],
        "scale": [round(float(v), 6) for v in scale],
        "shape_weights": [round(float(v), 6) for v in shape_w],
        "ngrams": {
            "index": [int(i) for i in keep],
            "weights": [round(float(w[i]), 4) for i in keep],
        },
        "bias": round(float(model["bias"]), 6),
        "training": {
            "instances": counts,
            "setting": setting.label(),
            "target": "easy 0 / medium 0.5 / hard 1; each instance and each bucket weighs the same",
            "texts": "problem statement + first user message of each real-traffic session",
            "tuning": f"leave-one-fold-out CV over {FOLDS} instance folds (the session "
            "scorer's), grid " + ", ".join(s.label() for s in GRID),
            "held_out": "SWE-bench Verified (dropped at the join)",
            "command": "PYTHONPATH=src:. python -m eval.task_difficulty.build ...; "
            "python -m eval.train_task_difficulty --data /tmp/issuetext",
        },
        "sources": [
            {
                "what": "SWE-bench Lite test problem statements (data/SWE-bench_Lite/test.parquet)",
                "repository": "SWE-bench/SWE-bench@e05e7b3a",
                "licence": "MIT (SWE-bench); the statements are GitHub issue text of the "
                "upstream repositories",
            },
            {
                "what": "first user message of each real-traffic dev session",
                "repository": "docs/real-traffic.md (sources and licences listed there)",
                "licence": "as listed there",
            },
            {
                "what": "fix-time labels (difficulty.csv), Verified instances dropped",
                "repository": "/work/shared/data/swebench-difficulty",
                "licence": "as published with the SWE-bench Verified annotations",
            },
        ],
    }


def sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -40, 40))))


def synthetic_texts() -> tuple[list[str], list[str]]:
    ids, texts = [], []
    for doc in generate_corpus():
        ids.append(str(doc["session_id"]))
        texts.append(first_user_text(doc))
    return ids, texts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eval.train_task_difficulty", description=__doc__)
    ap.add_argument("--data", type=Path, default=Path("/tmp/issuetext"))
    ap.add_argument("--out", type=Path, default=ARTIFACT_PATH)
    ap.add_argument("--report", type=Path)
    ap.add_argument("--scores", type=Path, help="per-session fold-excluded scores (JSON)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)

    views = read_jsonl(args.data / "views.jsonl")
    statements = read_jsonl(args.data / "statements.jsonl")
    rows = [(v["instance_id"], v["bucket"], v["text"], v["session_id"]) for v in views]
    rows += [(s["instance_id"], s["bucket"], s["problem_statement"], "") for s in statements]
    bucket_of = {r[0]: r[1] for r in rows}
    d = design([r[2] for r in rows], [r[0] for r in rows], [r[1] for r in rows], BUCKETS, BIGRAMS)
    fold_of = instance_fold_table(bucket_of, FOLDS)
    fold = np.array([fold_of[r[0]] for r in rows])
    all_folds = list(range(FOLDS))
    is_statement = np.array([r[3] == "" for r in rows])

    # ---- nested CV: the setting chosen inside each outer training set ------------------
    # The inner leave-one-fold-out models of outer fold f are the models without {f, g}:
    # they score the session scorer's training sessions of fold g when f is its test fold.
    oof: dict[str, float] = {}
    chosen: dict[int, str] = {}
    models: dict[tuple[int, ...], dict[str, Any]] = {}
    for f in all_folds:
        inner = [g for g in all_folds if g != f]
        choice = choose(d, fold, inner, bucket_of)
        for g, m in choice.models.items():
            models[tuple(sorted((f, g)))] = m  # same rows either way round; keep one
        model = fit(d, np.flatnonzero(fold != f), choice.setting)
        models[(f,)] = model
        chosen[f] = choice.setting.label()
        test = np.flatnonzero(fold == f)
        oof.update(instance_scores(d, test, logits(model, d, test)))
        print(f"outer fold {f}: {choice.setting.label()}", file=sys.stderr)
    stmt_rows = np.flatnonzero(is_statement)
    length_only = {str(d.instance[i]): float(d.shape[i, 0]) for i in stmt_rows}
    sess_rows = np.flatnonzero(~is_statement)
    length_views = instance_scores(d, sess_rows, d.shape[sess_rows, 0])
    final_choice = choose(d, fold, all_folds, bucket_of)
    final = fit(d, np.arange(len(rows)), final_choice.setting)
    models[()] = final
    report: dict[str, Any] = {
        "data": {"texts": len(rows), "statements": int(is_statement.sum())},
        "nested_cv": {
            "model": separation(oof, bucket_of),
            "chosen_per_outer_fold": chosen,
        },
        "baseline_length": separation(length_only, bucket_of),
        "baseline_length_of_first_messages": separation(length_views, bucket_of),
        "settings_leave_one_fold_out_not_nested": final_choice.table,
        "artifact_setting": final_choice.setting.label(),
    }
    print(json.dumps(report, indent=1))
    if args.report:
        args.report.write_text(json.dumps(report, indent=1) + "\n")

    if args.scores:
        sess = np.flatnonzero(~is_statement)
        real: dict[str, dict[str, float]] = {}
        for key, model in models.items():
            p = sigmoid(logits(model, d, sess))
            name = ",".join(str(k) for k in key)
            for i, v in zip(sess.tolist(), p.tolist(), strict=True):
                real.setdefault(rows[i][3], {})[name] = round(float(v), 6)
        sids, texts = synthetic_texts()
        sd = design(texts, sids, ["easy"] * len(sids), BUCKETS, BIGRAMS)
        synthetic: dict[str, dict[str, float]] = {sid: {} for sid in sids}
        for f in all_folds:
            p = sigmoid(logits(models[(f,)], sd, np.arange(len(sids))))
            for sid, v in zip(sids, p.tolist(), strict=True):
                synthetic[sid][str(f)] = round(float(v), 6)
        doc = {"version": VERSION, "folds": fold_of, "real": real, "synthetic": synthetic}
        args.scores.write_text(json.dumps(doc) + "\n")
    if not args.no_write:
        counts = {b: list(bucket_of.values()).count(b) for b in ("easy", "medium", "hard")}
        args.out.write_text(json.dumps(artifact(final, final_choice.setting, counts)) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
