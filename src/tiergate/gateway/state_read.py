"""A request's state read: which keys, in one round trip, and what they mean.

Everything a router request needs from the state store (the escalation
snapshot: tier state, share buckets, score histogram; the affinity pins: both
tiers' model pins and every candidate's channel pin) is read with ONE get_many.

(Tried and dropped: sending this read before the body is parsed, for every
model the router allows, so the round trip overlaps parsing. Side by side on
Redis it bought nothing measurable at c=1 on this machine and cost an extra
task per request; docs/performance.md.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tiergate.config import RouterConfig
from tiergate.routing import affinity, bands, escalation_read
from tiergate.routing.affinity import PinRead, Pins
from tiergate.routing.escalation import EscalationSnapshot
from tiergate.routing.escalation_read import SnapshotRead
from tiergate.routing.percentile import ScoreHistogram, histogram_from_values


@dataclass(frozen=True, slots=True)
class StateRead:
    """One request's state, as decoded from the read."""

    snap: EscalationSnapshot
    pins: Pins | None  # None: no session, or affinity disabled
    strong_model_pin: str | None
    band_scores: ScoreHistogram | None = None  # gated_adaptive percentile edges

    def pins_for(self, tier: str) -> Pins:
        """The pins of the tier being served: the strong tier has its own model pin."""
        assert self.pins is not None
        if tier != affinity.STRONG_TIER:
            return self.pins
        return Pins(self.strong_model_pin, self.pins.channels, self.pins.degraded)


EMPTY = StateRead(EscalationSnapshot(), None, None)
DEGRADED = StateRead(EscalationSnapshot(degraded=True), Pins(degraded=True), None)


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """The keys of one request's read and how to decode their values."""

    snap: SnapshotRead | None
    pins: PinRead | None
    strong_key: str | None
    band_keys: tuple[str, ...] = ()

    def keys(self) -> list[str]:
        keys = [*(self.snap.keys() if self.snap else []), *(self.pins.keys() if self.pins else [])]
        if self.strong_key is not None:
            keys.append(self.strong_key)
        keys.extend(self.band_keys)
        return keys

    def decode(self, values: Sequence[bytes | None]) -> StateRead:
        n = len(self.snap.keys()) if self.snap else 0
        m = len(self.pins.keys()) if self.pins else 0
        snap = self.snap.decode(values[:n]) if self.snap else EscalationSnapshot()
        pins = self.pins.decode(values[n : n + m]) if self.pins else None
        k = n + m + (self.strong_key is not None)
        strong = values[n + m] if self.strong_key is not None else None
        band = histogram_from_values(values[k:]) if self.band_keys else None
        return StateRead(snap, pins, strong.decode("utf-8", "replace") if strong else None, band)


def plan_read(
    router: RouterConfig,
    scope: str | None,
    workspace_id: str,
    models: Sequence[str],
    *,
    now: float,
    escalation_on: bool,
    pin_router: str | None,
    affinity_on: bool,
) -> ReadPlan:
    """The read for a router request whose candidates are `models`."""
    snap = (
        escalation_read.plan_snapshot_read(router, scope, workspace_id, now)
        if escalation_on
        else None
    )
    pins = None
    strong_key = None
    if scope is not None and affinity_on:
        pins = affinity.plan_pin_read(scope, pin_router, models, affinity.BASE_TIER)
        if escalation_on and pin_router is not None:
            strong_key = affinity.model_pin_key(scope, pin_router, affinity.STRONG_TIER)
    band_keys = (
        tuple(bands.band_histogram_keys(router, now)) if bands.uses_percentile_bands(router) else ()
    )
    return ReadPlan(snap, pins, strong_key, band_keys)
