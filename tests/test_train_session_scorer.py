"""The session-scorer trainer's pieces: the trigger rule it evaluates, the fit, and
the artifact it writes loading back into the gateway's scorer."""

from __future__ import annotations

import numpy as np
from eval.session_scorer_data import extract
from eval.train_session_scorer import (
    SHIPPED_THRESHOLD,
    fit,
    logits,
    shipped_scale,
    targets,
    train,
    trigger_peak,
    weights,
)

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


def test_trained_threshold_reads_the_shipped_value_and_keeps_easy_sessions_out() -> None:
    data = extract(generate_corpus(7, 40), real=False)
    assert data.x.shape == (len(data.session), len(FEATURE_NAMES))
    y = targets(data)
    assert np.allclose(y, data.needs_strong)
    w = weights(data, y)
    assert np.isclose(w.sum(), len(data.session_id))
    model, thr = train(data, l2=10.0, easy_rate=0.05)
    p = shipped_scale(logits(model, data.x), thr)
    peak = trigger_peak(p, data.session, len(data.session_id))
    hard = np.zeros(len(data.session_id), dtype=bool)
    np.logical_or.at(hard, data.session, data.needs_strong)
    assert (peak[~hard] < SHIPPED_THRESHOLD).all()  # no non-hard synthetic session fires
    scorer = SessionScorer(
        "t",
        FEATURE_NAMES,
        tuple(model["mean"]),
        tuple(model["scale"]),
        tuple(model["weights"]),
        model["bias"] + float(np.log(SHIPPED_THRESHOLD / (1 - SHIPPED_THRESHOLD))) - thr,
    )
    assert np.isclose(scorer.score(tuple(data.x[0])), p[0])
