"""The stateful session-tier flow: take a lane's lease, serve, record, release.

    body, turn = tiers.extract(body)                  # 400 on bad metadata
    prepared = await tiers.prepare(principal, turn, req.messages, candidates, admit)
    ... dispatch over prepared.candidates, before any output byte only ...
    await tiers.finalize(prepared, TurnOutcome(...))  # always, also on failure

`prepare` holds the lane's lease for the whole request; a concurrent request
for the lane gets 409 session_tier_busy. The lease is short (`lease_seconds`)
and renewed in the background while the turn runs (lanes/renew.py), so if the
process dies in between, the lease lapses within one lease lifetime and the
next request takes the lane over; the binding itself keeps the lane TTL. Every
store error becomes 503 session_tier_storage_unavailable: storage failure is
never a synthetic reply.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tiergate.core.model import Message
from tiergate.lanes.decide import (
    AcquirePlan,
    RequestFacts,
    RouteCandidate,
    TurnOutcome,
    check_tool_limits,
    plan_acquire,
    plan_finalize,
    plan_renew,
    request_facts,
)
from tiergate.lanes.errors import (
    STORAGE_UNAVAILABLE,
    CapacityExhausted,
    SessionTierError,
    StorageUnavailable,
    busy,
    capacity_exhausted,
    storage_unavailable,
)
from tiergate.lanes.hashing import revision_hash, scope_hash
from tiergate.lanes.lease import Lease
from tiergate.lanes.metadata import Kind, TierTurn, extract_session_tier, strip_session_tier
from tiergate.lanes.outage import OutageLog
from tiergate.lanes.pending import PendingCompletions
from tiergate.lanes.record import LaneRecord
from tiergate.lanes.renew import LeaseRenewals
from tiergate.lanes.settings import SessionTierSettings
from tiergate.lanes.store_base import LaneStore

log = logging.getLogger(__name__)

#: Compare-and-swap attempts before giving up; a lost race almost always means
#: another request took the lease, which the re-read turns into 409.
SWAP_ATTEMPTS = 8

Admit = Callable[[RouteCandidate], bool]


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    """What the pipeline needs to serve an opted-in turn.

    Dispatch only over `candidates`, in order, and fall back only before any
    output reached the client. Automatic continuation, refusal fallback and
    output-contract repair are off for this turn (`output_rewrites_allowed`).
    """

    lease: Lease
    kind: Kind
    lane: str
    approved_model: str
    approved_tier: int
    candidates: tuple[RouteCandidate, ...]
    new_binding: bool
    approval_changed: bool
    approval_deferred: bool
    output_rewrites_allowed: bool = False


def _mapped(err: Exception) -> Exception:
    if isinstance(err, CapacityExhausted):
        return capacity_exhausted()
    return storage_unavailable()


async def acquire(
    store: LaneStore | None,
    *,
    scope: str,
    turn: TierTurn,
    revision: str,
    messages: Sequence[Message],
    candidates: Sequence[RouteCandidate],
    ttl: float,
    now: float,
    admit: Admit | None = None,
    outage: OutageLog | None = None,
    pending: PendingCompletions | None = None,
    lease_seconds: float | None = None,
    owner: str | None = None,
) -> PreparedTurn:
    """Take the lane's lease and decide the turn's approval and candidate order.

    Raises SessionTierError: 400 tool limit, 409 busy, 503 storage unavailable,
    capacity exhausted or approved route unavailable. `revision` is already hashed.
    The lease lasts `lease_seconds` (default: `ttl`); `owner` names its holder.

    A swap whose reply was lost may still have been applied. The next read then
    finds this request's own lease and takes it (not a 409 against itself); if the
    store fails instead, every lease this call may have written is released in
    the background (`pending`) so it cannot hold the lane until the TTL.
    """
    check_tool_limits(messages)
    if store is None:
        raise storage_unavailable()
    facts = request_facts(messages, scope)
    lease = ttl if lease_seconds is None else min(lease_seconds, ttl)
    tried: dict[str, AcquirePlan] = {}
    for _ in range(SWAP_ATTEMPTS):
        try:
            current = await store.load(scope, now)
            mine = tried.get(current.record.lease_id or "") if current is not None else None
            if mine is not None:
                return _prepared(mine, scope, turn, facts, now + lease)
            plan = plan_acquire(
                current.record if current else None,
                scope=scope,
                turn=turn,
                revision=revision,
                facts=facts,
                candidates=candidates,
                admit=admit,
                now=now,
                ttl=ttl,
                lease_id=uuid.uuid4().hex,
                lease_seconds=lease,
                owner=owner,
            )
            assert plan.record.lease_id is not None
            tried[plan.record.lease_id] = plan
            swapped = await store.swap(scope, current.etag if current else None, plan.record, now)
        except StorageUnavailable as err:
            if outage is not None:
                outage.failed("acquire", err)
            if pending is not None:
                for lease_id in tried:
                    _release_later(store, pending, scope, lease_id, now + lease, ttl)
            raise storage_unavailable() from None
        except CapacityExhausted:
            raise capacity_exhausted() from None
        if outage is not None:
            outage.succeeded()
        if swapped:
            return _prepared(plan, scope, turn, facts, now + lease)
    raise busy()


def _prepared(
    plan: AcquirePlan, scope: str, turn: TierTurn, facts: RequestFacts, expires_at: float
) -> PreparedTurn:
    assert plan.record.lease_id is not None
    return PreparedTurn(
        lease=Lease(
            scope=scope,
            lease_id=plan.record.lease_id,
            expires_at=expires_at,
            resolved=plan.resolved,
            user_turns=facts.user_turns,
            turn_mark=facts.turn_mark,
        ),
        kind=turn.kind,
        lane=turn.lane,
        approved_model=plan.approval.model,
        approved_tier=plan.approval.tier,
        candidates=plan.candidates,
        new_binding=plan.new_binding,
        approval_changed=plan.approval_changed,
        approval_deferred=plan.approval_deferred,
    )


def _release_later(
    store: LaneStore,
    pending: PendingCompletions,
    scope: str,
    lease_id: str,
    expires_at: float,
    ttl: float,
) -> None:
    """Release a lease this request may hold without knowing it (a lost reply)."""
    lease = Lease(scope, lease_id, expires_at, frozenset(), 0)
    outcome = TurnOutcome(success=False, tool_call_ids=())
    pending.add(lambda: finalize(store, lease, outcome, ttl=ttl, now=pending.clock()), expires_at)


async def _swap_own_lease(
    store: LaneStore | None,
    lease: Lease,
    op: str,
    plan: Callable[[LaneRecord | None], tuple[bool, LaneRecord | None]],
    now: float,
    outage: OutageLog | None,
) -> bool:
    """Compare-and-swap the lane's record to what `plan(current)` says while the
    lease is this request's: (held, record), record None deleting the lane. Not
    held: False, nothing written. A store error raises 503
    session_tier_storage_unavailable."""
    if store is None:
        raise storage_unavailable()
    for _ in range(SWAP_ATTEMPTS):
        try:
            current = await store.load(lease.scope, now)
            held, record = plan(current.record if current else None)
            if not held:
                return False
            assert current is not None
            swapped = await store.swap(lease.scope, current.etag, record, now)
        except (StorageUnavailable, CapacityExhausted) as err:
            if outage is not None:
                outage.failed(op, err)
            raise _mapped(err) from None
        if outage is not None:
            outage.succeeded()
        if swapped:
            return True
    return False


async def finalize(
    store: LaneStore | None,
    lease: Lease,
    outcome: TurnOutcome,
    *,
    ttl: float,
    now: float,
    outage: OutageLog | None = None,
) -> bool:
    """Record the turn and release its lease. False: the lease was already gone
    (expired or replaced), so this late completion changed nothing."""

    def plan(current: LaneRecord | None) -> tuple[bool, LaneRecord | None]:
        done = plan_finalize(
            current,
            lease_id=lease.lease_id,
            resolved=lease.resolved,
            user_turns=lease.user_turns,
            turn_mark=lease.turn_mark,
            outcome=outcome,
            now=now,
            ttl=ttl,
        )
        if not done.applied:
            log.info("session tier late completion ignored: lease no longer held")
        return done.applied, done.record

    return await _swap_own_lease(store, lease, "finalize", plan, now, outage)


async def renew(
    store: LaneStore | None,
    lease: Lease,
    *,
    lease_seconds: float,
    now: float,
    outage: OutageLog | None = None,
) -> bool:
    """Extend a lease its request still holds. False: the request no longer holds
    it (released by an operator, lapsed and taken over, or already finalized), so
    renewing stops. A store error raises 503 session_tier_storage_unavailable."""

    def plan(current: LaneRecord | None) -> tuple[bool, LaneRecord | None]:
        record = plan_renew(current, lease_id=lease.lease_id, now=now, lease_seconds=lease_seconds)
        return record is not None, record

    return await _swap_own_lease(store, lease, "renew", plan, now, outage)


async def release_on_failure(
    store: LaneStore | None, lease: Lease, *, ttl: float, now: float, tools_unknown: bool = False
) -> bool:
    """Release after a failed, cancelled or ambiguous turn: no boundary opens.

    Pass `tools_unknown=True` when tool calls may have reached the client.
    """
    outcome = TurnOutcome(success=False, tool_call_ids=None if tools_unknown else ())
    return await finalize(store, lease, outcome, ttl=ttl, now=now)


class SessionTiers:
    """The feature as the pipeline sees it: settings, store, revision and clock."""

    def __init__(
        self,
        settings: SessionTierSettings,
        store: LaneStore | None,
        revision: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self._revision = revision_hash(revision)
        self.outage = OutageLog()
        self.pending = PendingCompletions(clock=clock)
        self.instance = instance_id()
        self.renewals = LeaseRenewals(self._renew, settings.lease, clock)

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def set_revision(self, revision: str) -> None:
        """A new reviewed policy: every lane bound under the old one is invalidated."""
        self._revision = revision_hash(revision)

    def extract(
        self, body: dict[str, Any], model: str | None = None, *, pinned: bool = False
    ) -> tuple[dict[str, Any], TierTurn | None]:
        """Take tier metadata out of the body. When the feature is off it is removed
        all the same, unvalidated (a provider rejects `session_tier` as an unknown
        parameter, and it carries the raw session id), and ignored."""
        if not self.enabled:
            return strip_session_tier(body), None
        return extract_session_tier(body, model, pinned=pinned)

    def scope(self, principal: str, turn: TierTurn) -> str:
        return scope_hash(turn.kind, principal, turn.session, turn.lane)

    async def prepare(
        self,
        principal: str,
        turn: TierTurn,
        messages: Sequence[Message],
        candidates: Sequence[RouteCandidate],
        admit: Admit | None = None,
        revision: str | None = None,
        request_id: str | None = None,
    ) -> PreparedTurn:
        """`revision`: this lane's own policy revision (lanes/revision.py); without
        it, the one set for every lane (`set_revision`). The lease is renewed in the
        background until `finalize`; `request_id` names it as its owner's."""
        now = self.clock()
        prepared = await acquire(
            self.store,
            scope=self.scope(principal, turn),
            turn=turn,
            revision=self._revision if revision is None else revision_hash(revision),
            messages=messages,
            candidates=candidates,
            ttl=self.settings.ttl_seconds,
            now=now,
            admit=admit,
            outage=self.outage,
            pending=self.pending,
            lease_seconds=self.settings.lease,
            owner=f"{self.instance}/{request_id or '-'}",
        )
        # never renewed past the lane TTL from here: the ceiling a lease had before
        # renewal, should a turn never be finalized
        self.renewals.start(prepared.lease, until=now + self.settings.ttl_seconds)
        return prepared

    async def _renew(self, lease: Lease) -> bool:
        return await renew(
            self.store,
            lease,
            lease_seconds=self.settings.lease,
            now=self.clock(),
            outage=self.outage,
        )

    async def finalize(self, prepared: PreparedTurn, outcome: TurnOutcome) -> bool:
        """Record the turn; when the store is unreachable, raise 503 and keep the
        completion for a background retry (lanes/pending.py), so the lease is
        released as soon as the store answers again."""
        ttl = self.settings.ttl_seconds
        self.renewals.stop(prepared.lease)

        async def attempt() -> bool:
            return await finalize(
                self.store, prepared.lease, outcome, ttl=ttl, now=self.clock(), outage=self.outage
            )

        try:
            return await attempt()
        except SessionTierError as err:
            if err.code == STORAGE_UNAVAILABLE and self.store is not None:
                # renewed until a moment ago, so the lease may live one more lifetime
                self.pending.add(attempt, self.clock() + self.settings.lease)
            raise

    async def close(self) -> None:
        """Shutdown: stop renewing, and a last try at the pending completions."""
        await self.renewals.close()
        await self.pending.close()


def instance_id() -> str:
    """This gateway process, as lease owners name it: host, pid and a random tag
    (a pid is reused after a restart; the tag tells the two processes apart)."""
    host = socket.gethostname()[:64] or "host"
    return f"{host}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
