"""gated_adaptive's bands: which score it reads, and where the band edges sit.

Two scores can drive the bands (`router.gate_score`, or `strategy: learned`):
the lexical difficulty score, or the learned request scorer (routing.learned),
whose values are training-traffic quantiles, so its default edges state shares:
`LEARNED_THRESHOLDS` sends about 20 % of training-like traffic to the strong pool
and 30 % to the mid pool out of the box.

An edge may also be a percentile of the router's own recent gate scores
(`thresholds.t1_percentile` / `t2_percentile`), read from a histogram kept with
routing.percentile, the same machinery as `escalation.percentile`; until the
window holds `percentile_warmup` scores the absolute edge applies.

Pure, except for the key and increment helpers that name the histogram.
"""

from __future__ import annotations

from tiergate.config import RouterConfig, Thresholds
from tiergate.routing.difficulty import HAS_TOOLS, SYSTEM_PROMPT_LOG_LEN
from tiergate.routing.percentile import (
    ScoreHistogram,
    histogram_keys,
    percentile_threshold,
    score_incr,
)
from tiergate.state.base import Incr

HISTOGRAM_PREFIX = "band:pct"
LEARNED_THRESHOLDS = Thresholds(t1=0.5, t2=0.8)
"""Default edges on the learned score: top 20 % strong, next 30 % mid (training quantiles)."""
LEXICAL_SINGLE_MESSAGE_MAX = 1.0 - HAS_TOOLS.weight - SYSTEM_PROMPT_LOG_LEN.weight
"""The most the lexical score can reach without tools or a system prompt (0.75)."""


def banded(router: RouterConfig) -> bool:
    return router.strategy in ("gated_adaptive", "learned")


def uses_learned_score(router: RouterConfig) -> bool:
    return router.strategy == "learned" or (banded(router) and router.gate_score == "learned")


def uses_percentile_bands(router: RouterConfig) -> bool:
    t = router.thresholds
    return banded(router) and (t.t1_percentile is not None or t.t2_percentile is not None)


def static_thresholds(router: RouterConfig) -> Thresholds:
    """The absolute edges: the configured ones, or the learned score's defaults for
    any edge left unset on a learned-score router."""
    t = router.thresholds
    if not uses_learned_score(router):
        return t
    given = t.model_fields_set if "thresholds" in router.model_fields_set else set()
    t1 = t.t1 if "t1" in given else LEARNED_THRESHOLDS.t1
    t2 = t.t2 if "t2" in given else max(LEARNED_THRESHOLDS.t2, t1)
    return t.model_copy(update={"t1": t1, "t2": t2})


def band_thresholds(router: RouterConfig, hist: ScoreHistogram | None) -> Thresholds:
    """The edges in force: percentile edges where configured and warmed up."""
    base = static_thresholds(router)
    t = router.thresholds
    if hist is None or not uses_percentile_bands(router):
        return base
    t1, t2 = base.t1, base.t2
    if t.t1_percentile is not None:
        t1 = percentile_threshold(hist, t.t1_percentile, t.percentile_warmup) or t1
    if t.t2_percentile is not None:
        t2 = percentile_threshold(hist, t.t2_percentile, t.percentile_warmup) or t2
    return base.model_copy(update={"t1": min(t1, t2), "t2": t2})


def band_histogram_keys(router: RouterConfig, now: float) -> list[str]:
    return histogram_keys(router.name, now, prefix=HISTOGRAM_PREFIX)


def band_score_incr(router: RouterConfig, score: float, now: float) -> Incr:
    return score_incr(router.name, score, now, prefix=HISTOGRAM_PREFIX)


def threshold_warnings(router: RouterConfig, where: str) -> list[str]:
    """Edges the router's score cannot reach on plain chat requests (config check)."""
    if not banded(router) or uses_learned_score(router):
        return []  # the learned score spans [0, 1] by construction
    t = static_thresholds(router)
    out = []
    for name, value, pct in (("t1", t.t1, t.t1_percentile), ("t2", t.t2, t.t2_percentile)):
        if pct is None and value > LEXICAL_SINGLE_MESSAGE_MAX:
            out.append(
                f"{where}.thresholds.{name} = {value:g} is above "
                f"{LEXICAL_SINGLE_MESSAGE_MAX:g}, the most the lexical score reaches on a "
                "request without tools or a system prompt: such requests never reach that "
                "band (use gate_score: learned or a percentile edge)"
            )
    return out
