"""Strategies: ranking, pools, capability filters, tier narrowing and pin order."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from test_difficulty_samples import request, user
from tiergate.config import EscalationConfig, ModelConfig, Price, RouterConfig, Thresholds
from tiergate.core.model import ChatRequest, ImagePart, Message, TextPart
from tiergate.routing import linucb
from tiergate.routing.strategies import (
    Candidate,
    StrategyContext,
    apply_pin,
    balanced_utility,
    build_candidates,
    capable,
    gated_band,
    pool_for_band,
    rank,
    resolve_pool,
    select,
    tier_candidates,
)
from tiergate.routing.tiers import resolve_tier_pools

MODELS: dict[str, ModelConfig] = {
    "openai/nano": ModelConfig(quality=0.40, price=Price(input=0.05, output=0.40)),
    "openai/mini": ModelConfig(quality=0.62, price=Price(input=0.25, output=2.0)),
    "anthropic/haiku": ModelConfig(quality=0.70, price=Price(input=1.0, output=5.0)),
    "anthropic/sonnet": ModelConfig(quality=0.90, price=Price(input=3.0, output=15.0)),
}
NAMES = list(MODELS)


def cands(names: list[str] | None = None) -> list[Candidate]:
    return [Candidate(n, MODELS[n]) for n in (names or NAMES)]


def router(**kw: Any) -> RouterConfig:
    base: dict[str, Any] = {
        "name": "coding",
        "weak_pool": ["openai/nano"],
        "mid_pool": ["openai/mini", "anthropic/haiku"],
        "strong_pool": ["anthropic/sonnet"],
    }
    base.update(kw)
    return RouterConfig(**base)


def ctx(r: RouterConfig, req: ChatRequest | None = None, **kw: Any) -> StrategyContext:
    return StrategyContext(request=req or request([user("hi")]), router=r, **kw)


# ---- candidates -------------------------------------------------------------------------


def test_candidate_prices() -> None:
    c = Candidate("x", ModelConfig(price=Price(input=2.0, output=8.0)))
    assert c.blended_price == pytest.approx(0.75 * 2.0 + 0.25 * 8.0)
    assert c.cached_input_price == pytest.approx(0.2)  # defaults to 0.1x input
    assert c.estimated_cost(1_000_000, 0, cached_tokens=500_000) == pytest.approx(1.0 + 0.1)
    explicit = Candidate("y", ModelConfig(price=Price(input=2.0, cached_input=0.5)))
    assert explicit.cached_input_price == 0.5


def test_capable_checks_tools_vision_json_and_context() -> None:
    plain = request([user("hi")], tools=[])
    with_image = request([Message("user", [TextPart("see"), ImagePart(url="http://x/y.png")])])
    json_req = request([user("hi")], tools=[])
    json_req.response_format = {"type": "json_object"}
    m = ModelConfig(context_window=1000)
    assert capable(m, plain, 900)
    assert not capable(m, plain, 1001)
    plain.max_tokens = 200
    assert not capable(m, plain, 900)  # prompt + max_tokens must fit
    assert not capable(ModelConfig(supports_tools=False), request([user("x")]), 10)
    assert not capable(ModelConfig(supports_vision=False), with_image, 10)
    assert not capable(ModelConfig(supports_json=False), json_req, 10)
    assert capable(ModelConfig(supports_json=False), plain, 10)


def test_build_candidates_filters_by_allowed_globs_and_capability() -> None:
    models = dict(MODELS)
    models["anthropic/tiny"] = ModelConfig(context_window=100)
    got = build_candidates(router(allowed_models=["anthropic/*"]), models, request([]), 500)
    assert [c.name for c in got] == ["anthropic/haiku", "anthropic/sonnet"]


# ---- simple strategies ------------------------------------------------------------------


def test_cheapest_and_quality() -> None:
    r = router()
    assert rank("cheapest", cands(), ctx(r)) == NAMES
    assert rank("quality", cands(), ctx(r)) == NAMES[::-1]


def test_rank_drops_duplicates_and_rejects_unknown_strategies() -> None:
    assert rank("cheapest", cands(["openai/mini", "openai/mini"]), ctx(router())) == ["openai/mini"]
    with pytest.raises(ValueError, match="unknown strategy"):
        rank("fastest", cands(), ctx(router()))


def test_balanced_extremes_are_quality_and_cheapest() -> None:
    assert rank("balanced", cands(), ctx(router(balanced_quality_weight=1.0))) == NAMES[::-1]
    assert rank("balanced", cands(), ctx(router(balanced_quality_weight=0.0))) == NAMES


def test_balanced_formula() -> None:
    utility = balanced_utility(cands(), 0.7)
    q_max, p_max = 0.90, 0.75 * 3.0 + 0.25 * 15.0
    mini = Candidate("openai/mini", MODELS["openai/mini"])
    expected = 0.7 * math.log(0.62 / q_max) - 0.3 * math.log(mini.blended_price / p_max)
    assert utility["openai/mini"] == pytest.approx(expected)
    order = rank("balanced", cands(), ctx(router()))
    assert order == sorted(NAMES, key=lambda n: -utility[n])


def test_balanced_half_price_needs_about_three_quarters_of_the_quality() -> None:
    def pair(q_cheap: float) -> list[Candidate]:
        return [
            Candidate("dear", ModelConfig(quality=1.0, price=Price(input=2.0, output=2.0))),
            Candidate("cheap", ModelConfig(quality=q_cheap, price=Price(input=1.0, output=1.0))),
        ]

    r = router(balanced_quality_weight=0.7)
    assert rank("balanced", pair(0.76), ctx(r))[0] == "cheap"
    assert rank("balanced", pair(0.72), ctx(r))[0] == "dear"


def test_balanced_survives_free_and_zero_quality_models() -> None:
    free = [
        Candidate("free", ModelConfig(quality=0.0, price=Price())),
        Candidate("paid", ModelConfig(quality=0.5, price=Price(input=1.0))),
    ]
    utility = balanced_utility(free, 0.7)
    assert all(math.isfinite(u) for u in utility.values())
    all_free = [Candidate(n, ModelConfig(quality=q)) for n, q in (("a", 0.3), ("b", 0.6))]
    assert rank("balanced", all_free, ctx(router())) == ["b", "a"]


# ---- pools and gated_adaptive -------------------------------------------------------------


@pytest.mark.parametrize(
    ("score", "band"),
    [
        (0.0, "weak"),
        (0.349, "weak"),
        (0.35, "mid"),
        (0.699, "mid"),
        (0.70, "strong"),
        (1, "strong"),
    ],
)
def test_gated_band_boundaries(score: float, band: str) -> None:
    assert gated_band(score, Thresholds(t1=0.35, t2=0.70)) == band


def test_pool_refs_resolve_globs_named_pools_and_band_names_in_ref_order() -> None:
    r = router(pools={"cheap": ["openai/*"], "both": ["@pool:strong", "@pool:cheap"]})
    assert pool_for_band(r, "mid") == ["openai/mini", "anthropic/haiku"]
    assert resolve_pool(["@pool:both"], r, NAMES) == [
        "openai/nano",
        "openai/mini",
        "anthropic/sonnet",
    ]
    assert resolve_pool(["anthropic/sonnet", "openai/*"], r, NAMES) == [
        "anthropic/sonnet",
        "openai/nano",
        "openai/mini",
    ]
    assert resolve_pool(["@pool:missing", "openai/mini"], r, NAMES) == ["openai/mini"]
    cyclic = router(pools={"a": ["@pool:b"], "b": ["@pool:a"]})
    assert resolve_pool(["@pool:a"], cyclic, NAMES) == []


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        (0.1, ["openai/nano", "openai/mini", "anthropic/haiku", "anthropic/sonnet"]),
        (0.5, ["openai/mini", "anthropic/haiku", "anthropic/sonnet", "openai/nano"]),
        (0.8, ["anthropic/sonnet", "openai/mini", "anthropic/haiku", "openai/nano"]),
    ],
)
def test_gated_adaptive_serves_the_band_pool_then_the_nearest_bands(
    score: float, expected: list[str]
) -> None:
    r = router(strategy="gated_adaptive")
    assert rank("gated_adaptive", cands(), ctx(r, score=score)) == expected


def test_gated_adaptive_without_the_strong_pool_falls_to_mid() -> None:
    r = router(strategy="gated_adaptive")
    base = cands(["openai/nano", "openai/mini", "anthropic/haiku"])
    assert rank("gated_adaptive", base, ctx(r, score=0.9))[0] == "openai/mini"


def test_gated_adaptive_puts_models_outside_every_pool_last() -> None:
    r = router(strategy="gated_adaptive", weak_pool=["openai/mini"], mid_pool=[], strong_pool=[])
    assert rank("gated_adaptive", cands(), ctx(r, score=0.0))[0] == "openai/mini"


def test_gated_adaptive_scores_the_request_when_no_score_is_given() -> None:
    r = router(strategy="gated_adaptive")
    assert rank("gated_adaptive", cands(), ctx(r))[0] in ("openai/nano", "openai/mini")


# ---- linucb ---------------------------------------------------------------------------------


def test_linucb_ranks_by_upper_confidence_bound() -> None:
    r = router(strategy="linucb", linucb_alpha=0.1)
    c = ctx(r)
    x = linucb.context_vector_for(c.request)
    arms = {n: linucb.LinUCBArm.fresh() for n in NAMES}
    reward = {"anthropic/haiku": 1.0, "openai/nano": 0.0}
    for _ in range(linucb.MIN_PULLS):  # past forced exploration
        for n in NAMES:
            arms[n] = linucb.update(arms[n], x, reward.get(n, 0.5))
    c.bandit_arms = arms
    c.bandit_x = x
    order = rank("linucb", cands(), c)
    assert order[0] == "anthropic/haiku" and order[-1] == "openai/nano"


def test_linucb_with_no_history_follows_its_priors() -> None:
    """Untried arms tie on the optimistic intercept; the warm-start slope on the
    learned score then puts the strongest model first on a high-scoring request."""
    r = router(strategy="linucb")
    x = np.zeros(linucb.DIM)
    x[0] = 1.0
    assert rank("linucb", cands(), ctx(r, bandit_x=x)) == rank("balanced", cands(), ctx(r))
    x[linucb.FEATURE_NAMES.index("learned_score")] = 1.0
    assert rank("linucb", cands(), ctx(r, bandit_x=x))[0] == "anthropic/sonnet"


def test_linucb_tries_every_arm_before_trusting_its_estimates() -> None:
    r = router(strategy="linucb")
    x = linucb.context_vector_for(request([user("hi")]))
    arms = {n: linucb.LinUCBArm.fresh() for n in NAMES}
    for _ in range(linucb.MIN_PULLS):
        arms["anthropic/sonnet"] = linucb.update(arms["anthropic/sonnet"], x, 1.0)
    order = rank("linucb", cands(), ctx(r, bandit_arms=arms, bandit_x=x))
    assert order[-1] == "anthropic/sonnet"  # the only arm past MIN_PULLS goes last


# ---- dsl ------------------------------------------------------------------------------------


def test_dsl_first_matching_rule_with_a_usable_target_wins() -> None:
    rules = [
        {"when": {"request.has_tools": True}, "use": "openai/gone"},
        {"when": {"request.has_tools": True}, "use": "@pool:mid"},
        {"use": "anthropic/sonnet"},
    ]
    r = router(strategy="dsl", rules=rules, default_model="openai/nano")
    order = rank("dsl", cands(), ctx(r))
    assert order[:3] == ["openai/mini", "anthropic/haiku", "openai/nano"]
    assert sorted(order) == sorted(NAMES)


def test_dsl_without_a_match_uses_the_default_model_first() -> None:
    r = router(strategy="dsl", rules=[{"when": {"request.stream": True}, "use": "openai/mini"}])
    assert rank("dsl", cands(), ctx(r))[0] == rank("balanced", cands(), ctx(r))[0]
    r = router(strategy="dsl", rules=r.rules, default_model="anthropic/haiku")
    assert rank("dsl", cands(), ctx(r))[0] == "anthropic/haiku"


# ---- tiers and pins (report §4: tier first, then the pin inside it) -------------------------


def test_tier_candidates_split_base_and_strong() -> None:
    r = router(strategy="balanced")
    assert [c.name for c in tier_candidates(cands(), r, "strong")] == ["anthropic/sonnet"]
    assert "anthropic/sonnet" not in [c.name for c in tier_candidates(cands(), r, "base")]
    esc = router(escalation=EscalationConfig(mode="auto", pool=["anthropic/*"]))
    assert [c.name for c in tier_candidates(cands(), esc, "base")] == ["openai/nano", "openai/mini"]


def test_apply_pin_only_moves_a_pin_that_is_a_candidate() -> None:
    assert apply_pin(["a", "b", "c"], "c") == ["c", "a", "b"]
    assert apply_pin(["a", "b"], "z") == ["a", "b"]
    assert apply_pin(["a", "b"], None) == ["a", "b"]


def test_select_narrows_to_the_tier_before_reading_the_pin() -> None:
    r = router(strategy="cheapest")
    # A base-tier pin cannot drag an escalated session back to the cheap model ...
    assert select(cands(), ctx(r), tier="strong", pinned="openai/nano") == ["anthropic/sonnet"]
    # ... and inside the base tier the pin wins over the strategy's first choice.
    base = select(cands(), ctx(r), tier="base", pinned="anthropic/haiku")
    assert base == ["anthropic/haiku", "openai/nano", "openai/mini"]


def test_select_without_escalation_still_confines_the_pin_to_the_candidates() -> None:
    r = router(strategy="cheapest")
    capable_only = cands(["openai/mini", "anthropic/haiku"])
    assert select(capable_only, ctx(r), pinned="openai/nano") == ["openai/mini", "anthropic/haiku"]
    assert select(capable_only, ctx(r), pinned="anthropic/haiku")[0] == "anthropic/haiku"


def test_select_ignores_pins_for_dsl_and_for_routers_that_are_not_session_aware() -> None:
    dsl_router = router(strategy="dsl", rules=[{"use": "openai/mini"}])
    assert select(cands(), ctx(dsl_router), pinned="anthropic/sonnet")[0] == "openai/mini"
    stateless = router(strategy="cheapest", session_aware=False)
    assert select(cands(), ctx(stateless), pinned="anthropic/sonnet")[0] == "openai/nano"


def test_select_accepts_tier_pools_resolved_at_load() -> None:
    r = router(strategy="gated_adaptive")
    pools = resolve_tier_pools(r, NAMES)  # the strong pool is reserved for the strong tier
    hard = ctx(r, score=0.9)
    assert "anthropic/sonnet" not in select(cands(), hard, tier="base", pools=pools)
    assert select(cands(), hard, tier="strong", pools=pools)[0] == "anthropic/sonnet"
    assert select(cands(), hard, tier="base", pools=pools, pinned="openai/nano")[0] == (
        "openai/nano"
    )
