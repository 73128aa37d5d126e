"""Train the learned session scorer, tune it on folds, rebuild its artifact (issue #15).

    PYTHONPATH=src:. python -m eval.train_session_scorer --corpus-dir /tmp/rt/corpus

Training data: the real SWE-bench Lite development corpus (docs/real-traffic.md,
both protocols; Verified instances were dropped at its build) and the default
synthetic corpus (`tiergate replay`'s generator, seed 20260814). Held out, never
trained or tuned on: the independent synthetic corpus (reported once, after
the choice is made) and SWE-bench Verified (not in the corpus).

Target: per turn, the session's bucket on an ordinal scale (easy 0, medium
`--medium` or tuned, hard 1) for real sessions, the turn's `needs_strong` for
synthetic ones; each session weighs the same whatever its length, and classes
are balanced. Model: L2 logistic regression (Newton's method, numpy) on
standardised features (`FEATURE_SETS`: v1's 25 or v2's 34). The trigger
threshold is the lowest that keeps the training easy sessions under the easy
rate and every non-hard synthetic session below it; the bias is then shifted
so that it reads 0.55 (the shipped `escalation.delta_t2`). The engine reads the
model's score floored at the turn's lexical score (`session_score`).

Tuning: instance-grouped, bucket-stratified 5-fold cross-validation on the real
sessions (no SWE-bench instance, whichever agent ran it, on both sides of a
fold; the synthetic corpus stays in every training fold). Every point of the
grid (feature set x L2 x easy rate x medium target) is scored fold-out by
J = hard rate - easy rate of "difficulty trigger or strike trigger" (the strike
trigger approximated, eval.session_scorer_model.strike_fired). Every point is
also retrained on all the development data and run through the agent-CLI check
(eval/agent_cli_check.py: the captured sessions of the real agent-CLI tests
replayed through the engine, eval/agent_cli_sessions/); a point whose model
escalates a no-struggle session, or breaks a failure loop's test, is
ineligible. The best eligible point (`--setting` pins another) is written as
the artifact. Its
fold-out per-turn scores (`--foldout-scores`) feed the engine replay
(`eval.realtraffic.figures --learned-scores`). Fold-out figures of the chosen
point were selected on the same folds, so they lean optimistic; the
leave-one-repository-out figures of that point are printed beside them.

Study option, off by default: `--points` searches a hand-picked list instead of
the grid, and a point's fifth field (`Setting.mil`) reweights the real easy and
medium sessions' turns toward their highest-scoring ones (multiple-instance
training, eval.session_scorer_model.mil_shares). Measured and not adopted
(docs/session-scorer.md, "Tried and not adopted: multiple-instance training").
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from tqdm import tqdm

from eval import agent_cli_check
from eval.session_scorer_corpora import SOURCES, load_development, load_held_out
from eval.session_scorer_data import Extracted
from eval.session_scorer_model import (
    MIL_ROUNDS,
    SHIPPED_THRESHOLD,
    choose_threshold,
    engine_scores,
    escalated_table,
    fired_by,
    fit,
    instance_folds,
    is_synthetic,
    logits,
    merge,
    mil_shares,
    parse_mil,
    rates,
    strike_fired,
    subset,
    targets,
    weights,
)
from tiergate.routing.session_scorer import ARTIFACT, FEATURE_NAMES, SessionScorer

FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "v1": FEATURE_NAMES[:25],
    "v2": FEATURE_NAMES[:34],
    "v3": FEATURE_NAMES[:35],
}
"""v1: the first artifact's features; v2: plus passes, progress events, the recent
failure rate, steps before the first edit and since the last, distinct actions,
repeat share, mean reply and observation length; v3: plus the task-difficulty score
(routing.task_difficulty), only with --task-difficulty-scores (fold-excluded scores)."""
TD_COL = FEATURE_NAMES.index("task_difficulty")
GRID = {
    "features": ("v1", "v2", "v3"),
    "l2": (1.0, 10.0, 100.0),
    "easy_rate": (0.03, 0.05, 0.10),
    "medium": (0.0, 0.5),
}
FOLDS = 5
ARTIFACTS = Path("src/tiergate/routing/artifacts")
"""The shipped artifact is ARTIFACTS / ARTIFACT; it names the feature set it reads."""


# ---- one grid point -----------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    features: str
    l2: float
    easy_rate: float
    medium: float
    mil: str = "off"
    """Multiple-instance reweighting of the negative sessions' turns (a study option,
    eval.session_scorer_model.mil_shares; "off" is the shipped objective)."""

    @property
    def cols(self) -> np.ndarray:
        return np.array([FEATURE_NAMES.index(n) for n in FEATURE_SETS[self.features]])


@dataclass
class Trained:
    setting: Setting
    model: dict[str, Any]
    threshold: float  # logit

    def scores(self, d: Extracted) -> np.ndarray:
        return engine_scores(self.model, self.threshold, d, self.setting.cols)


@dataclass(frozen=True)
class TaskScores:
    """Task-difficulty scores by models that never saw the instance
    (eval/train_task_difficulty.py --scores): per real session, key "f" = the model
    trained without instance fold f, "f,g" (f < g) = without folds f and g; per default
    synthetic session, "f". The extracted column holds the shipped model's score, which
    saw every dev instance, so v3 never trains or is judged on that column."""

    folds: dict[str, int]
    real: dict[str, dict[str, float]]
    synthetic: dict[str, dict[str, float]]

    @classmethod
    def load(cls, path: Path) -> TaskScores:
        doc = json.loads(path.read_text())
        return cls(doc["folds"], doc["real"], doc["synthetic"])

    def check(self, real: Extracted, fold: np.ndarray) -> None:
        """The task-difficulty folds are the session scorer's instance folds."""
        for inst, f in zip(real.instance.tolist(), fold.tolist(), strict=True):
            if self.folds.get(inst) != f:
                raise SystemExit(f"task-difficulty folds differ from ours at {inst}")

    def column(self, d: Extracted, key: Callable[[int], str], synthetic: bool = False) -> Extracted:
        """`d` with its task_difficulty column replaced: session s reads key(s) (from the
        default synthetic corpus' table if `synthetic`)."""
        table = self.synthetic if synthetic else self.real
        values = np.array([table[str(sid)][key(s)] for s, sid in enumerate(d.session_id)])
        x = d.x.copy()
        x[:, TD_COL] = values[d.session]
        return Extracted(**{**d.__dict__, "x": x})


def pair(f: int, g: int) -> str:
    return f"{min(f, g)},{max(f, g)}"


def train(d: Extracted, setting: Setting) -> Trained:
    y = targets(d, setting.medium)
    x = d.x[:, setting.cols]
    model = fit(x, y, weights(d, y), setting.l2)
    for _ in range(MIL_ROUNDS if setting.mil != "off" else 0):
        share = mil_shares(d, logits(model, x), setting.mil)
        model = fit(x, y, weights(d, y, share), setting.l2)
    return Trained(setting, model, choose_threshold(d, logits(model, x), setting.easy_rate))


def foldout(
    real: Extracted,
    synth: Extracted,
    setting: Setting,
    fold: np.ndarray,
    td: TaskScores | None = None,
    inst_fold: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, list[float]]]:
    """Each real session scored by a model (and threshold) trained without its fold.
    Returns per-session fired flags (difficulty trigger alone) and per-turn scores on
    the engine's scale, by session id. With v3, the task-difficulty column comes from
    `td`: when `fold` is the instance folds, a test session of fold f reads the model
    without f, a training session of fold g the model without f and g, a synthetic
    one the model without f; for another split (leave one repository out), every real
    session reads the model without its own instance fold (`inst_fold`)."""
    uses_td = "task_difficulty" in FEATURE_SETS[setting.features]
    if uses_td and td is None:
        raise ValueError("feature set v3 needs --task-difficulty-scores")
    instance_split = inst_fold is None or np.array_equal(fold, inst_fold)
    fired = np.zeros(len(real.session_id), dtype=bool)
    scores: dict[str, list[float]] = {}
    for f in sorted(set(fold.tolist())):
        held = fold == f
        train_real, test, synth_f = subset(real, ~held), subset(real, held), synth
        if uses_td and td is not None:
            if instance_split:
                g_of = fold[~held]
                train_real = td.column(train_real, lambda s, g_of=g_of, f=f: pair(f, g_of[s]))
                test = td.column(test, lambda s, f=f: str(f))
                synth_f = td.column(synth, lambda s, f=f: str(f), synthetic=True)
            else:
                assert inst_fold is not None
                own_tr, own_te = inst_fold[~held], inst_fold[held]
                train_real = td.column(train_real, lambda s, o=own_tr: str(o[s]))
                test = td.column(test, lambda s, o=own_te: str(o[s]))
        trained = train(merge([train_real, synth_f]), setting)
        p = trained.scores(test)
        fired[np.flatnonzero(held)] = fired_by(p, test)
        for s, sid in enumerate(test.session_id):
            scores[str(sid)] = [round(float(v), 5) for v in p[test.session == s]]
    return fired, scores


def judged(real: Extracted, trigger: np.ndarray, strikes: np.ndarray) -> dict[str, Any]:
    """Fold-out rates of the trigger alone and of trigger-or-strikes, and J; pooled
    (what the grid is sorted by) and per protocol (a point should not buy its pooled
    J on one protocol only)."""
    both = trigger | strikes
    r_trigger, r_both = rates(real, trigger), rates(real, both)
    by_protocol = {}
    for p in sorted(set(real.protocol.tolist())):
        mine = real.protocol == p
        r = rates(subset(real, mine), both[mine])
        by_protocol[p] = {
            "trigger_or_strikes": r,
            "J": round(r.get("hard", 0.0) - r.get("easy", 0.0), 4),
        }
    return {
        "trigger": r_trigger,
        "trigger_or_strikes": r_both,
        "J": round(r_both.get("hard", 0.0) - r_both.get("easy", 0.0), 4),
        "by_protocol": by_protocol,
    }


def grid_search(
    real: Extracted,
    synth: Extracted,
    fold: np.ndarray,
    td: TaskScores | None = None,
    only: str | None = None,
    points: list[Setting] | None = None,
) -> list[tuple[Setting, dict[str, Any]]]:
    """Every grid point (or only `points`, a study's hand-picked list) scored fold-out."""
    strikes = strike_fired(real)
    out = []
    if points is None:
        points = [
            Setting(*cast(tuple[str, float, float, float], v))
            for v in itertools.product(*GRID.values())
            if (td is not None or v[0] != "v3") and only in (None, v[0])
        ]
    for setting in tqdm(points, desc="grid (fold-out)", unit="setting"):
        fired, _ = foldout(real, synth, setting, fold, td)
        out.append((setting, judged(real, fired, strikes)))
    # best J; ties: fewer easy sessions, then the simpler model (stronger L2, v1)
    out.sort(
        key=lambda t: (
            -t[1]["J"],
            t[1]["trigger_or_strikes"].get("easy", 0.0),
            -t[0].l2,
            t[0].features,
        )
    )
    return out


def parse_setting(spec: str) -> Setting:
    """ "v1,100,0.1,0.5" (or with a fifth field, the mil option: "v1,100,0.1,0.5,peak")."""
    features, l2, easy_rate, medium, *mil = spec.split(",")
    if features not in FEATURE_SETS or len(mil) > 1:
        raise SystemExit(f"{spec}: FEATURES,L2,EASY_RATE,MEDIUM[,MIL]")
    try:
        parse_mil(mil[0] if mil else "off")
    except ValueError as e:
        raise SystemExit(str(e)) from e
    return Setting(features, float(l2), float(easy_rate), float(medium), *mil)


def described(setting: Setting) -> dict[str, Any]:
    """The setting as reported; the mil key only when it is on, so a default run's
    artifact and report read as before the option existed."""
    out = asdict(setting)
    if setting.mil == "off":
        del out["mil"]
    return out


def pinned(spec: str, searched: list[Setting]) -> Setting:
    """The grid point `spec` ("v1,1,0.05,0.5") names; it must be one the grid searched."""
    setting = parse_setting(spec)
    if setting not in searched:
        raise SystemExit(f"--setting {spec}: not a point of the searched grid")
    return setting


def training_rows(
    real: Extracted, setting: Setting, fold: np.ndarray, td: TaskScores | None
) -> Extracted:
    """The real rows the shipped model of `setting` trains on: with v3, every real
    session reads the task-difficulty model without its own instance fold; synthetic
    ones (and the held-out corpus) keep the shipped model's score, as at run time."""
    if td is not None and "task_difficulty" in FEATURE_SETS[setting.features]:
        return td.column(real, lambda s: str(fold[s]))
    return real


def as_scorer(trained: Trained, d: Extracted) -> SessionScorer:
    """The model as the gateway would load it from its artifact (same rounding)."""
    return SessionScorer.from_artifact(artifact(trained, d, 0))


def agent_cli_eligibility(
    grid: list[tuple[Setting, dict[str, Any]]],
    real: Extracted,
    synth: Extracted,
    fold: np.ndarray,
    td: TaskScores | None,
) -> dict[Setting, agent_cli_check.CheckResult]:
    """Per grid point, the agent-CLI check of its model trained on all the data."""
    sessions = agent_cli_check.load_sessions()
    out = {}
    for setting, _ in tqdm(grid, desc="agent-CLI check", unit="setting"):
        d = merge([training_rows(real, setting, fold, td), synth])
        out[setting] = agent_cli_check.check(as_scorer(train(d, setting), d), sessions)
    return out


def chosen(
    grid: list[tuple[Setting, dict[str, Any]]],
    checks: dict[Setting, agent_cli_check.CheckResult],
    spec: str | None,
) -> Setting:
    """The shipped point: `spec` if given, else the best grid point (the grid is sorted
    best first) that passes the agent-CLI check."""
    if spec:
        setting = pinned(spec, [g[0] for g in grid])
        if not checks[setting].passed:
            print(
                f"warning: --setting {spec} fails the agent-CLI check: {checks[setting].failed}",
                file=sys.stderr,
            )
        return setting
    for setting, _ in grid:
        if checks[setting].passed:
            return setting
    raise SystemExit("no grid point passes the agent-CLI check (eval/agent_cli_check.py)")


def lexical_fired(d: Extracted) -> np.ndarray:
    return fired_by(d.delta, d)


def artifact(trained: Trained, d: Extracted, grid_size: int) -> dict[str, Any]:
    shift = math.log(SHIPPED_THRESHOLD / (1 - SHIPPED_THRESHOLD)) - trained.threshold
    model, setting = trained.model, trained.setting
    counts = {
        f"{p}/{b}": int(((d.protocol == p) & (d.bucket == b)).sum())
        for p in sorted(set(d.protocol.tolist()))
        for b in sorted(set(d.bucket.tolist()))
        if ((d.protocol == p) & (d.bucket == b)).any()
    }
    return {
        # the artifact's own name, then the feature set it reads (not the same thing:
        # the shipped session_scorer_v2.json may hold a model on the v1 features)
        "version": f"{Path(ARTIFACT).stem.replace('_', '-')} (features {setting.features})",
        "model": "logistic regression on standardised features; score = sigmoid(bias + "
        "sum(weights * (x - mean) / scale)); trigger at escalation.delta_t2 = 0.55",
        "features": list(FEATURE_SETS[setting.features]),
        "mean": [round(float(v), 6) for v in model["mean"]],
        "scale": [round(float(v), 6) for v in model["scale"]],
        "weights": [round(float(v), 6) for v in model["weights"]],
        "bias": round(model["bias"] + shift, 6),
        "training": {
            "sessions": counts,
            "turns": len(d.session),
            "target": f"real: bucket easy 0 / medium {setting.medium} / hard 1 on every turn; "
            "synthetic: the turn's needs_strong",
            "setting": described(setting),
            "tuning": f"{grid_size} grid points, instance-grouped {FOLDS}-fold CV on the real "
            "sessions, best fold-out J (hard rate - easy rate, difficulty or strike trigger) "
            "among the points that pass the agent-CLI check (eval/agent_cli_check.py)",
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
        description="Tune the learned session scorer on instance-grouped folds of the "
        "development corpora, report fold-out and held-out figures, write the artifact.",
    )
    ap.add_argument("--corpus-dir", type=Path, required=True, help="realtraffic build folder")
    ap.add_argument("--cache-dir", type=Path, default=Path("/tmp/session-scorer-cache"))
    ap.add_argument(
        "--out", type=Path, help=f"artifact path (default {ARTIFACTS}/{ARTIFACT}, the shipped one)"
    )
    ap.add_argument(
        "--setting",
        metavar="FEATURES,L2,EASY_RATE,MEDIUM[,MIL]",
        help="ship this grid point instead of the best one (the grid is still searched, "
        "checked and reported); by default the shipped point is the best one that passes "
        "the agent-CLI check (eval/agent_cli_check.py, docs/session-scorer.md)",
    )
    ap.add_argument("--report", type=Path, help="write the evaluation JSON here")
    ap.add_argument("--no-write", action="store_true", help="evaluate only")
    ap.add_argument(
        "--feature-set",
        choices=sorted(FEATURE_SETS),
        help="search only this feature set's grid points (to measure one set; the "
        "shipped choice searches all)",
    )
    ap.add_argument(
        "--task-difficulty-scores",
        type=Path,
        help="fold-excluded task-difficulty scores (eval/train_task_difficulty.py --scores); "
        "without them the grid has no v3 points",
    )
    ap.add_argument(
        "--foldout-scores",
        type=Path,
        help="write per-turn fold-out scores of the real sessions (JSON, numbers only) for "
        "`python -m eval.realtraffic.figures --learned-scores`",
    )
    ap.add_argument(
        "--points",
        nargs="+",
        metavar="FEATURES,L2,EASY_RATE,MEDIUM[,MIL]",
        help="search only these points instead of the grid (a study; the fifth field is "
        "the multiple-instance option: off, peak, top@Q, softmax@T, "
        "eval.session_scorer_model.mil_shares; default off)",
    )
    args = ap.parse_args(argv)
    points = [parse_setting(p) for p in args.points] if args.points else None

    data = load_development(args.corpus_dir, args.cache_dir)
    real = merge([data["text"], data["tool-call"]])
    synth = data["synthetic"]
    fold = instance_folds(real, FOLDS)
    td = TaskScores.load(args.task_difficulty_scores) if args.task_difficulty_scores else None
    if args.feature_set == "v3" and td is None:
        ap.error("--feature-set v3 needs --task-difficulty-scores")
    if td is not None:
        td.check(real, fold)
    if points and td is None and any(p.features == "v3" for p in points):
        ap.error("a v3 point needs --task-difficulty-scores")
    grid = grid_search(real, synth, fold, td, args.feature_set, points)
    checks = agent_cli_eligibility(grid, real, synth, fold, td)
    best = chosen(grid, checks, args.setting)
    fired, foldout_scores = foldout(real, synth, best, fold, td)
    if args.foldout_scores:
        args.foldout_scores.write_text(json.dumps(foldout_scores) + "\n")
    repo = np.unique(real.group, return_inverse=True)[1]
    by_repo, _ = foldout(real, synth, best, repo, td, fold)
    train_real = training_rows(real, best, fold, td)
    trained = train(merge([train_real, synth]), best)
    everything = merge([train_real, synth])
    strikes = strike_fired(real)

    def final(d: Extracted) -> np.ndarray:
        return fired_by(trained.scores(d), d)

    # the held-out corpus is read only now, after the setting is chosen
    held = load_held_out(args.cache_dir)
    report = {
        "trigger_only": "difficulty trigger alone (2 consecutive turns >= threshold), no caps, "
        "no strikes, unless a key says strikes; the engine figures are in docs/real-traffic.md",
        "setting": described(best),
        "folds": f"instance-grouped, bucket-stratified {FOLDS}-fold",
        "selection": "best fold-out J among the grid points whose model passes the "
        "agent-CLI check (eval/agent_cli_check.py)"
        + (f"; pinned by --setting {args.setting}" if args.setting else ""),
        "agent_cli_check": checks[best].as_dict(),
        "grid": [
            {
                **described(s),
                "J": r["J"],
                "trigger_or_strikes": r["trigger_or_strikes"],
                "by_protocol": r["by_protocol"],
                "agent_cli": checks[s].as_dict(),
            }
            for s, r in grid
        ],
        "real_foldout": {
            "learned": escalated_table(real, fired),
            "lexical": escalated_table(real, lexical_fired(real)),
            "learned_or_strikes": escalated_table(real, fired | strikes),
            "lexical_or_strikes": escalated_table(real, lexical_fired(real) | strikes),
        },
        "real_leave_one_repository_out": {"learned": escalated_table(real, by_repo)},
        "real_train_fit": {"learned": escalated_table(real, final(train_real))},
        "synthetic_default": {
            "learned": escalated_table(synth, final(synth)),
            "lexical": escalated_table(synth, lexical_fired(synth)),
        },
        "independent_held_out": {
            "learned": escalated_table(held, final(held)),
            "lexical": escalated_table(held, lexical_fired(held)),
        },
        "weights": dict(
            zip(
                FEATURE_SETS[best.features],
                [round(float(w), 3) for w in trained.model["weights"]],
                strict=True,
            )
        ),
    }
    assert not is_synthetic(real).any()
    text = json.dumps(report, indent=1)
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    if not args.no_write:
        out = args.out or ARTIFACTS / ARTIFACT
        out.write_text(json.dumps(artifact(trained, everything, len(grid))) + "\n")
        print(f"wrote {out} (the gateway reads {ARTIFACT})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
