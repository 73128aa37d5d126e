"""Tier pools: strong = escalation pool, base = allowed minus strong, and load checks."""

from __future__ import annotations

from typing import Any

import pytest

from tiergate.config import EscalationConfig, RouterConfig
from tiergate.routing.tiers import (
    PoolReferenceError,
    TierPools,
    resolve_tier_pools,
    tier_config_problems,
)

EXPOSED = [
    "openai/gpt-5-mini",
    "openai/gpt-5",
    "anthropic/claude-haiku-5",
    "anthropic/claude-sonnet-5",
    "deepseek/deepseek-chat",
]


def router(mode: str = "auto", pool: list[str] | None = None, **kw: Any) -> RouterConfig:
    return RouterConfig(
        name="coding",
        escalation=EscalationConfig(mode=mode, pool=pool or []),  # type: ignore[arg-type]
        **kw,
    )


def test_strong_defaults_to_strong_pool_and_base_is_the_rest() -> None:
    r = router(strong_pool=["anthropic/claude-sonnet-5"])
    assert resolve_tier_pools(r, EXPOSED) == TierPools(
        base=(
            "openai/gpt-5-mini",
            "openai/gpt-5",
            "anthropic/claude-haiku-5",
            "deepseek/deepseek-chat",
        ),
        strong=("anthropic/claude-sonnet-5",),
    )


def test_escalation_pool_overrides_strong_pool_with_globs() -> None:
    r = router(
        pool=["openai/gpt-5", "anthropic/claude-sonnet-*"],
        allowed_models=["openai/*", "anthropic/*"],
        strong_pool=["deepseek/deepseek-chat"],
    )
    pools = resolve_tier_pools(r, EXPOSED)
    assert pools.strong == ("openai/gpt-5", "anthropic/claude-sonnet-5")
    assert pools.base == ("openai/gpt-5-mini", "anthropic/claude-haiku-5")
    assert pools.pool("strong") == pools.strong and pools.pool("base") == pools.base


def test_a_model_in_both_tiers_is_strong() -> None:
    r = router(pool=["openai/gpt-5"], allowed_models=["openai/gpt-5", "openai/gpt-5-mini"])
    pools = resolve_tier_pools(r, EXPOSED)
    assert "openai/gpt-5" in pools.strong and "openai/gpt-5" not in pools.base


def test_pool_references_expand_named_and_builtin_pools() -> None:
    r = router(
        pool=["@pool:frontier"],
        pools={"frontier": ["@pool:strong", "openai/gpt-5"]},
        strong_pool=["anthropic/claude-sonnet-5"],
    )
    assert resolve_tier_pools(r, EXPOSED).strong == ("openai/gpt-5", "anthropic/claude-sonnet-5")


def test_gated_adaptive_with_empty_pool_reserves_the_strong_pool_for_the_strong_tier() -> None:
    """Report §4: "The base tier is AllowedModels \\ strong-tier pool; a model in
    both belongs to the strong tier." No strategy is exempt."""
    r = router(
        strategy="gated_adaptive",
        allowed_models=["openai/*", "anthropic/*"],
        weak_pool=["openai/gpt-5-mini"],
        strong_pool=["anthropic/claude-sonnet-5"],
    )
    pools = resolve_tier_pools(r, EXPOSED)
    assert pools.strong == ("anthropic/claude-sonnet-5",)
    assert "anthropic/claude-sonnet-5" not in pools.base


def test_gated_adaptive_with_an_explicit_pool_splits_normally() -> None:
    r = router(
        strategy="gated_adaptive",
        pool=["anthropic/claude-sonnet-5"],
        strong_pool=["anthropic/claude-sonnet-5"],
    )
    assert "anthropic/claude-sonnet-5" not in resolve_tier_pools(r, EXPOSED).base


def test_unknown_and_cyclic_pool_references_raise() -> None:
    with pytest.raises(PoolReferenceError):
        resolve_tier_pools(router(pool=["@pool:nope"]), EXPOSED)
    cyclic = router(pool=["@pool:a"], pools={"a": ["@pool:b"], "b": ["@pool:a"]})
    with pytest.raises(PoolReferenceError):
        resolve_tier_pools(cyclic, EXPOSED)


def test_problems_when_neither_tier_resolves() -> None:
    r = router(allowed_models=["nothing/*"], pool=["nothing/*"])
    problems = tier_config_problems(r, EXPOSED, "routers.0")
    assert problems == [
        "routers.0.escalation: neither the base nor the strong tier resolves to any model"
    ]


def test_problems_for_an_empty_strong_or_base_tier() -> None:
    no_strong = tier_config_problems(router(), EXPOSED)
    assert len(no_strong) == 1 and "strong tier is empty" in no_strong[0]
    no_base = tier_config_problems(router(pool=["*"]), EXPOSED)
    assert len(no_base) == 1 and "base tier is empty" in no_base[0]
    cyclic = router(pool=["@pool:a"], pools={"a": ["@pool:a"]})
    assert "nest too deeply" in tier_config_problems(cyclic, EXPOSED)[0]


def test_no_problems_for_a_sound_router_or_when_escalation_is_unused() -> None:
    assert tier_config_problems(router(strong_pool=["anthropic/*"]), EXPOSED) == []
    assert tier_config_problems(router(mode="off"), EXPOSED) == []
    assert tier_config_problems(router(strategy="dsl", rules=[{"x": 1}]), EXPOSED) == []
