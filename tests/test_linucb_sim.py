"""The batched replica of linucb's rule (eval.linucb_sim) and the linear fit with the
bandit's information (eval.linear_references.bandit_feedback_scores)."""

from __future__ import annotations

import numpy as np
import pytest
from eval import routellm_mmlu
from eval.linear_references import bandit_feedback_scores
from eval.linucb_sim import Rule, penalties, simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.routing import linucb


def test_the_replica_makes_the_real_strategys_decisions() -> None:
    """Rule.gateway(), every cost weight in one batched pass, decides exactly as the
    real strategy code does one weight at a time (routellm_mmlu.linucb_prequential)."""
    rng = np.random.default_rng(5)
    n = 300
    prompts = [f"Item {i}: {'how ' * (i % 5)}which?\nA. a\nB. b\nAnswer:" for i in range(n)]
    weak, strong = rng.random(n) < 0.6, rng.random(n) < 0.8
    scored = routellm_mmlu.score_prompts(prompts, show=False)
    x = np.stack(scored.contexts)
    pen = penalties(scored.prompt_tokens, (routellm_mmlu.WEAK, routellm_mmlu.STRONG))
    order = rng.permutation(n)
    weights = np.array([0.0, 0.3, 1.0])
    replay = simulate(Rule.gateway(), x, (weak * 1.0, strong * 1.0), pen, order, weights)
    for j, w in enumerate(weights):
        real = routellm_mmlu.linucb_prequential(scored, weak, strong, order, float(w), 0.5)
        np.testing.assert_array_equal(replay[:, j], real)


def toy(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contexts in linucb's layout (learned_score carries the signal) and outcomes."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, linucb.DIM))
    x[:, 0] = 1.0
    x[:, 1] = rng.random(n)
    ls = rng.random(n)
    x[:, linucb.FEATURE_NAMES.index("learned_score")] = ls
    strong = rng.random(n) < 0.8
    weak = rng.random(n) < 0.85 - 0.4 * ls
    return x, weak, strong


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), weight=st.floats(0.0, 3.0), flip=st.booleans())
def test_no_stream_locks_out_an_arm(seed: int, weight: float, flip: bool) -> None:
    """Whatever the outcomes and the cost weight, the exploration floor keeps serving
    both arms after the first MIN_PULLS each: no order locks onto one arm."""
    n = 1500
    x, weak, strong = toy(n, seed)
    if flip:  # the strong model never right: the bandit should mostly serve weak
        strong = np.zeros(n, dtype=bool)
    pen = (np.full(n, 0.06), np.full(n, 0.5))
    d = simulate(Rule.gateway(), x, (weak * 1.0, strong * 1.0), pen,
                 np.random.default_rng(seed).permutation(n), np.array([weight]))  # fmt: skip
    served_strong = int(d[:, 0].sum())
    floor = linucb.MIN_PULLS + 5  # exploration alone expects ~EXPLORE_SHARE / 2 * n = 15
    assert floor <= served_strong <= n - floor


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), n=st.integers(5, 60), pos=st.integers(0, 59),
       estimator=st.sampled_from(["direct", "ipw"]))  # fmt: skip
def test_bandit_feedback_scores_read_only_the_past_served_outcome(
    seed: int, n: int, pos: int, estimator: str
) -> None:
    """A prompt's score never depends on its own or later outcomes, nor on the outcome
    of the model that did not serve a past prompt."""
    x, weak, strong = toy(n, seed)
    order = np.random.default_rng(seed).permutation(n)
    served = np.random.default_rng(seed + 1).random(n) < 0.5
    prop = np.full(n, 0.5)
    t = pos % n
    base = bandit_feedback_scores(x, weak, strong, order, served, prop, estimator=estimator)
    flipped = strong.copy()
    flipped[order[t]] = not flipped[order[t]]
    after = bandit_feedback_scores(x, weak, flipped, order, served, prop, estimator=estimator)
    np.testing.assert_array_equal(base[order[: t + 1]], after[order[: t + 1]])
    unseen_w, unseen_s = weak.copy(), strong.copy()
    unseen_w[served], unseen_s[~served] = ~weak[served], ~strong[~served]
    hidden = bandit_feedback_scores(x, unseen_w, unseen_s, order, served, prop,
                                    estimator=estimator)  # fmt: skip
    np.testing.assert_array_equal(hidden, base)


def test_direct_bandit_feedback_score_is_the_difference_of_per_arm_ridges() -> None:
    x, weak, strong = toy(80, 3)
    order = np.random.default_rng(2).permutation(80)
    served = np.random.default_rng(9).random(80) < 0.5
    scores = bandit_feedback_scores(x, weak, strong, order, served, np.full(80, 0.5))
    d = x.shape[1]
    for t in (0, 10, 79):
        seen = order[:t]
        fit = []
        for arm, y in ((False, weak), (True, strong)):
            rows = seen[served[seen] == arm]
            a = np.eye(d) + x[rows].T @ x[rows]
            fit.append(np.linalg.solve(a, x[rows].T @ y[rows].astype(float)))
        i = order[t]
        assert scores[i] == pytest.approx(float(x[i] @ (fit[1] - fit[0])), abs=1e-9)


def test_inverse_propensity_weighting_of_a_given_log_needs_its_propensities() -> None:
    x, weak, strong = toy(10, 0)
    served = np.ones(10, dtype=bool)
    with pytest.raises(ValueError):
        bandit_feedback_scores(x, weak, strong, np.arange(10), served, estimator="ipw")
    assert bandit_feedback_scores(x, weak, strong, np.arange(10), served).shape == (10,)
    with pytest.raises(ValueError):
        bandit_feedback_scores(x, weak, strong, np.arange(10), estimator="dr")
