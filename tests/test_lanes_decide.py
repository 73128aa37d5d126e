"""Pure session-tier decisions: boundary, tool limits, candidates, lease transitions."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tiergate.core.model import Message, TextPart, ToolCall
from tiergate.lanes import (
    Approval,
    LaneRecord,
    RouteCandidate,
    SessionTierError,
    TurnOutcome,
    check_tool_limits,
    is_safe_boundary,
    order_candidates,
)
from tiergate.lanes.decide import (
    AcquirePlan,
    FinalizePlan,
    plan_acquire,
    plan_finalize,
    request_facts,
)
from tiergate.lanes.hashing import tool_id_hash
from tiergate.lanes.metadata import TierTurn

SCOPE = "a" * 64
REV = "rev-hash"
NOW = 1_000.0
TTL = 60.0


def user(text: str = "go") -> Message:
    return Message(role="user", content=[TextPart(text)])


def asst(*tool_ids: str, text: str = "") -> Message:
    return Message(
        role="assistant",
        content=[TextPart(text)] if text else [],
        tool_calls=[ToolCall(id=i, name="run", arguments="{}") for i in tool_ids],
    )


def result(tool_id: str | None) -> Message:
    return Message(role="tool", content=[TextPart("ok")], tool_call_id=tool_id)


def binding(
    *outstanding: str,
    ok: bool = True,
    unknown: bool = False,
    user_turns: int = 1,
    model: str = "openai:m1",
    tier: int = 1,
    actual: str | None = None,
) -> LaneRecord:
    return LaneRecord(
        scope=SCOPE,
        lane="main",
        approved_model=model,
        approved_tier=tier,
        actual_route=actual,
        revision=REV,
        expires_at=NOW + TTL,
        generation=1,
        completed_user_turns=user_turns,
        last_turn_ok=ok,
        tools_unknown=unknown,
        outstanding=tuple(sorted(tool_id_hash(SCOPE, i) for i in outstanding)),
    )


# ---- the boundary rule ------------------------------------------------------------


def test_no_binding_is_always_a_boundary() -> None:
    assert is_safe_boundary(None, [user()])


def test_completed_turn_then_new_user_message_is_a_boundary() -> None:
    assert is_safe_boundary(binding(), [user(), asst(text="done"), user("next")])


def test_all_tool_results_then_new_user_message_is_a_boundary() -> None:
    msgs = [user(), asst("c1", "c2"), result("c1"), result("c2"), user("next")]
    assert is_safe_boundary(binding("c1", "c2"), msgs)


@pytest.mark.parametrize(
    ("record", "messages"),
    [
        # previous turn failed / was cancelled / ambiguous
        (binding(ok=False), [user(), asst(text="x"), user("next")]),
        # tool state unknown (incomplete or oversized observation)
        (binding(unknown=True), [user(), asst(text="x"), user("next")]),
        # continuation without a new user turn
        (binding("c1"), [user(), asst("c1"), result("c1")]),
        (binding(), [user(), asst(text="partial")]),
        # the same user turn again (a retry), not a new one
        (binding(user_turns=2), [user(), asst(text="x"), user("same")]),
        # partial tool results
        (binding("c1", "c2"), [user(), asst("c1", "c2"), result("c1"), user("next")]),
        # unrelated tool results only
        (binding("c1"), [user(), asst("c1"), result("zz"), user("next")]),
        # all results plus an unrelated one
        (binding("c1"), [user(), asst("c1"), result("c1"), result("zz"), user("next")]),
        # a result without an id
        (binding("c1"), [user(), asst("c1"), result("c1"), result(None), user("next")]),
        # results after an assistant message that made no outstanding call
        (binding(), [user(), asst(text="x"), result("c9"), user("next")]),
        # the results come after the user message: the request does not end with it
        (binding("c1"), [user(), asst("c1"), user("next"), result("c1")]),
        # empty request
        (binding(), []),
    ],
)
def test_unsafe_boundaries(record: LaneRecord, messages: Sequence[Message]) -> None:
    assert not is_safe_boundary(record, messages)


def test_results_anywhere_in_the_transcript_resolve_calls() -> None:
    # c1 was answered in an earlier continuation; c2 came later; both resolved.
    msgs = [user(), asst("c1"), result("c1"), asst("c2"), result("c2"), user("next")]
    assert is_safe_boundary(binding("c1", "c2", user_turns=1), msgs)


# ---- tool limits ------------------------------------------------------------------


def tool_limit(messages: Sequence[Message]) -> None:
    with pytest.raises(SessionTierError) as info:
        check_tool_limits(messages)
    assert (info.value.status, info.value.code) == (400, "session_tier_tool_limit")


def test_tool_id_length_limit() -> None:
    check_tool_limits([user(), asst("x" * 200), result("x" * 200)])
    tool_limit([user(), asst("x" * 201)])
    tool_limit([user(), asst("c1"), result("y" * 201)])


def test_tool_count_limit() -> None:
    ids = [f"c{i}" for i in range(128)]
    check_tool_limits([user(), asst(*ids), *[result(i) for i in ids], user()])
    tool_limit([user(), asst(*ids, "c128")])
    tool_limit([user(), asst(*ids), *[result(i) for i in [*ids, "c128"]]])


def test_long_histories_are_not_limited() -> None:
    history: list[Message] = [user()]
    for turn in range(3):
        ids = [f"t{turn}-{i}" for i in range(100)]
        history += [asst(*ids), *[result(i) for i in ids]]
    check_tool_limits([*history, user()])


# ---- candidates ---------------------------------------------------------------------

C_OPENAI = RouteCandidate("openai-main/openai/m1", "m1", 1, "openai")
C_AZURE = RouteCandidate("azure/m1", "m1", 1, "azure")
C_AZURE_T2 = RouteCandidate("azure/m1-t2", "m1", 2, "azure")
C_ALIAS = RouteCandidate("other/m1-alias", "m1-alias", 1, "other")
C_OTHER = RouteCandidate("openai-main/openai/m2", "m2", 1, "openai")
ALL = [C_AZURE, C_ALIAS, C_OTHER, C_AZURE_T2, C_OPENAI]


def test_managed_candidates_match_native_model_and_reviewed_tier() -> None:
    got = order_candidates(Approval("openai:m1", 1), ALL, kind="managed")
    assert got == [C_OPENAI, C_AZURE]  # approved provider first; tier 2 and alias excluded


def test_public_candidates_match_identical_native_name_only() -> None:
    got = order_candidates(Approval("openai:m1", 7), ALL, kind="public")
    # the tier is a label for roleplay: any identical native name, never an alias
    assert got == [C_OPENAI, C_AZURE, C_AZURE_T2]


def test_recorded_actual_route_is_preferred() -> None:
    got = order_candidates(
        Approval("openai:m1", 1), ALL, kind="managed", actual_route=C_AZURE.route_id
    )
    assert got == [C_AZURE, C_OPENAI]


def test_admission_beats_stickiness() -> None:
    got = order_candidates(
        Approval("openai:m1", 1),
        ALL,
        kind="managed",
        actual_route=C_AZURE.route_id,
        admit=lambda c: c.provider != "azure",  # cooling down / no usable key
    )
    assert got == [C_OPENAI]


def test_ineligible_approved_route_is_never_added_back() -> None:
    # Billing/capability filtering happened upstream: OPENAI was filtered out.
    got = order_candidates(Approval("openai:m1", 1), [C_AZURE, C_OTHER], kind="managed")
    assert got == [C_AZURE]


def test_no_serving_candidate_is_503() -> None:
    with pytest.raises(SessionTierError) as info:
        order_candidates(Approval("openai:m1", 3), ALL, kind="managed")
    assert info.value.status == 503
    assert info.value.code == "session_tier_route_unavailable"


def test_unprefixed_and_slash_approvals() -> None:
    assert order_candidates(Approval("m1", 1), [C_AZURE], kind="managed") == [C_AZURE]
    slash = Approval("openai/m1", 1)
    assert order_candidates(slash, ALL, kind="managed") == [C_OPENAI, C_AZURE]
    nested = RouteCandidate("hf/meta", "meta-llama/Llama-3", 1, "hf")
    assert order_candidates(Approval("meta-llama/Llama-3", 1), [nested], kind="public")


# ---- lease transitions ----------------------------------------------------------------


def make_turn(model: str = "openai:m1", tier: int = 1) -> TierTurn:
    return TierTurn("managed", "r", "main", model, tier, session="s")


def acquire(
    current: LaneRecord | None,
    messages: Sequence[Message],
    *,
    turn: TierTurn | None = None,
    revision: str = REV,
    now: float = NOW,
) -> AcquirePlan:
    return plan_acquire(
        current,
        scope=SCOPE,
        turn=turn or make_turn(),
        revision=revision,
        facts=request_facts(messages, SCOPE),
        candidates=ALL,
        admit=None,
        now=now,
        ttl=TTL,
        lease_id="L2",
    )


def test_new_binding_takes_the_requested_approval() -> None:
    plan = acquire(None, [user()], turn=make_turn("openai:m1", 2))
    assert plan.new_binding and plan.approval == Approval("openai:m1", 2)
    assert plan.record.lease_id == "L2" and plan.record.lease_expires_at == NOW + TTL
    assert plan.record.expires_at == NOW + TTL
    assert plan.candidates == (C_AZURE_T2,)


def test_change_waits_for_a_safe_boundary() -> None:
    current = binding("c1")
    plan = acquire(current, [user(), asst("c1"), result("c1")], turn=make_turn("openai:m2"))
    assert plan.approval_deferred and not plan.approval_changed
    assert plan.approval == Approval("openai:m1", 1)
    assert plan.candidates[0] == C_OPENAI
    plan = acquire(
        current, [user(), asst("c1"), result("c1"), user("n")], turn=make_turn("openai:m2")
    )
    assert plan.approval_changed and plan.approval == Approval("openai:m2", 1)
    assert plan.record.approved_model == "openai:m2" and plan.record.outstanding == ()


def test_a_tier_change_alone_also_waits() -> None:
    plan = acquire(binding(ok=False), [user(), asst(), user()], turn=make_turn("openai:m1", 2))
    assert plan.approval_deferred and plan.approval == Approval("openai:m1", 1)


def test_boundary_change_drops_the_old_fallback_route() -> None:
    current = binding(actual="azure/m1")
    plan = acquire(current, [user(), asst(text="x"), user()], turn=make_turn("openai:m1", 2))
    assert plan.approval_changed and plan.record.actual_route is None


def test_live_lease_is_busy() -> None:
    leased = binding().evolve(lease_id="L1", lease_expires_at=NOW + 5)
    with pytest.raises(SessionTierError) as info:
        acquire(leased, [user()])
    assert (info.value.status, info.value.code) == (409, "session_tier_busy")


def test_expired_lane_or_new_revision_is_no_binding() -> None:
    leased = binding(model="openai:m2").evolve(lease_id="L1", lease_expires_at=NOW + TTL)
    assert acquire(leased, [user()], now=NOW + TTL).new_binding  # expired with its lease
    plan = acquire(binding(model="openai:m2"), [user()], revision="new-rev")
    assert plan.new_binding and plan.approval == Approval("openai:m1", 1)


def test_a_lease_holds_across_a_revision_change() -> None:
    """ "An in-flight request holds a lease": a new policy revision invalidates the
    binding, not the request still running on it (issue #16)."""
    leased = binding(model="openai:m2").evolve(lease_id="L1", lease_expires_at=NOW + 5)
    with pytest.raises(SessionTierError) as info:
        acquire(leased, [user()], revision="new-rev")
    assert (info.value.status, info.value.code) == (409, "session_tier_busy")
    assert acquire(leased, [user()], revision="new-rev", now=NOW + 6).new_binding


def held(current: LaneRecord, lease: str = "L1") -> LaneRecord:
    return current.evolve(lease_id=lease, lease_expires_at=NOW + TTL)


def finish(
    current: LaneRecord | None,
    outcome: TurnOutcome,
    *,
    resolved: frozenset[str] = frozenset(),
    now: float = NOW + 1,
) -> FinalizePlan:
    return plan_finalize(
        current,
        lease_id="L1",
        resolved=resolved,
        user_turns=3,
        outcome=outcome,
        now=now,
        ttl=TTL,
    )


def written(
    current: LaneRecord, outcome: TurnOutcome, resolved: frozenset[str] = frozenset()
) -> LaneRecord:
    plan = finish(current, outcome, resolved=resolved)
    assert plan.applied and plan.record is not None
    return plan.record


def test_success_records_actual_route_without_rewriting_the_approval() -> None:
    plan = finish(held(binding()), TurnOutcome(True, "azure/m1", ("n1",)))
    rec = plan.record
    assert plan.applied and rec is not None
    assert (rec.approved_model, rec.approved_tier, rec.actual_route) == ("openai:m1", 1, "azure/m1")
    assert rec.outstanding == (tool_id_hash(SCOPE, "n1"),)
    assert rec.lease_id is None and rec.last_turn_ok and rec.generation == 2
    assert rec.completed_user_turns == 3 and rec.expires_at == NOW + 1 + TTL


def test_success_resolves_answered_calls_only() -> None:
    current = held(binding("c1", "c2"))
    resolved = frozenset({tool_id_hash(SCOPE, "c1")})
    rec = written(current, TurnOutcome(True, None, ()), resolved=resolved)
    assert rec.outstanding == (tool_id_hash(SCOPE, "c2"),)


def test_failure_blocks_the_boundary_and_keeps_calls() -> None:
    rec = written(held(binding("c1")), TurnOutcome(False))
    assert not rec.last_turn_ok and rec.outstanding == (tool_id_hash(SCOPE, "c1"),)
    assert rec.lease_id is None and rec.generation == 1


@pytest.mark.parametrize("ids", [None, tuple(f"i{n}" for n in range(129)), ("z" * 201,), ("",)])
def test_unknown_or_oversized_tool_state(ids: tuple[str, ...] | None) -> None:
    rec = written(held(binding()), TurnOutcome(True, None, ids))
    assert rec.tools_unknown and rec.outstanding == ()
    # ... and it stays unknown on later successful turns
    rec2 = written(held(rec), TurnOutcome(True, None, ()))
    assert rec2.tools_unknown


def test_outstanding_overflow_across_turns_is_unknown() -> None:
    first = tuple(f"a{n}" for n in range(100))
    rec = written(held(binding(*first)), TurnOutcome(True, None, tuple(f"b{n}" for n in range(40))))
    assert rec.tools_unknown


def test_credential_failure_deletes_the_lane() -> None:
    plan = finish(held(binding()), TurnOutcome(False, credential_failure=True))
    assert plan.applied and plan.record is None


@pytest.mark.parametrize(
    "current",
    [
        None,  # invalidated or expired and pruned
        held(binding(), lease="L9"),  # replaced by a newer lease
        binding(),  # released already
    ],
)
def test_late_completion_changes_nothing(current: LaneRecord | None) -> None:
    assert not finish(current, TurnOutcome(True, "azure/m1")).applied


def test_completion_after_lease_expiry_changes_nothing() -> None:
    assert not finish(held(binding()), TurnOutcome(True), now=NOW + TTL).applied


def test_a_compacted_transcript_opens_a_boundary_at_its_new_user_turn() -> None:
    """A client that compacts its transcript sends fewer user messages than the
    turn completed last; the new user turn is recognised by content (issue #16)."""
    done = [user("a"), asst(text="r1"), user("b"), asst(text="r2"), user("c")]
    mark = request_facts(done, SCOPE).turn_mark
    current = binding(user_turns=3).evolve(completed_turn=mark)
    compacted = [user("summary of a, b"), asst(text="r3"), user("d")]
    assert is_safe_boundary(current, compacted)  # 2 user messages < 3, yet a new turn
    plan = acquire(current, compacted, turn=make_turn("openai:m2"))
    assert plan.approval_changed
    # the completed turn itself, compacted or resent, is no boundary
    assert not is_safe_boundary(current, [user("summary of a, b"), asst(text="r2"), user("c")])
    assert not is_safe_boundary(current, done)
    # the same words after another reply are a new turn ("continue", "continue")
    again = [*done, asst(text="r3"), user("c")]
    assert is_safe_boundary(current, again)


def test_finalize_records_the_turn_mark() -> None:
    current = binding().evolve(lease_id="L1", lease_expires_at=NOW + TTL)
    plan = plan_finalize(
        current,
        lease_id="L1",
        resolved=frozenset(),
        user_turns=1,
        outcome=TurnOutcome(True, "openai/m1", ()),
        now=NOW + 1,
        ttl=TTL,
        turn_mark="m",
    )
    assert plan.record is not None and plan.record.completed_turn == "m"
