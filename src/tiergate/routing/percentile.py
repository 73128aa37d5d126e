"""The router's recent delta-score distribution, for the percentile gate.

With `escalation.percentile: P` a turn counts as difficult when its latest-turn
delta score is at or above the P-th percentile of the router's own recent
scores (the top 100-P % of its traffic). That makes the escalation rate the
operator's knob and sidesteps absolute calibration, which the report found
sitting 0.019 below a cliff (§6.2, §7).

The distribution is a fixed histogram of `BUCKETS` equal-width bins over
[0, 1] per UTC day, kept as one `incr` counter per (router, day, bin): counters
commute, so recording never contends. The threshold reads the last
`WINDOW_DAYS` days. Until the window holds `percentile_warmup` scores the gate
does not take effect and the absolute delta threshold applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tiergate.routing.caps import counter_value, day_stamps
from tiergate.state.base import Incr, StateStore

#: Bin width 0.01: finer than any score difference that changes a decision.
BUCKETS = 100
#: Today plus yesterday: "recent" traffic, but never a near-empty window at midnight.
WINDOW_DAYS = 2
_DAY = 86400.0


@dataclass(frozen=True, slots=True)
class ScoreHistogram:
    """Score counts per bin over the window (bin i covers [i/BUCKETS, (i+1)/BUCKETS))."""

    counts: tuple[float, ...]

    @property
    def total(self) -> float:
        return sum(self.counts)


def bucket_of(score: float) -> int:
    return min(BUCKETS - 1, max(0, int(score * BUCKETS)))


ESCALATION_PREFIX = "esc:pct"
"""Key prefix of escalation's delta-score histogram; gated_adaptive's percentile bands
keep their own histogram of the gate score under another prefix (routing.bands)."""


def histogram_keys(
    router: str, now: float, days: int = WINDOW_DAYS, prefix: str = ESCALATION_PREFIX
) -> list[str]:
    """Keys of every bin of every day in the window, day-major."""
    return [f"{prefix}:{router}:{d}:{b}" for d in day_stamps(now, days) for b in range(BUCKETS)]


def histogram_from_values(values: Sequence[bytes | None]) -> ScoreHistogram:
    """Fold values read for `histogram_keys` into one window histogram."""
    counts = [0.0] * BUCKETS
    for i, raw in enumerate(values):
        counts[i % BUCKETS] += counter_value(raw)
    return ScoreHistogram(tuple(counts))


def percentile_threshold(hist: ScoreHistogram, percentile: float, warmup: int) -> float | None:
    """The score at the `percentile`-th percentile, or None while warming up.

    Linear interpolation inside the bin that holds the quantile, as a
    Prometheus histogram quantile does.
    """
    total = hist.total
    if total <= 0 or total < warmup:
        return None
    target = total * percentile / 100.0
    below = 0.0
    for i, count in enumerate(hist.counts):
        if count > 0 and below + count >= target:
            return (i + (target - below) / count) / BUCKETS
        below += count
    return 1.0


def score_incr(router: str, score: float, now: float, prefix: str = ESCALATION_PREFIX) -> Incr:
    """The increment adding one evaluated turn's score to today's histogram."""
    day = day_stamps(now, 1)[0]
    return Incr(f"{prefix}:{router}:{day}:{bucket_of(score)}", 1.0, (WINDOW_DAYS + 1) * _DAY)


async def record_score(store: StateStore, router: str, score: float, now: float) -> None:
    """Add one evaluated turn's delta score to today's histogram."""
    await store.apply_batch([], [score_incr(router, score, now)])
