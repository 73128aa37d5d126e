"""The session-scorer trainer's pieces: the trigger rule it evaluates, the fit, the
instance-grouped folds, and the artifact it writes loading back into the gateway's
scorer."""

from __future__ import annotations

import numpy as np
import pytest
from eval.session_scorer_data import extract
from eval.session_scorer_model import (
    SHIPPED_THRESHOLD,
    fit,
    instance_folds,
    logits,
    shipped_scale,
    strike_fired,
    targets,
    trigger_peak,
    weights,
)
from eval.train_session_scorer import FEATURE_SETS, Setting, artifact, train

from tiergate.replay.generator import generate_corpus
from tiergate.routing.session_scorer import FEATURE_NAMES, SessionScorer


def test_trigger_needs_two_consecutive_turns_within_one_session() -> None:
    score = np.array([0.9, 0.1, 0.9, 0.9, 0.2, 0.9])
    session = np.array([0, 0, 0, 1, 1, 2])
    peak = trigger_peak(score, session, 3)
    # session 0: pairs (0.9,0.1), (0.1,0.9) -> 0.1; session 1: (0.9,0.2) -> 0.2;
    # session 2 has one turn; the 0.9 of session 0 and 1 never pair across sessions
    assert list(peak) == [0.1, 0.2, -np.inf]


def test_fit_separates_a_separable_signal() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    y = (x[:, 0] > 0).astype(float)
    model = fit(x, y, np.ones(400), l2=1.0)
    assert ((logits(model, x) > 0) == (y > 0.5)).mean() > 0.95
    assert abs(model["weights"][0]) > 5 * max(abs(model["weights"][1]), abs(model["weights"][2]))


def _synthetic():  # type: ignore[no-untyped-def]
    return extract(generate_corpus(7, 40), real=False)


def test_trained_threshold_reads_the_shipped_value_and_keeps_easy_sessions_out() -> None:
    data = _synthetic()
    assert data.x.shape == (len(data.session), len(FEATURE_NAMES))
    y = targets(data)
    assert np.allclose(y, data.needs_strong)
    w = weights(data, y)
    assert np.isclose(w.sum(), len(data.session_id))
    setting = Setting("v2", l2=10.0, easy_rate=0.05, medium=0.5)
    trained = train(data, setting)
    p = shipped_scale(logits(trained.model, data.x[:, setting.cols]), trained.threshold)
    peak = trigger_peak(p, data.session, len(data.session_id))
    hard = np.zeros(len(data.session_id), dtype=bool)
    np.logical_or.at(hard, data.session, data.needs_strong)
    assert (peak[~hard] < SHIPPED_THRESHOLD).all()  # no non-hard synthetic session fires
    doc = artifact(trained, data, 1)
    scorer = SessionScorer.from_artifact(doc)
    assert scorer.names == FEATURE_SETS["v2"]
    assert np.isclose(scorer.score(tuple(data.x[0])), p[0], atol=1e-4)


def test_a_v1_feature_subset_trains_and_loads() -> None:
    data = _synthetic()
    trained = train(data, Setting("v1", l2=10.0, easy_rate=0.05, medium=0.5))
    scorer = SessionScorer.from_artifact(artifact(trained, data, 1))
    assert scorer.names == FEATURE_NAMES[:25] and len(scorer.weights) == 25


def test_instance_folds_keep_every_run_of_an_instance_together_and_spread_buckets() -> None:
    data = _synthetic()
    # pretend pairs of sessions are two agents' runs of one instance
    data.instance = np.array([f"i{n // 2}" for n in range(len(data.session_id))])
    data.bucket = np.array(["hard" if n % 10 < 4 else "easy" for n in range(len(data.session_id))])
    fold = instance_folds(data, 5)
    for inst in set(data.instance.tolist()):
        assert len(set(fold[data.instance == inst].tolist())) == 1
    hard_folds = set(fold[data.bucket == "hard"].tolist())
    assert len(hard_folds) == 5
    assert np.array_equal(fold, instance_folds(data, 5))  # stable


def test_strike_trigger_needs_two_struck_turns_in_one_session_within_the_window() -> None:
    data = _synthetic()
    data.strike = np.zeros(len(data.session), dtype=bool)
    first = np.flatnonzero(data.session == 0)
    second = np.flatnonzero(data.session == 1)
    data.strike[first[:2]] = True  # two struck turns in session 0
    data.strike[second[0]] = True  # one in session 1 ...
    data.strike[np.flatnonzero(data.session == 2)[0]] = True  # ... one in session 2
    fired = strike_fired(data)
    assert fired[0] and not fired[1] and not fired[2]
    assert not strike_fired(data, window=0)[0]


def test_v3_reads_task_difficulty_scores_from_models_that_never_saw_the_instance() -> None:
    """In outer fold f a test session reads key "f", a training session of fold g the
    key "f,g", a synthetic one "f": never the shipped model's column."""
    from eval.train_session_scorer import TD_COL, TaskScores, foldout, pair

    data = _synthetic()
    n = len(data.session_id)
    data.instance = np.array([f"i{k}" for k in range(n)])
    data.bucket = np.array(["hard" if k % 4 == 0 else "easy" for k in range(n)])
    fold = instance_folds(data, 5)
    keys = [str(f) for f in range(5)] + [pair(f, g) for f in range(5) for g in range(f + 1, 5)]
    # a score that names its model: 100 * (folds left out) + session, to check who read what
    real = {
        str(sid): {k: 100.0 * sum(int(c) + 1 for c in k.split(",")) + s for k in keys}
        for s, sid in enumerate(data.session_id)
    }
    synth = extract(generate_corpus(11, 10), real=False)
    td = TaskScores(
        {str(i): int(f) for i, f in zip(data.instance, fold, strict=True)},
        real,
        {str(sid): {str(f): -1.0 for f in range(5)} for sid in synth.session_id},
    )
    td.check(data, fold)
    seen: list[np.ndarray] = []
    import eval.train_session_scorer as tss

    original = tss.train

    def spy(d, setting):  # type: ignore[no-untyped-def]
        seen.append(d.x[:, TD_COL].copy())
        return original(d, setting)

    tss.train = spy
    try:
        foldout(data, synth, Setting("v3", 10.0, 0.05, 0.5), fold, td)
    finally:
        tss.train = original
    assert len(seen) == len(set(fold.tolist()))
    for f, col in zip(sorted(set(fold.tolist())), seen, strict=True):
        # training rows of fold g read the (f, g) model; synthetic rows the model without f
        allowed = {100.0 * (f + 1 + g + 1) for g in range(5) if g != f} | {-1.0}
        models = {float(v // 100 * 100) if v >= 0 else -1.0 for v in col}
        assert models <= allowed


def test_the_shipped_point_is_the_best_one_that_passes_the_agent_cli_check() -> None:
    from eval.agent_cli_check import CheckResult, SessionVerdict
    from eval.train_session_scorer import chosen

    ok = CheckResult((SessionVerdict("t", "a", "stays_base", ("base", "base"), (0.1, 0.1)),))
    bad = CheckResult(
        (SessionVerdict("t", "a", "stays_base", ("base", "strong; reason=difficulty"), (1, 1)),)
    )
    best, second = Setting("v2", 1.0, 0.05, 0.5), Setting("v2", 100.0, 0.03, 0.5)
    grid = [(best, {"J": 0.12}), (second, {"J": 0.10})]  # sorted best first
    checks = {best: bad, second: ok}
    assert bad.failed == ["t"] and not bad.passed
    assert chosen(grid, checks, None) == second
    assert chosen(grid, checks, "v2,1,0.05,0.5") == best  # --setting still pins
    with pytest.raises(SystemExit):
        chosen(grid, {best: bad, second: bad}, None)


def test_mil_shares_move_only_negative_real_sessions_onto_their_top_turns() -> None:
    """Each session still weighs 1; easy/medium real sessions put their weight on the
    highest-scoring turns, hard and synthetic sessions keep the even share."""
    from eval.session_scorer_model import mil_shares

    data = _synthetic()
    n = len(data.session_id)
    data.framework = np.array(["real"] * (n - 1) + ["synthetic"])
    data.bucket = np.array(["easy", "medium", "hard"] * n)[:n]
    z = np.random.default_rng(1).normal(size=len(data.session))
    z[data.session == 0] = np.arange((data.session == 0).sum())  # rising: the peak is last
    lengths = np.bincount(data.session, minlength=n)
    even = 1.0 / lengths[data.session]
    assert np.allclose(mil_shares(data, z, "off"), even)
    for spec in ("peak", "top@0.1", "softmax@1"):
        share = mil_shares(data, z, spec)
        assert np.allclose(np.bincount(data.session, weights=share, minlength=n), 1.0)
        kept = (data.bucket == "hard")[data.session] | (data.session == n - 1)
        assert np.allclose(share[kept], even[kept])
        s = 0  # an easy session: its top turn gains weight, its lowest loses it
        rows = np.flatnonzero(data.session == s)
        assert lengths[s] > 4
        assert share[rows[z[rows].argmax()]] > even[rows[0]] > share[rows[z[rows].argmin()]]
    with pytest.raises(ValueError):
        mil_shares(data, z, "top")


def test_a_mil_setting_parses_trains_and_stays_out_of_a_default_report() -> None:
    from eval.train_session_scorer import described, parse_setting

    assert parse_setting("v1,100,0.1,0.5") == Setting("v1", 100.0, 0.1, 0.5)
    assert "mil" not in described(Setting("v1", 100.0, 0.1, 0.5))
    setting = parse_setting("v1,100,0.1,0.5,peak")
    assert described(setting)["mil"] == "peak"
    with pytest.raises(SystemExit):
        parse_setting("v1,100,0.1,0.5,sideways")
    data = _synthetic()
    trained = train(data, Setting("v1", 10.0, 0.05, 0.5, "softmax@1"))
    assert SessionScorer.from_artifact(artifact(trained, data, 1)).names == FEATURE_NAMES[:25]
