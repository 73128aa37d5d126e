"""Reading one request's escalation snapshot: the state-store side of the
resolver in routing/escalation.py, which stays pure.

`plan_snapshot_read` names the keys (so the planner can fetch them together with
the affinity pins in one round trip), `SnapshotRead.decode` turns the values into
an `EscalationSnapshot`, and `read_escalation_snapshot` does both with one
`get_many`. `explain_escalation` is the read-only diagnostic built on it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tiergate.config import RouterConfig
from tiergate.routing.admission import admission_from_values, admission_keys
from tiergate.routing.caps import counters_from_values, router_share_keys, workspace_share_keys
from tiergate.routing.escalation import (
    EscalationDecision,
    EscalationInputs,
    EscalationSnapshot,
    escalation_applies,
    percentile_on,
    resolve_escalation,
)
from tiergate.routing.percentile import histogram_from_values, histogram_keys
from tiergate.routing.tier_state import TierState, tier_state_key
from tiergate.state.base import StateStore, StateUnavailable

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SnapshotRead:
    """The keys one request's escalation snapshot needs, and how to decode them.

    Split from the read itself so the planner can fetch these keys together with
    the affinity pins in a single round trip.
    """

    tier_keys: tuple[str, ...]
    router_keys: tuple[str, ...]
    workspace_keys: tuple[str, ...]
    score_keys: tuple[str, ...]
    #: routing.admission keys (admit mode), router then workspace; and the window.
    admission_keys: tuple[str, ...] = ()
    workspace_admission_keys: tuple[str, ...] = ()
    window_days: int = 0

    def keys(self) -> list[str]:
        return [
            *self.tier_keys,
            *self.router_keys,
            *self.workspace_keys,
            *self.score_keys,
            *self.admission_keys,
            *self.workspace_admission_keys,
        ]

    def decode(self, values: Sequence[bytes | None]) -> EscalationSnapshot:
        i = len(self.tier_keys)
        raw = values[0] if self.tier_keys else None
        state = TierState.from_bytes(raw) if self.tier_keys else None
        router_share = counters_from_values(values[i : i + len(self.router_keys)])
        i += len(self.router_keys)
        ws = self.workspace_keys
        ws_share = counters_from_values(values[i : i + len(ws)]) if ws else None
        i += len(ws)
        end = i + len(self.score_keys)
        scores = histogram_from_values(values[i:end]) if self.score_keys else None
        if not self.admission_keys:
            return EscalationSnapshot(state, router_share, ws_share, scores, state_raw=raw)
        n, days = len(self.admission_keys), self.window_days
        adm = admission_from_values(values[end : end + n], days)
        wadm = None
        if self.workspace_admission_keys:
            wadm = admission_from_values(values[end + n :], days)
        return EscalationSnapshot(state, router_share, ws_share, scores, False, raw, adm, wadm)


def plan_snapshot_read(
    router: RouterConfig, scope: str | None, workspace: str | None, now: float
) -> SnapshotRead:
    """Keys for tier state, share buckets, the percentile histogram and (admit
    mode) the admission counters."""
    esc = router.escalation
    admit = esc.share_cap_mode == "admit"
    return SnapshotRead(
        tier_keys=(tier_state_key(scope, router.name),) if scope is not None else (),
        router_keys=tuple(router_share_keys(router.name, now, esc.share_window_days)),
        workspace_keys=(
            tuple(workspace_share_keys(workspace, now, esc.share_window_days)) if workspace else ()
        ),
        score_keys=tuple(histogram_keys(router.name, now)) if percentile_on(esc) else (),
        admission_keys=admission_keys(router.name, now, esc.share_window_days) if admit else (),
        workspace_admission_keys=(
            admission_keys(workspace, now, esc.share_window_days, workspace=True)
            if admit and workspace
            else ()
        ),
        window_days=esc.share_window_days,
    )


async def read_escalation_snapshot(
    store: StateStore,
    router: RouterConfig,
    scope: str | None,
    workspace: str | None,
    now: float,
) -> EscalationSnapshot:
    """One `get_many` for tier state, share buckets and percentile histogram."""
    if not escalation_applies(router):
        return EscalationSnapshot()
    read = plan_snapshot_read(router, scope, workspace, now)
    try:
        values = await store.get_many(read.keys())
    except StateUnavailable:
        logger.warning("escalation state unavailable for router %s; serving base", router.name)
        return EscalationSnapshot(degraded=True)
    return read.decode(values)


async def explain_escalation(store: StateStore, inp: EscalationInputs) -> EscalationDecision:
    """What the engine would decide for this request, changing no state.

    The read-only diagnostic: one snapshot read and the pure resolver.
    """
    snap = await read_escalation_snapshot(store, inp.router, inp.scope, inp.workspace, inp.now)
    return resolve_escalation(inp, snap)
