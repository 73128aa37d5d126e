"""The replay cost model on hand-computed examples (report §5.2)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.defaults import CATALOGUE
from tiergate.replay.costmodel import (
    PRICE_TABLE,
    CostModel,
    ModelPrice,
    SessionCache,
    cold_input_cost,
    turn_cost,
    warm_input_cost,
)

SONNET = PRICE_TABLE["anthropic/claude-sonnet-4-6"]
MINI = PRICE_TABLE["openai/gpt-5-mini"]
GPT5 = PRICE_TABLE["openai/gpt-5"]


def test_price_table_matches_the_builtin_catalogue() -> None:
    catalogue = {name: m["price"] for models in CATALOGUE.values() for name, m in models.items()}
    for name, m in PRICE_TABLE.items():
        assert (m.input, m.output) == (catalogue[name]["input"], catalogue[name]["output"])


def test_warm_and_cold_turns_by_hand() -> None:
    # Anthropic: reads 0.1x, writes 1.25x. 10,000-token prompt, 8,000 cached.
    assert warm_input_cost(SONNET, 10_000, 8_000) == pytest.approx(3e-6 * (800 + 1.25 * 2_000))
    assert warm_input_cost(SONNET, 10_000, 8_000) == pytest.approx(0.0099)
    assert cold_input_cost(SONNET, 10_000) == pytest.approx(0.0375)
    # OpenAI: reads 0.1x, the uncached rest at the plain input price.
    assert warm_input_cost(MINI, 10_000, 8_000) == pytest.approx(0.25e-6 * 2_800)
    assert cold_input_cost(MINI, 10_000) == pytest.approx(0.0025)
    # The prefix never exceeds the prompt.
    assert warm_input_cost(MINI, 100, 500) == pytest.approx(0.25e-6 * 10)


def test_expected_cost_mixes_warm_and_cold_and_adds_output() -> None:
    c = turn_cost(SONNET, 10_000, 8_000, warmth=1 / 3, output_tokens=500)
    assert c.input_usd == pytest.approx(0.0099 / 3 + 0.0375 * 2 / 3)
    assert c.output_usd == pytest.approx(15e-6 * 500)
    assert c.usd == pytest.approx(c.input_usd + c.output_usd)
    assert c.cached_tokens == pytest.approx(8_000 / 3)


def test_turn_one_is_a_full_write_then_warm_with_affinity() -> None:
    cm, cache = CostModel(), SessionCache()
    first = cm.turn(cache, SONNET, 0.0, 4_000, 0, affinity=True)
    assert first.input_usd == pytest.approx(cold_input_cost(SONNET, 4_000))
    assert first.cached_tokens == 0
    second = cm.turn(cache, SONNET, 60.0, 6_000, 4_000, affinity=True)
    assert second.input_usd == pytest.approx(warm_input_cost(SONNET, 6_000, 4_000))


def test_tier_switch_and_idle_gap_are_cold() -> None:
    cm, cache = CostModel(), SessionCache()
    cm.turn(cache, MINI, 0.0, 4_000, 0, affinity=True)
    switched = cm.turn(cache, SONNET, 30.0, 5_000, 4_000, affinity=True)  # escalation
    assert switched.input_usd == pytest.approx(cold_input_cost(SONNET, 5_000))
    within = cm.turn(cache, SONNET, 30.0 + 300, 6_000, 5_000, affinity=True)
    assert within.cached_tokens == 5_000  # exactly at the 300 s window: still warm
    late = cm.turn(cache, SONNET, 30.0 + 300 + 301, 7_000, 6_000, affinity=True)
    assert late.input_usd == pytest.approx(cold_input_cost(SONNET, 7_000))


def test_switching_back_reads_the_model_s_own_alive_cache() -> None:
    """A strong, base, strong flip (a share-cap denial) re-reads strong's cache, partly."""
    cm, cache = CostModel(), SessionCache()
    cm.turn(cache, SONNET, 0.0, 4_000, 0, affinity=True)
    denied = cm.turn(cache, MINI, 30.0, 5_000, 4_000, affinity=True)
    assert denied.input_usd == pytest.approx(cold_input_cost(MINI, 5_000))
    back = cm.turn(cache, SONNET, 60.0, 6_000, 5_000, affinity=True)
    # Sonnet cached the 4,000-token request: that much is read, the rest written.
    assert back.cached_tokens == 4_000
    assert back.input_usd == pytest.approx(warm_input_cost(SONNET, 6_000, 4_000))


def test_a_rewritten_history_bounds_what_an_older_cache_shares() -> None:
    cm, cache = CostModel(), SessionCache()
    cm.turn(cache, SONNET, 0.0, 4_000, 0, affinity=True)
    cm.turn(cache, MINI, 30.0, 3_000, 1_000, affinity=True)  # history cut to 1,000 shared
    back = cm.turn(cache, SONNET, 60.0, 3_500, 3_000, affinity=True)
    assert back.cached_tokens == 1_000  # min of the steps' shared prefixes
    late = cm.turn(cache, MINI, 30.0 + 301, 4_000, 3_500, affinity=True)
    assert late.cached_tokens == 0  # mini's cache expired: cold


def test_without_affinity_the_previous_key_is_hit_one_time_in_n() -> None:
    cm, cache = CostModel(), SessionCache()
    cm.turn(cache, GPT5, 0.0, 4_000, 0, affinity=False)
    c = cm.turn(cache, GPT5, 10.0, 6_000, 4_000, affinity=False)
    h = 1 / 3
    expected = h * warm_input_cost(GPT5, 6_000, 4_000) + (1 - h) * cold_input_cost(GPT5, 6_000)
    assert c.input_usd == pytest.approx(expected)


def test_herfindahl_warmth_of_weighted_keys() -> None:
    m = ModelPrice("x/y", "openai", 1.0, 1.0, keys=3, key_weights=(2.0, 1.0, 1.0))
    assert m.key_warmth("herfindahl") == pytest.approx(0.5**2 + 0.25**2 + 0.25**2)
    assert m.key_warmth("uniform") == pytest.approx(1 / 3)
    equal = ModelPrice("x/y", "openai", 1.0, 1.0, keys=4, key_weights=(1.0,) * 4)
    assert equal.key_warmth("herfindahl") == pytest.approx(equal.key_warmth("uniform"))


def test_pinned_model_is_stable_and_follows_weights() -> None:
    heavy = ModelPrice("a/heavy", "openai", 1.0, 1.0, weight=3.0)
    light = ModelPrice("b/light", "openai", 1.0, 1.0, weight=1.0)
    cm = CostModel(tiers={"base": (heavy, light), "strong": (heavy,)})
    assert cm.pinned("s-1", "base") == cm.pinned("s-1", "base")
    counts = Counter(cm.pinned(f"s-{i}", "base").name for i in range(4000))
    assert 0.70 < counts["a/heavy"] / 4000 < 0.80


_turns = st.lists(
    st.tuples(
        st.sampled_from([SONNET, MINI]),
        st.integers(0, 4_000),  # tokens appended since the previous turn
        st.floats(0.0, 1.0),  # share of the previous prompt still shared
        st.sampled_from([5.0, 30.0, 200.0, 400.0]),  # idle gap, s
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(_turns)
def test_cached_tokens_never_exceed_what_the_model_last_saw(
    turns: list[tuple[ModelPrice, int, float, float]],
) -> None:
    """The cache a model reads is bounded by its last served prompt and every
    step's shared prefix since, and by this prompt; a single-model session reads
    exactly the turn-to-turn prefix while warm (the one-cache model's rule)."""
    cm, cache = CostModel(), SessionCache()
    now, prompt = 0.0, 0
    last: dict[str, tuple[float, int]] = {}  # model -> (time, min shared since)
    for model, grow, kept, gap in turns:
        now += gap
        prefix = int(prompt * kept)
        prompt = prefix + grow + 1
        for name, (at, shared) in list(last.items()):
            last[name] = (at, min(shared, prefix))
        cost = cm.turn(cache, model, now, prompt, prefix, affinity=True)
        seen = last.get(model.name)
        alive = seen is not None and now - seen[0] <= model.cache_window
        assert cost.cached_tokens == (min(seen[1], prompt) if alive and seen else 0)
        assert cost.input_usd <= cold_input_cost(model, prompt) + 1e-12
        last[model.name] = (now, prompt)
