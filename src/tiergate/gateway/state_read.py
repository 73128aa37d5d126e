"""A request's state read: which keys, in one round trip, and what they mean.

Everything a router request needs from the state store (the escalation
snapshot: tier state, share buckets, score histogram; the affinity pins: both
tiers' model pins and every candidate's channel pin) is read with ONE get_many.

On a shared store (Redis) that read can leave before the request body is
parsed: `Prefetch` sends it as soon as the router, the session and the
workspace are known, for every model the router may use, so the round trip
runs while the gateway parses and scores the request. The plan then takes the
values of the keys it needs from it; if its keys are not all there (the live
model set or the day changed in between), it reads again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from tiergate.config import RouterConfig
from tiergate.routing import affinity, escalation
from tiergate.routing.affinity import PinRead, Pins
from tiergate.routing.escalation import EscalationSnapshot, SnapshotRead
from tiergate.state import StateStore


@dataclass(frozen=True, slots=True)
class StateRead:
    """One request's state, as decoded from the read."""

    snap: EscalationSnapshot
    pins: Pins | None  # None: no session, or affinity disabled
    strong_model_pin: str | None

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

    def keys(self) -> list[str]:
        keys = [*(self.snap.keys() if self.snap else []), *(self.pins.keys() if self.pins else [])]
        if self.strong_key is not None:
            keys.append(self.strong_key)
        return keys

    def decode(self, values: Sequence[bytes | None]) -> StateRead:
        n = len(self.snap.keys()) if self.snap else 0
        m = len(self.pins.keys()) if self.pins else 0
        snap = self.snap.decode(values[:n]) if self.snap else EscalationSnapshot()
        pins = self.pins.decode(values[n : n + m]) if self.pins else None
        strong = values[n + m] if self.strong_key is not None else None
        return StateRead(snap, pins, strong.decode("utf-8", "replace") if strong else None)


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
        escalation.plan_snapshot_read(router, scope, workspace_id, now) if escalation_on else None
    )
    pins = None
    strong_key = None
    if scope is not None and affinity_on:
        pins = affinity.plan_pin_read(scope, pin_router, models, affinity.BASE_TIER)
        if escalation_on and pin_router is not None:
            strong_key = affinity.model_pin_key(scope, pin_router, affinity.STRONG_TIER)
    return ReadPlan(snap, pins, strong_key)


class Prefetch:
    """A get_many already on its way; `values_for` answers a plan's read from it."""

    __slots__ = ("_keys", "_task")

    def __init__(self, store: StateStore, keys: list[str]) -> None:
        self._keys = keys
        self._task = asyncio.ensure_future(store.get_many(keys))
        # retrieved here so an unused prefetch (the request failed first) never
        # logs "exception was never retrieved"; a used one re-raises in values_for
        self._task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def values_for(self, keys: Sequence[str]) -> list[bytes | None] | None:
        """The values of `keys`, or None when some were not prefetched.

        Raises what the read raised (StateUnavailable: the caller degrades)."""
        values = dict(zip(self._keys, await self._task, strict=True))
        if not all(k in values for k in keys):
            return None
        return [values[k] for k in keys]

    def cancel(self) -> None:
        self._task.cancel()
