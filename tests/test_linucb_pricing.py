"""linucb after issue 17: the per-token cost penalty, the warm start's precision, the
gateway's commit pricing per token, and the linear-fit references the bandit is
compared with."""

from __future__ import annotations

import math

import numpy as np
import pytest
from eval.linear_references import (
    cross_fitted_scores,
    greedy_bandit_decisions,
    in_sample_scores,
    prequential_scores,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from servers import gateway_config
from tiergate.config_load import parse_config
from tiergate.core.model import ChatResponse, TextPart, Usage
from tiergate.formats.openai import parse_request
from tiergate.gateway.auth import TokenTable
from tiergate.gateway.planner import Outcome, Planner
from tiergate.routing import linucb
from tiergate.routing.distributor import Distributor
from tiergate.routing.linucb import LinUCBArm, reward, update
from tiergate.state.memory import MemoryStore

# ---- the cost penalty ---------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    price=st.floats(0.01, 100.0),
    tokens=st.integers(1, 200_000),
    scale=st.integers(1, 50),
    weight=st.floats(0.0, 3.0),
)
def test_per_token_penalty_does_not_grow_with_the_request(
    price: float, tokens: int, scale: int, weight: float
) -> None:
    """Priced per token, a long request and a short one on the same model pay the same
    penalty, so the cost term tells arms apart and not prompt lengths."""
    cost = price * tokens / 1e6
    short = reward(True, cost, tokens=tokens, cost_weight=weight)
    long = reward(True, cost * scale, tokens=tokens * scale, cost_weight=weight)
    assert long == pytest.approx(short, abs=1e-12)
    assert 1.0 - weight <= short <= 1.0


def test_per_token_penalty_values() -> None:
    ref = linucb.DEFAULT_PRICE_REF_USD_PER_M
    # a model at the reference price pays half the cost weight, whatever the size
    assert reward(True, ref * 1e-6 * 1000, tokens=1000) == pytest.approx(1 - 0.3 * 0.5)
    cheap = reward(True, 0.6e-6 * 500, tokens=500)
    frontier = reward(True, 10e-6 * 500, tokens=500)
    assert 1.0 > cheap > frontier
    assert reward(False, 0.0, tokens=0) == 0.0  # nothing billed, nothing charged
    assert reward(True, 0.5, tokens=0) == 1.0
    assert reward(True, 0.0, feedback=0.25, tokens=100) == 0.25
    # without tokens: the request's USD, as before (kept for callers that lack usage)
    assert reward(True, 0.01) == pytest.approx(1.0 - 0.3 * 0.5)


@settings(max_examples=100, deadline=None)
@given(tokens=st.integers(1, 100_000), weight=st.floats(0.01, 3.0))
def test_per_token_penalty_orders_models_by_price(tokens: int, weight: float) -> None:
    prices = [0.1, 0.6, 3.0, 10.0, 30.0]
    rewards = [reward(True, p * tokens / 1e6, tokens=tokens, cost_weight=weight) for p in prices]
    assert rewards == sorted(rewards, reverse=True)


# ---- the warm start's precision -----------------------------------------------------------


def closed_form_ucb(
    arm: LinUCBArm, x: np.ndarray, alpha: float, prior: np.ndarray, warm: float
) -> float:
    """The ridge posterior under prior mean `prior` and precision `arm.ridge` everywhere
    but `warm` on learned_score, solved directly."""
    precision = np.full(arm.dim, arm.ridge)
    precision[linucb.FEATURE_NAMES.index("learned_score")] = warm
    a = np.linalg.inv(arm.a_inv) - arm.ridge * np.eye(arm.dim) + np.diag(precision)
    theta = np.linalg.solve(a, arm.b + precision * prior)
    return float(theta @ x) + alpha * math.sqrt(float(x @ np.linalg.solve(a, x)))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    pulls=st.integers(0, 60),
    strength=st.floats(-1.0, 1.0),
    warm=st.floats(1.0, 5000.0),
    alpha=st.floats(0.0, 2.0),
    ridge=st.sampled_from([1.0, linucb.PRIOR_PRECISION, 30.0]),
)
def test_warm_start_is_the_ridge_posterior_under_that_prior(
    seed: int, pulls: int, strength: float, warm: float, alpha: float, ridge: float
) -> None:
    """Whatever ridge the arm was built on (1 for a stored v1 arm), and a warm start
    above or below it."""
    rng = np.random.default_rng(seed)
    arm = LinUCBArm.fresh(ridge=ridge)
    for _ in range(pulls):
        arm = update(arm, rng.random(linucb.DIM), float(rng.random()))
    x = rng.random(linucb.DIM)
    prior = linucb.arm_prior(strength)
    got = arm.ucb(x, alpha, prior, warm_start=warm)
    assert got == pytest.approx(closed_form_ucb(arm, x, alpha, prior, warm), rel=1e-7, abs=1e-9)


def test_default_warm_start_holds_the_learned_slope_against_early_noise() -> None:
    """Thirty unlucky pulls of the strong arm on high-scoring asks move its learned-score
    slope much less than they did with a prior worth one observation."""
    x = np.zeros(linucb.DIM)
    x[0] = 1.0
    learned_axis = linucb.FEATURE_NAMES.index("learned_score")
    arm = LinUCBArm.fresh()
    rng = np.random.default_rng(0)
    for _ in range(30):
        xi = x.copy()
        xi[learned_axis] = rng.uniform(0.8, 1.0)
        arm = update(arm, xi, 0.0)
    prior = linucb.arm_prior(1.0)
    hi, lo = x.copy(), x.copy()
    hi[learned_axis], lo[learned_axis] = 1.0, 0.0
    held = arm.ucb(hi, 0.0, prior) - arm.ucb(lo, 0.0, prior)
    loose = arm.ucb(hi, 0.0, prior, warm_start=1.0) - arm.ucb(lo, 0.0, prior, warm_start=1.0)
    assert held > 0.4 > loose  # the prior slope is 0.5
    assert linucb.WARM_START_PRECISION > 1.0


def test_no_prior_means_the_plain_ridge_fit() -> None:
    arm = update(LinUCBArm.fresh(), np.full(linucb.DIM, 0.5), 1.0)
    x = np.full(linucb.DIM, 0.3)
    plain = float(arm.theta @ x) + 0.5 * math.sqrt(float(x @ arm.a_inv @ x))
    assert arm.ucb(x, 0.5) == pytest.approx(plain)


# ---- the gateway prices the bandit's cost per token ---------------------------------------


BANDIT_ROUTER = {
    "name": "bandit",
    "allowed_models": ["openai/*"],
    "strategy": "linucb",
    "session_aware": False,
}


async def test_commit_rewards_the_arm_with_the_per_token_penalty() -> None:
    cfg = parse_config(gateway_config("http://x", routers=[BANDIT_ROUTER]))
    distributor = Distributor.from_config(cfg)
    store = MemoryStore()
    planner = Planner(cfg, distributor, store)
    ws = TokenTable(cfg.workspaces).lookup("tg-test-token")
    assert ws is not None
    body = {"model": "orcarouter/bandit", "messages": [{"role": "user", "content": "Sort it"}]}
    plan = await planner.plan(parse_request(body), body, {}, ws, "r1")
    target = next(distributor.attempts(plan.models, plan.channel_pin))
    usage = Usage(input_tokens=9000, output_tokens=1000)
    resp = ChatResponse("id", target.model, [TextPart("ok")], usage=usage)
    await plan.commit(Outcome(True, target, resp, cost=0.05))
    arm = (await planner.bandits.load("bandit", [target.model]))[target.model]
    assert plan.bandit_x is not None and arm.pulls == 1
    expected = reward(True, 0.05, tokens=10_000)
    np.testing.assert_allclose(arm.b, expected * plan.bandit_x)
    assert expected == pytest.approx(1 - 0.3 * 5.0 / (5.0 + 10.0))  # $5 per 1M tokens


# ---- the linear-fit references ------------------------------------------------------------


def toy(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.column_stack([np.ones(n), rng.random((n, 3))])
    strong = rng.random(n) < 0.5 + 0.4 * x[:, 1]
    weak = rng.random(n) < 0.7 - 0.4 * x[:, 1]
    return x, weak, strong


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), n=st.integers(5, 60), pos=st.integers(0, 59))
def test_prequential_scores_never_read_the_present_or_the_future(
    seed: int, n: int, pos: int
) -> None:
    """Flipping one prompt's outcome changes no score up to and including its own turn."""
    x, weak, strong = toy(n, seed)
    order = np.random.default_rng(seed).permutation(n)
    t = pos % n
    before = prequential_scores(x, weak, strong, order)
    flipped = strong.copy()
    flipped[order[t]] = not flipped[order[t]]
    after = prequential_scores(x, weak, flipped, order)
    np.testing.assert_array_equal(before[order[: t + 1]], after[order[: t + 1]])


def test_prequential_score_is_the_ridge_fit_on_the_prefix() -> None:
    x, weak, strong = toy(40, 3)
    order = np.random.default_rng(1).permutation(40)
    scores = prequential_scores(x, weak, strong, order, ridge=2.0)
    y = strong.astype(float) - weak.astype(float)
    for t in (0, 1, 17, 39):
        seen = order[:t]
        theta = np.linalg.solve(2.0 * np.eye(4) + x[seen].T @ x[seen], x[seen].T @ y[seen])
        assert scores[order[t]] == pytest.approx(float(x[order[t]] @ theta))


def test_cross_fitted_scores_do_not_read_their_own_label() -> None:
    x, weak, strong = toy(50, 5)
    base = cross_fitted_scores(x, weak, strong)
    for i in (0, 13, 49):
        flipped = weak.copy()
        flipped[i] = not flipped[i]
        assert cross_fitted_scores(x, flipped, strong)[i] == pytest.approx(base[i])
    insample = in_sample_scores(x, weak, strong)
    flipped = weak.copy()
    flipped[0] = not flipped[0]
    assert in_sample_scores(x, flipped, strong)[0] != pytest.approx(insample[0])


def test_greedy_bandit_without_exploration_can_lock_onto_one_model() -> None:
    """The information-matched reference: with a positive margin and no prior it serves
    the weak model first and never learns what the strong one would have done."""
    x, weak, strong = toy(200, 2)
    order = np.arange(200)
    decisions = greedy_bandit_decisions(x, weak, strong, order, margins=(-0.5, 0.1))
    assert decisions[:, 0].all()  # a negative margin: strong from the first prompt
    assert not decisions[:, 1].any()  # locked onto the weak model


@settings(max_examples=100, deadline=None)
@given(
    ctx=st.lists(st.floats(0.0, 1.0), min_size=linucb.DIM, max_size=linucb.DIM),
    lo=st.floats(0.0, 1.0),
    hi=st.floats(0.0, 1.0),
    alpha=st.floats(0.0, 2.0),
)
def test_cold_arms_rank_by_the_warm_start(
    ctx: list[float], lo: float, hi: float, alpha: float
) -> None:
    """Before any outcome the strongest candidate's score minus the weakest's grows with the
    learned score, is zero where the score is zero, and stays within the prior slopes'
    range: the warm start ranks, nothing else does, and no score runs away."""
    axis = linucb.FEATURE_NAMES.index("learned_score")
    fresh = LinUCBArm.fresh()
    strong, weak = linucb.arm_prior(1.0), linucb.arm_prior(-1.0)

    def gap(score: float) -> float:
        x = np.array(ctx)
        x[0], x[axis] = 1.0, score
        return fresh.ucb(x, alpha, strong) - fresh.ucb(x, alpha, weak)

    lo, hi = min(lo, hi), max(lo, hi)
    assert gap(0.0) == pytest.approx(0.0, abs=1e-12)
    assert gap(lo) <= gap(hi) + 1e-12
    assert 0.0 <= gap(hi) <= 2 * linucb.PRIOR_SLOPE + 1e-12
