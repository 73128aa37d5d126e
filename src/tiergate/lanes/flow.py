"""The stateful session-tier flow: take a lane's lease, serve, record, release.

    body, turn = tiers.extract(body)                  # 400 on bad metadata
    prepared = await tiers.prepare(principal, turn, req.messages, candidates, admit)
    ... dispatch over prepared.candidates, before any output byte only ...
    await tiers.finalize(prepared, TurnOutcome(...))  # always, also on failure

`prepare` holds the lane's lease for the whole request; a concurrent request
for the lane gets 409 session_tier_busy. If the process dies in between, the
lease simply expires with the lane TTL. Every store error becomes 503
session_tier_storage_unavailable: storage failure is never a synthetic reply.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tiergate.core.model import Message
from tiergate.lanes.decide import (
    RouteCandidate,
    TurnOutcome,
    check_tool_limits,
    plan_acquire,
    plan_finalize,
    request_facts,
)
from tiergate.lanes.errors import (
    CapacityExhausted,
    StorageUnavailable,
    busy,
    capacity_exhausted,
    storage_unavailable,
)
from tiergate.lanes.hashing import revision_hash, scope_hash
from tiergate.lanes.metadata import Kind, TierTurn, extract_session_tier
from tiergate.lanes.settings import SessionTierSettings
from tiergate.lanes.store_base import LaneStore

log = logging.getLogger(__name__)

#: Compare-and-swap attempts before giving up; a lost race almost always means
#: another request took the lease, which the re-read turns into 409.
SWAP_ATTEMPTS = 8

Admit = Callable[[RouteCandidate], bool]


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof of holding a lane for one request, kept in memory by its holder."""

    scope: str
    lease_id: str
    expires_at: float
    resolved: frozenset[str]  # outstanding tool hashes this request answers
    user_turns: int


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
) -> PreparedTurn:
    """Take the lane's lease and decide the turn's approval and candidate order.

    Raises SessionTierError: 400 tool limit, 409 busy, 503 storage unavailable,
    capacity exhausted or approved route unavailable. `revision` is already hashed.
    """
    check_tool_limits(messages)
    if store is None:
        raise storage_unavailable()
    facts = request_facts(messages, scope)
    for _ in range(SWAP_ATTEMPTS):
        try:
            current = await store.load(scope, now)
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
            )
            swapped = await store.swap(scope, current.etag if current else None, plan.record, now)
        except (StorageUnavailable, CapacityExhausted) as err:
            log.warning("session tier lease not taken: %s", type(err).__name__)
            raise _mapped(err) from None
        if swapped:
            assert plan.record.lease_id is not None
            return PreparedTurn(
                lease=Lease(
                    scope=scope,
                    lease_id=plan.record.lease_id,
                    expires_at=now + ttl,
                    resolved=plan.resolved,
                    user_turns=facts.user_turns,
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
    raise busy()


async def finalize(
    store: LaneStore | None, lease: Lease, outcome: TurnOutcome, *, ttl: float, now: float
) -> bool:
    """Record the turn and release its lease. False: the lease was already gone
    (expired or replaced), so this late completion changed nothing."""
    if store is None:
        raise storage_unavailable()
    for _ in range(SWAP_ATTEMPTS):
        try:
            current = await store.load(lease.scope, now)
            plan = plan_finalize(
                current.record if current else None,
                lease_id=lease.lease_id,
                resolved=lease.resolved,
                user_turns=lease.user_turns,
                outcome=outcome,
                now=now,
                ttl=ttl,
            )
            if not plan.applied:
                log.info("session tier late completion ignored: lease no longer held")
                return False
            assert current is not None
            if await store.swap(lease.scope, current.etag, plan.record, now):
                return True
        except (StorageUnavailable, CapacityExhausted) as err:
            log.warning("session tier completion not recorded: %s", type(err).__name__)
            raise _mapped(err) from None
    return False


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

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def set_revision(self, revision: str) -> None:
        """A new reviewed policy: every lane bound under the old one is invalidated."""
        self._revision = revision_hash(revision)

    def extract(
        self, body: dict[str, Any], model: str | None = None, *, pinned: bool = False
    ) -> tuple[dict[str, Any], TierTurn | None]:
        """Take tier metadata out of the body; when disabled return the body untouched."""
        if not self.enabled:
            return body, None
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
    ) -> PreparedTurn:
        return await acquire(
            self.store,
            scope=self.scope(principal, turn),
            turn=turn,
            revision=self._revision,
            messages=messages,
            candidates=candidates,
            ttl=self.settings.ttl_seconds,
            now=self.clock(),
            admit=admit,
        )

    async def finalize(self, prepared: PreparedTurn, outcome: TurnOutcome) -> bool:
        return await finalize(
            self.store, prepared.lease, outcome, ttl=self.settings.ttl_seconds, now=self.clock()
        )
