"""The percentile gate's histogram: bins, quantiles, warm-up and the trailing window."""

from __future__ import annotations

import pytest

from tiergate.routing.percentile import (
    BUCKETS,
    ScoreHistogram,
    bucket_of,
    histogram_from_values,
    histogram_keys,
    percentile_threshold,
    record_score,
)
from tiergate.state.base import StateStore

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def hist(scores: list[float]) -> ScoreHistogram:
    counts = [0.0] * BUCKETS
    for s in scores:
        counts[bucket_of(s)] += 1
    return ScoreHistogram(tuple(counts))


def test_bins_clamp_to_the_unit_interval() -> None:
    assert [bucket_of(s) for s in (-0.5, 0.0, 0.009, 0.01, 0.999, 1.0, 7.0)] == [
        0,
        0,
        0,
        1,
        99,
        99,
        99,
    ]


def test_quantile_of_a_uniform_distribution() -> None:
    uniform = hist([i / 1000 for i in range(1000)])
    for p in (50, 90, 95):
        value = percentile_threshold(uniform, p, warmup=100)
        assert value == pytest.approx(p / 100, abs=0.011)


def test_bimodal_traffic_puts_the_gate_where_the_operator_asks() -> None:
    """Easy turns near 0.23, 5 % hard turns near 0.72 (the report's two modes)."""
    traffic = hist([0.23 + (i % 7) / 1000 for i in range(950)] + [0.72] * 50)
    p90 = percentile_threshold(traffic, 90, warmup=100)
    p99 = percentile_threshold(traffic, 99, warmup=100)
    assert p90 is not None and 0.23 <= p90 < 0.25  # top 10 % includes every hard turn
    assert p99 is not None and 0.72 <= p99 < 0.73  # top 1 %: inside the hard mode


def test_warmup_withholds_the_gate() -> None:
    few = hist([0.5] * 199)
    assert percentile_threshold(few, 95, warmup=200) is None
    assert percentile_threshold(hist([0.5] * 200), 95, warmup=200) is not None
    assert percentile_threshold(ScoreHistogram((0.0,) * BUCKETS), 95, warmup=1) is None


async def test_recorded_scores_round_trip_through_the_store(any_store: StateStore) -> None:
    await record_score(any_store, "coding", 0.72, T0 - 3600)  # yesterday
    for _ in range(3):
        await record_score(any_store, "coding", 0.23, T0 + 60)
    window = histogram_from_values(await any_store.get_many(histogram_keys("coding", T0 + 120)))
    assert window.total == 4
    assert window.counts[bucket_of(0.72)] == 1 and window.counts[bucket_of(0.23)] == 3
    # Two days on, yesterday's scores left the window.
    later = histogram_from_values(
        await any_store.get_many(histogram_keys("coding", T0 + 86400 + 60))
    )
    assert later.total == 3
