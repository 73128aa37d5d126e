"""Pure session-tier decisions: boundaries, candidate order, lease transitions.

No I/O and no clock here: every function takes the current lane record (or
None), content-free facts about the request and `now`, and returns the record
to write. The stateful flow (flow.py) loads, calls these, and compare-and-swaps.

A different approved model or tier takes effect only at a safe user-turn
boundary: the previous turn completed successfully, every tool call still
outstanding has a matching result, no unrelated result trails the last
assistant message, the tool state is known, and the request ends with a new
user message. Anything else keeps the bound approval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tiergate.core.model import Message
from tiergate.lanes.errors import busy, route_unavailable, tool_limit
from tiergate.lanes.hashing import tool_id_hash, turn_hash
from tiergate.lanes.metadata import Kind, TierTurn
from tiergate.lanes.record import LaneRecord

MAX_OUTSTANDING_TOOLS = 128
MAX_TOOL_ID_CHARS = 200

_UNRELATED = "-"  # stands for a trailing tool result without an id


@dataclass(frozen=True, slots=True)
class RouteCandidate:
    """One already-eligible route the pipeline could dispatch to.

    `route_id` is opaque to this package (the pipeline's channel/model id);
    `native_model` is the upstream model name; `quality_tier` the reviewed
    tier from the catalogue; `provider` the name approved models are prefixed with.
    """

    route_id: str
    native_model: str
    quality_tier: int
    provider: str


@dataclass(frozen=True, slots=True)
class Approval:
    model: str
    tier: int


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How the turn ended, as the pipeline classified it.

    `tool_call_ids` are the ids the client received (None = unknown: an
    incomplete or oversized observation). `credential_failure` is a confirmed
    credential failure of the served route; it invalidates this lane only.
    """

    success: bool
    actual_route: str | None = None
    tool_call_ids: tuple[str, ...] | None = ()
    credential_failure: bool = False


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What the boundary rule needs from a request, with tool ids already hashed."""

    ends_with_user: bool
    user_turns: int
    result_ids: frozenset[str]  # every tool result in the transcript
    trailing_result_ids: tuple[str, ...]  # tool results after the last assistant message
    turn_mark: str | None = None  # turn_hash of the last user turn (None: no user message)


@dataclass(frozen=True, slots=True)
class AcquirePlan:
    record: LaneRecord  # to write, holding the new lease
    approval: Approval  # in force for this turn
    candidates: tuple[RouteCandidate, ...]
    new_binding: bool
    approval_changed: bool  # a different approval took effect at this boundary
    approval_deferred: bool  # a different approval waits for a safe boundary
    resolved: frozenset[str]  # outstanding tool hashes this request answers


# ---- request facts ---------------------------------------------------------------


def check_tool_limits(messages: Sequence[Message]) -> None:
    """400 session_tier_tool_limit beyond 200-char ids or 128 calls/results in a turn."""
    last = _last_assistant(messages)
    for m in messages:
        ids = [tc.id for tc in m.tool_calls]
        if m.tool_call_id is not None:
            ids.append(m.tool_call_id)
        if any(len(i) > MAX_TOOL_ID_CHARS for i in ids):
            raise tool_limit(f"A tool-call id is longer than {MAX_TOOL_ID_CHARS} characters")
    calls = {tc.id for tc in messages[last].tool_calls} if last >= 0 else set()
    results = {m.tool_call_id for m in messages[last + 1 :] if m.role == "tool"}
    if len(calls) > MAX_OUTSTANDING_TOOLS or len(results) > MAX_OUTSTANDING_TOOLS:
        raise tool_limit(f"A turn may carry at most {MAX_OUTSTANDING_TOOLS} tool calls")


def request_facts(messages: Sequence[Message], scope: str) -> RequestFacts:
    last = _last_assistant(messages)
    return RequestFacts(
        ends_with_user=_ends_with_user(messages),
        turn_mark=_turn_mark(messages, scope),
        user_turns=sum(1 for m in messages if m.role == "user"),
        result_ids=frozenset(
            tool_id_hash(scope, m.tool_call_id)
            for m in messages
            if m.role == "tool" and m.tool_call_id
        ),
        trailing_result_ids=tuple(
            tool_id_hash(scope, m.tool_call_id) if m.tool_call_id else _UNRELATED
            for m in messages[last + 1 :]
            if m.role == "tool"
        ),
    )


def _ends_with_user(messages: Sequence[Message]) -> bool:
    """The last message is the user's, past any system message injected after it."""
    for m in reversed(messages):
        if m.role != "system":
            return m.role == "user"
    return False


def _turn_mark(messages: Sequence[Message], scope: str) -> str | None:
    """The last user message, with the assistant reply it follows, as a one-way
    mark. A compacted transcript keeps its newest turns, so the mark still tells a
    new user turn from the one completed last, where a count of user messages
    cannot (compaction lowers it). Reads only the last few messages."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            before = next((m.text() for m in reversed(messages[:i]) if m.role == "assistant"), "")
            return turn_hash(scope, messages[i].text(), before)
    return None


def _last_assistant(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            return i
    return -1


# ---- the boundary rule ------------------------------------------------------------


def is_safe_boundary(binding: LaneRecord | None, messages: Sequence[Message]) -> bool:
    """May a different approval take effect on this request? (True for no binding.)"""
    if binding is None:
        return True
    return boundary_open(binding, request_facts(messages, binding.scope))


def boundary_open(binding: LaneRecord, facts: RequestFacts) -> bool:
    if not binding.last_turn_ok or binding.tools_unknown:
        return False  # failed, cancelled, ambiguous or unobservable previous turn
    if not facts.ends_with_user:
        return False  # a continuation
    if binding.completed_turn is not None:
        if facts.turn_mark == binding.completed_turn:
            return False  # the completed user turn again (a retry or continuation)
    elif facts.user_turns <= binding.completed_user_turns:
        return False  # a record from before turn marks: the count decides
    outstanding = set(binding.outstanding)
    if not outstanding <= facts.result_ids:
        return False  # partial results leave calls unresolved
    return all(h in outstanding for h in facts.trailing_result_ids)  # no unrelated result


# ---- candidates -------------------------------------------------------------------


def split_approved_model(name: str) -> tuple[str | None, str]:
    """`provider:native` (or `provider/native`) -> (provider, native); else (None, name)."""
    for sep in (":", "/"):
        provider, found, native = name.partition(sep)
        if found and provider and native:
            return provider, native
    return None, name


def order_candidates(
    approval: Approval,
    candidates: Sequence[RouteCandidate],
    *,
    kind: Kind,
    actual_route: str | None = None,
    admit: Callable[[RouteCandidate], bool] | None = None,
) -> list[RouteCandidate]:
    """The allowed candidates in the lane's preference order; 503 when none remains.

    Managed candidates must carry the approved native model and its reviewed
    quality tier; public (roleplay) ones only an identical native model name,
    because roleplay has no reviewed tier catalogue. The input is already
    eligible (billing, entitlement, capability, context); `admit` adds the
    credential/cooldown check, and both always beat stickiness. Order: the
    recorded actual route, then the approved provider, then input order.
    """
    provider, native = split_approved_model(approval.model)
    natives = {native, approval.model}
    allowed = [
        c
        for c in candidates
        if c.native_model in natives
        and (kind == "public" or c.quality_tier == approval.tier)
        and (admit is None or admit(c))
    ]
    if not allowed:
        raise route_unavailable()

    def rank(c: RouteCandidate) -> int:
        if actual_route is not None and c.route_id == actual_route:
            return 0
        return 1 if provider is not None and c.provider == provider else 2

    return sorted(allowed, key=rank)


# ---- lease transitions ------------------------------------------------------------


def plan_acquire(
    current: LaneRecord | None,
    *,
    scope: str,
    turn: TierTurn,
    revision: str,
    facts: RequestFacts,
    candidates: Sequence[RouteCandidate],
    admit: Callable[[RouteCandidate], bool] | None,
    now: float,
    ttl: float,
    lease_id: str,
    lease_seconds: float | None = None,
    owner: str | None = None,
) -> AcquirePlan:
    """Take the lane's lease for this turn, or raise 409 busy / 503 route unavailable.

    An expired record or one from another policy revision is no binding at all
    (the lane is invalidated), but a lease in force holds whatever the revision:
    the request holding it is still running. Nothing is written when this raises.

    The lease lives `lease_seconds` (default: the TTL) and its holder renews it;
    the lane itself lives `ttl`. A lapsed lease (taken, never released, no longer
    renewed: its holder died mid-turn) is taken over, and the dead turn counts as
    an ambiguous one whose tool calls may have reached the client: no boundary
    opens after it, and its tool state is unknown (as for a stream cut short).
    """
    base = current if current is not None and current.live(now) else None
    if base is not None and base.leased(now):
        raise busy()
    if base is not None and base.revision != revision:
        base = None
    if base is not None and base.lapsed(now):
        base = interrupted(base)
    requested = Approval(turn.approved_model, turn.approved_tier)
    changed = deferred = False
    if base is None:
        record = LaneRecord(
            scope=scope,
            lane=turn.lane,
            approved_model=requested.model,
            approved_tier=requested.tier,
            actual_route=None,
            revision=revision,
            expires_at=now + ttl,
        )
    else:
        record = base
        bound = Approval(base.approved_model, base.approved_tier)
        if requested != bound:
            if boundary_open(base, facts):
                changed = True  # the approved route changes; the old fallback goes with it
                record = base.evolve(
                    approved_model=requested.model,
                    approved_tier=requested.tier,
                    actual_route=None,
                    outstanding=(),
                )
            else:
                deferred = True
    approval = Approval(record.approved_model, record.approved_tier)
    ordered = order_candidates(
        approval, candidates, kind=turn.kind, actual_route=record.actual_route, admit=admit
    )
    outstanding = set(record.outstanding)
    lease = ttl if lease_seconds is None else min(lease_seconds, ttl)
    return AcquirePlan(
        record=record.evolve(
            expires_at=now + ttl,
            lease_id=lease_id,
            lease_expires_at=now + lease,
            lease_owner=owner,
        ),
        approval=approval,
        candidates=tuple(ordered),
        new_binding=base is None,
        approval_changed=changed,
        approval_deferred=deferred,
        resolved=frozenset(h for h in facts.result_ids if h in outstanding),
    )


def interrupted(record: LaneRecord) -> LaneRecord:
    """The lane after its in-flight turn was cut off without a completion (the
    holder died, or an operator released the lease): the binding stays, the lease
    goes, and the turn is ambiguous. Tool calls may have reached the client, so
    the tool state is unknown; no boundary opens until expiry or a new revision."""
    return record.evolve(
        lease_id=None,
        lease_expires_at=None,
        lease_owner=None,
        last_turn_ok=False,
        tools_unknown=True,
        outstanding=(),
    )


def plan_renew(
    current: LaneRecord | None, *, lease_id: str, now: float, lease_seconds: float
) -> LaneRecord | None:
    """The record with this request's lease extended, or None when the request no
    longer holds it (released by an operator, lapsed, taken over, or finalized):
    then the renewal stops and nothing is written. The lane lives at least as
    long as the lease on it."""
    if current is None or current.lease_id != lease_id or not current.leased(now):
        return None
    until = now + lease_seconds
    return current.evolve(lease_expires_at=until, expires_at=max(current.expires_at, until))


@dataclass(frozen=True, slots=True)
class FinalizePlan:
    applied: bool  # False: a late completion whose lease is gone; nothing is written
    record: LaneRecord | None  # to write; None with applied=True deletes the lane


def plan_finalize(
    current: LaneRecord | None,
    *,
    lease_id: str,
    resolved: frozenset[str],
    user_turns: int,
    outcome: TurnOutcome,
    now: float,
    ttl: float,
    turn_mark: str | None = None,
) -> FinalizePlan:
    """Record the turn's outcome and release the lease it holds.

    A completion whose lease expired or was replaced changes nothing, so a late
    finisher can never overwrite a newer lease. Finalization never authorizes
    another attempt; it only records what happened.
    """
    if current is None or current.lease_id != lease_id or not current.leased(now):
        return FinalizePlan(applied=False, record=None)
    if outcome.credential_failure:
        return FinalizePlan(applied=True, record=None)
    ids = outcome.tool_call_ids
    unknown = current.tools_unknown or ids is None or not _ids_within_limits(ids)
    new = (
        {tool_id_hash(current.scope, i) for i in ids} if ids is not None and not unknown else set()
    )
    if outcome.success:
        outstanding = (set(current.outstanding) - resolved) | new
        changes: dict[str, object] = {
            "generation": current.generation + 1,
            "completed_user_turns": user_turns,
            "completed_turn": turn_mark,
            "last_turn_ok": True,
            "actual_route": outcome.actual_route or current.actual_route,
        }
    else:  # failed, cancelled or ambiguous: nothing is resolved, no boundary opens
        outstanding = set(current.outstanding) | new
        changes = {"last_turn_ok": False}
    if len(outstanding) > MAX_OUTSTANDING_TOOLS:
        unknown = True
    record = current.evolve(
        **changes,
        tools_unknown=unknown,
        outstanding=() if unknown else tuple(sorted(outstanding)),
        lease_id=None,
        lease_expires_at=None,
        lease_owner=None,
        expires_at=now + ttl,
    )
    return FinalizePlan(applied=True, record=record)


def _ids_within_limits(ids: Sequence[str]) -> bool:
    return len(ids) <= MAX_OUTSTANDING_TOOLS and all(0 < len(i) <= MAX_TOOL_ID_CHARS for i in ids)
