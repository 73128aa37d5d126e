"""Frontier escalation, the deferred half: apply a decision's intents (report §4.2).

`resolve_escalation` (routing/escalation.py) decides and writes nothing; after a
successful, billed upstream reply `commit_escalation` applies the decision's
intents onto the state read at decision time, guarded, in one round trip, and
falls back to a transaction on a fresh read when another request got there
first. Split from the resolver so each file holds one concern.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tiergate.routing.admission import admission_incrs
from tiergate.routing.caps import share_incrs
from tiergate.routing.escalation import AuditEvent, EscalationDecision
from tiergate.routing.percentile import score_incr
from tiergate.routing.tier_state import (
    ApplyReport,
    CountTraffic,
    Tier,
    TierState,
    TurnOutcome,
    apply_intents,
)
from tiergate.state.base import Incr, StateStore, StateUnavailable, Write

logger = logging.getLogger(__name__)

#: Optimistic-commit attempts: a session rarely has more concurrent requests.
COMMIT_RETRIES = 64

#: Audit kinds that exist only if their intent is applied at commit.
_EVENT_INTENT: dict[str, str] = {
    "escalated": "escalate",
    "de_escalated": "deescalate",
    "reset": "reset",
}


@dataclass(frozen=True, slots=True)
class CommitResult:
    committed: bool
    tier: Tier | None = None
    applied: tuple[str, ...] = ()
    merged: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    duplicate_turn: bool = False
    #: Audit events to persist: denials and shadows, and transitions that applied.
    events: tuple[AuditEvent, ...] = ()
    error: str | None = None


def _final_events(decision: EscalationDecision, report: ApplyReport) -> tuple[AuditEvent, ...]:
    kinds = {i.kind for i in decision.intents}
    out = []
    for ev in decision.events:
        needs = _EVENT_INTENT.get(ev.kind)
        if ev.kind == "shadow" and "mark_shadow" in kinds:
            needs = "mark_shadow"
        if needs is None or needs in report.applied:
            out.append(ev)
    return tuple(out)


async def commit_escalation(
    store: StateStore,
    decision: EscalationDecision,
    outcome: TurnOutcome,
    now: float,
    extra_writes: Sequence[Write] = (),
) -> CommitResult:
    """Apply a decision's intents after the upstream response.

    Anything but a billed success commits nothing: failed requests advance
    neither strike decay nor the clean-turn counter and count no traffic.

    The common case is ONE round trip: the new tier state is computed from the
    state read at decision time and written by `apply_batch` guarded on that
    value, together with the share counters and `extra_writes` (the caller's
    affinity pins). If another request changed the state meanwhile, the guard
    fails and the intents are re-applied onto a fresh read in a transaction.
    """
    esc = decision.config
    if esc is None or not decision.intents or not (outcome.success and outcome.billed):
        return CommitResult(committed=False)
    traffic = next((i for i in decision.intents if isinstance(i, CountTraffic)), None)

    def counters(report: ApplyReport) -> list[Incr]:
        if traffic is None:
            return []
        if report.duplicate_turn:  # a reservation made or released still counts
            return _admission(report, new_session=False)
        incrs = share_incrs(
            decision.router_name,
            decision.workspace,
            now,
            esc.share_window_days,
            strong=outcome.served_tier == "strong",
            cost=outcome.cost_usd,
        )
        if traffic.score is not None:
            incrs.append(score_incr(decision.router_name, traffic.score, now))
        if traffic.forecast is not None:
            incrs += _admission(report, traffic.new_session)
        return incrs

    def _admission(report: ApplyReport, new_session: bool) -> list[Incr]:
        if not (new_session or report.reserve or report.consume):
            return []
        return admission_incrs(
            decision.router_name,
            decision.workspace,
            now,
            esc.share_window_days,
            new_session,
            report.reserve,
            report.consume,
        )

    report = ApplyReport()
    tier: Tier | None = None
    try:
        if decision.state_key is None:  # no session: only the router traffic counts
            await store.apply_batch(list(extra_writes), counters(report))
        else:
            key, ttl = decision.state_key, esc.tier_ttl_seconds
            current = decision.state  # parsed from state_raw at decision time
            if current is None:
                current = TierState.from_bytes(decision.state_raw)
            st, report = apply_intents(current, decision.intents, outcome, esc, now)
            tier = st.tier
            writes = [Write(key, st.to_bytes(), ttl), *extra_writes]
            guard = (key, decision.state_raw)
            if not await store.apply_batch(writes, counters(report), guard=guard):

                def txn(values: list[bytes | None]) -> tuple[list[Write], tuple[Tier, ApplyReport]]:
                    fresh, rep = apply_intents(
                        TierState.from_bytes(values[0]), decision.intents, outcome, esc, now
                    )
                    return [Write(key, fresh.to_bytes(), ttl)], (fresh.tier, rep)

                tier, report = await store.transact([key], txn, retries=COMMIT_RETRIES)
                await store.apply_batch(list(extra_writes), counters(report))
    except StateUnavailable as err:
        logger.warning("escalation commit skipped (router %s): %s", decision.router_name, err)
        return CommitResult(committed=False, error="state_unavailable")
    events = _final_events(decision, report)
    for ev in events:
        logger.info("escalation %s router=%s session=%s", ev.kind, ev.router, ev.session_hash)
    return CommitResult(
        committed=True,
        tier=tier,
        applied=tuple(report.applied),
        merged=tuple(report.merged),
        stale=tuple(report.stale),
        duplicate_turn=report.duplicate_turn,
        events=events,
    )
