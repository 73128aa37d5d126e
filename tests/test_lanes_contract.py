"""The lane-store contract: memory, SQLite and Redis pass the very same tests.

Each test runs once per adapter against real storage (a migrated SQLite file,
the real Redis under a per-test key prefix). Time is a fake clock passed in,
so "the TTL elapsed" needs no sleeping; Redis TTLs are relative to it.
"""

from __future__ import annotations

import asyncio
import sqlite3

from lanes_store_support import (
    CANDIDATES,
    LEASE,
    PRINCIPAL,
    SESSION,
    T0,
    TOOL_ID,
    TTL,
    Clock,
    StoreFactory,
    close_tiers,
    crash,
    expect_error,
    make_store,
    prepare,
    rec,
    stored,
    tiers_on,
    tool_turn,
    turn,
    user,
)
from tiergate.core.model import Message
from tiergate.lanes import (
    LaneRecord,
    MemoryLaneStore,
    PreparedTurn,
    SessionTierError,
    SqliteLaneStore,
    TurnOutcome,
)
from tiergate.lanes.flow import renew
from tiergate.lanes.operator import lane_refs, lane_views, release_lane

#: pytest fixtures from the support module, used by name in the tests below
FIXTURES = (close_tiers, make_store)

# ---- the raw compare-and-swap contract ----------------------------------------------


async def test_swap_is_compare_and_swap(make_store: StoreFactory) -> None:
    store = make_store()
    assert await store.load("s1", T0) is None
    assert not await store.swap("s1", "no-such-etag", rec("s1", T0 + 10), T0)
    assert await store.swap("s1", None, rec("s1", T0 + 10), T0)
    first = await store.load("s1", T0)
    assert first is not None and first.record == rec("s1", T0 + 10)
    assert not await store.swap("s1", None, rec("s1", T0 + 10, "x:y"), T0)  # exists
    assert await store.swap("s1", first.etag, rec("s1", T0 + 20, "x:y"), T0)
    second = await store.load("s1", T0)
    assert second is not None and second.record.approved_model == "x:y"
    assert second.etag != first.etag
    assert not await store.swap("s1", first.etag, None, T0)  # stale etag cannot delete
    assert await store.swap("s1", second.etag, None, T0)
    assert await store.load("s1", T0) is None


async def test_expired_record_counts_as_absent(make_store: StoreFactory) -> None:
    store = make_store()
    assert await store.swap("s1", None, rec("s1", T0 + 10), T0)
    assert await store.load("s1", T0 + 9.999) is not None
    assert await store.load("s1", T0 + 10) is None
    assert await store.live_count(T0 + 10) == 0
    assert await store.swap("s1", None, rec("s1", T0 + 30), T0 + 10)  # re-create over it


async def test_round_trip_keeps_every_field(make_store: StoreFactory) -> None:
    store = make_store()
    full = LaneRecord(
        scope="s" * 64,
        lane="delegation",
        approved_model="opencode:glm-5.3-flash",
        approved_tier=100,
        actual_route="azure-east/m1",
        revision="f" * 64,
        expires_at=T0 + 12.5,
        generation=7,
        completed_user_turns=4,
        last_turn_ok=True,
        tools_unknown=False,
        outstanding=("0" * 32, "1" * 32),
        lease_id="lease",
        lease_expires_at=T0 + 12.5,
        completed_turn="t" * 32,
        lease_owner="gw-host:4711:abcdef/req-1",
    )
    assert await store.swap(full.scope, None, full, T0)
    got = await store.load(full.scope, T0)
    assert got is not None and got.record == full


# ---- leases ---------------------------------------------------------------------------


async def test_in_flight_lease_makes_the_lane_busy(make_store: StoreFactory) -> None:
    clock = Clock()
    tiers = tiers_on(make_store(), clock)
    first = await prepare(tiers)
    await expect_error(prepare(tiers), 409, "session_tier_busy")
    # other lanes, sessions and principals are other leases
    await prepare(tiers, turn(lane="delegation"))
    await prepare(tiers, turn(session="another-session"))
    await prepare(tiers, principal="another-principal")
    assert await tiers.finalize(first, TurnOutcome(True, "openai-main/m1", ()))
    await prepare(tiers)  # released: free again


async def test_concurrent_requests_for_one_lane_one_wins(make_store: StoreFactory) -> None:
    clock = Clock()
    # two handles = two gateway instances sharing SQLite/Redis storage
    instances = [tiers_on(make_store(), clock), tiers_on(make_store(), clock)]
    results = await asyncio.gather(
        *(prepare(instances[i % 2]) for i in range(6)), return_exceptions=True
    )
    won = [r for r in results if isinstance(r, PreparedTurn)]
    busy = [r for r in results if isinstance(r, SessionTierError)]
    assert len(won) == 1 and len(busy) == 5
    assert all((e.status, e.code) == (409, "session_tier_busy") for e in busy)


async def test_crashed_request_frees_the_lane_at_ttl(make_store: StoreFactory) -> None:
    clock = Clock()
    tiers = tiers_on(make_store(), clock)
    crash(tiers, await prepare(tiers))  # lease as long as the lane: the old behaviour
    clock.now = T0 + TTL - 0.5
    await expect_error(prepare(tiers), 409, "session_tier_busy")
    clock.now = T0 + TTL
    again = await prepare(tiers)
    assert again.new_binding  # the lane expired together with its lease


async def test_a_crashed_holders_lease_lapses_and_the_binding_stays(
    make_store: StoreFactory,
) -> None:
    """Issue #27: a holder killed mid-turn frees its lane within one lease lifetime
    on every instance; the binding keeps its TTL, and the dead turn is ambiguous."""
    clock = Clock()
    store = make_store()
    dead, survivor = tiers_on(store, clock, lease=LEASE), tiers_on(make_store(), clock, lease=LEASE)
    first = await prepare(dead)
    assert await dead.finalize(first, TurnOutcome(True, "azure-east/m1", ()))
    clock.now += 1
    held = await prepare(dead, messages=[user(), user("next")])
    crash(dead, held)
    record = await stored(store, held, clock.now)
    assert record is not None and record.lease_expires_at == clock.now + LEASE
    assert record.expires_at == clock.now + TTL
    assert record.lease_owner == f"{dead.instance}/-"
    clock.now += LEASE - 0.5
    await expect_error(prepare(survivor), 409, "session_tier_busy")
    clock.now += 0.5
    m2 = turn(model="openai:m2", tier=2)
    taken = await prepare(survivor, m2, [user(), user("next"), user("again")])
    assert not taken.new_binding and taken.approval_deferred  # the binding survived
    assert taken.approved_model == "openai:m1" and taken.candidates[0].route_id == "azure-east/m1"
    record = await stored(store, taken, clock.now)
    assert record is not None and record.lease_id == taken.lease.lease_id
    assert record.tools_unknown and not record.last_turn_ok  # the dead turn is ambiguous
    assert not await dead.finalize(held, TurnOutcome(True, "openai-main/m1", ()))  # too late


async def test_a_renewed_lease_outlives_its_first_lifetime(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store()
    tiers, other = tiers_on(store, clock, lease=LEASE), tiers_on(make_store(), clock, lease=LEASE)
    held = await prepare(tiers, principal="p-renew")
    for _ in range(5):  # a turn five lease lifetimes long, renewed every few seconds
        clock.now += LEASE - 1
        assert await renew(store, held.lease, lease_seconds=LEASE, now=clock.now)
        await expect_error(prepare(other, principal="p-renew"), 409, "session_tier_busy")
    record = await stored(store, held, clock.now)
    assert record is not None and record.lease_expires_at == clock.now + LEASE
    assert await tiers.finalize(held, TurnOutcome(True, "openai-main/m1", ()))
    # a finalized, lapsed or replaced lease is renewed no more: renewal ends
    assert not await renew(store, held.lease, lease_seconds=LEASE, now=clock.now)
    fresh = await prepare(other, principal="p-renew")
    assert not await renew(store, held.lease, lease_seconds=LEASE, now=clock.now)
    clock.now += LEASE
    assert not await renew(store, fresh.lease, lease_seconds=LEASE, now=clock.now)


async def test_an_operator_releases_a_held_lane_at_once(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store()
    tiers = tiers_on(store, clock, lease=LEASE)
    held = await prepare(tiers, turn(lane="aux"))
    (ref,) = lane_refs(PRINCIPAL, SESSION, lanes=("aux",), kinds=("managed",))
    (view,) = await lane_views(store, lane_refs(PRINCIPAL, SESSION), clock.now)
    assert view["lane"] == "aux" and view["leased"] and view["scope"] == ref.scope
    assert view["lease_owner"] == f"{tiers.instance}/-"
    released = await release_lane(store, ref, clock.now)
    assert released is not None and released.was_leased and not released.forgot
    assert released.lease_owner == f"{tiers.instance}/-"
    again = await prepare(tiers, turn(lane="aux"))  # no wait for the lease to lapse
    assert not again.new_binding
    assert not await tiers.finalize(held, TurnOutcome(True))  # the old holder's turn is void
    assert await tiers.finalize(again, TurnOutcome(True, "openai-main/m1", ()))
    idle = await release_lane(store, ref, clock.now)  # nothing held: nothing changes
    assert idle is not None and not idle.was_leased
    forgot = await release_lane(store, ref, clock.now, forget=True)
    assert forgot is not None and forgot.forgot
    assert await release_lane(store, ref, clock.now) is None  # the binding is gone
    assert await lane_views(store, [ref], clock.now) == []


async def test_late_completion_cannot_overwrite_a_newer_lease(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store()
    tiers = tiers_on(store, clock)
    slow = await prepare(tiers)
    clock.now = T0 + TTL + 1
    fresh = await prepare(tiers, turn(model="openai:m2", tier=2))
    assert not await tiers.finalize(slow, TurnOutcome(True, "azure-east/m1", ("late",)))
    current = await stored(store, fresh, clock.now)
    assert current is not None
    assert current.lease_id == fresh.lease.lease_id and current.actual_route is None
    assert current.approved_model == "openai:m2"
    await expect_error(prepare(tiers), 409, "session_tier_busy")  # newer lease intact
    assert await tiers.finalize(fresh, TurnOutcome(True, "openai-main/m2", ()))
    assert not await tiers.finalize(fresh, TurnOutcome(True))  # finalizing twice is late too


# ---- invalidation -------------------------------------------------------------------


async def test_revision_change_invalidates_the_lane(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store()
    tiers = tiers_on(store, clock, revision="rev-1")
    p = await prepare(tiers)
    # the turn ends with an unanswered tool call: no boundary under rev-1
    assert await tiers.finalize(p, TurnOutcome(True, "azure-east/m1", (TOOL_ID,)))
    clock.now += 1
    held = await prepare(tiers, turn(model="openai:m2", tier=2), [user(), user("again")])
    assert held.approval_deferred and held.approved_model == "openai:m1"
    assert held.candidates[0].route_id == "azure-east/m1"  # the actual route first
    # a new reviewed policy invalidates the binding, not the request still holding
    # its lease (issue #16): a concurrent request for the lane still gets 409
    tiers.set_revision("rev-2")
    await expect_error(
        prepare(tiers, turn(model="openai:m2", tier=2), [user()]), 409, "session_tier_busy"
    )
    assert await tiers.finalize(held, TurnOutcome(True))  # the lease ends normally
    fresh = await prepare(tiers, turn(model="openai:m2", tier=2), [user()])
    assert fresh.new_binding and fresh.approved_model == "openai:m2"
    assert fresh.candidates == (CANDIDATES[2],)


async def test_credential_failure_invalidates_only_that_lane(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store()
    tiers = tiers_on(store, clock)
    main = await prepare(tiers, turn(lane="main"))
    aux = await prepare(tiers, turn(lane="aux"))
    assert await tiers.finalize(aux, TurnOutcome(True, "openai-main/m1", ()))
    assert await tiers.finalize(main, TurnOutcome(False, credential_failure=True))
    assert await stored(store, main, clock.now) is None
    kept = await stored(store, aux, clock.now)
    assert kept is not None and kept.last_turn_ok
    assert (await prepare(tiers, turn(lane="main", model="openai:m2", tier=2))).new_binding


# ---- capacity and expiry --------------------------------------------------------------


async def test_capacity_exhaustion_is_503_until_lanes_expire(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store(capacity=3)
    tiers = tiers_on(store, clock)
    held = [await prepare(tiers, turn(session=f"s{i}")) for i in range(3)]
    for p in held:
        await tiers.finalize(p, TurnOutcome(True, "openai-main/m1", ()))
    await expect_error(
        prepare(tiers, turn(session="s-new")), 503, "session_tier_capacity_exhausted"
    )
    again = await prepare(tiers, turn(session="s0"))  # an existing lane still works at the cap
    assert not again.new_binding
    assert await store.live_count(clock.now) == 3
    clock.now += TTL  # all three expire
    assert await store.live_count(clock.now) == 0
    assert (await prepare(tiers, turn(session="s-new"))).new_binding
    assert await store.live_count(clock.now) == 1


async def test_expired_entries_are_pruned(make_store: StoreFactory) -> None:
    store = make_store(capacity=2)
    for i in range(2):
        assert await store.swap(f"old{i}", None, rec(f"old{i}", T0 + 5), T0)
    assert await store.live_count(T0) == 2
    assert await store.swap("new", None, rec("new", T0 + 100), T0 + 5)  # prunes both
    assert await store.live_count(T0 + 5) == 1
    assert await store.load("old0", T0 + 5) is None
    if isinstance(store, MemoryLaneStore):
        assert store.prune(T0 + 5) == 0  # nothing left behind
    if isinstance(store, SqliteLaneStore):
        with sqlite3.connect(store.path) as conn:
            assert conn.execute("SELECT COUNT(*) FROM session_tiers").fetchone() == (1,)


# ---- a whole conversation: stickiness across tool calls -------------------------------


async def test_approval_sticks_across_tool_calls_until_a_safe_boundary(
    make_store: StoreFactory,
) -> None:
    clock = Clock()
    tiers = tiers_on(make_store(), clock)
    m2 = turn(model="openai:m2", tier=2)
    p = await prepare(tiers, turn(), [user()])
    assert p.new_binding and not p.output_rewrites_allowed
    assert await tiers.finalize(p, TurnOutcome(True, "azure-east/m1", (TOOL_ID,)))
    # continuation with the tool result but no new user turn: m2 must wait
    p = await prepare(tiers, m2, tool_turn())
    assert p.approval_deferred and p.approved_model == "openai:m1"
    assert [c.route_id for c in p.candidates] == ["azure-east/m1", "openai-main/m1"]
    assert await tiers.finalize(p, TurnOutcome(False))  # ...and that turn failed
    after_failure = [*tool_turn(), Message(role="assistant"), user("next")]
    p = await prepare(tiers, m2, after_failure)
    assert p.approval_deferred  # a failure never opens a boundary
    assert await tiers.finalize(p, TurnOutcome(True, "azure-east/m1", ()))
    p = await prepare(tiers, m2, [*after_failure, Message(role="assistant"), user("more")])
    assert p.approval_changed and p.approved_model == "openai:m2" and p.approved_tier == 2
    assert [c.route_id for c in p.candidates] == ["openai-main/m2"]


async def test_unknown_streamed_tool_state_blocks_until_expiry(make_store: StoreFactory) -> None:
    clock = Clock()
    tiers = tiers_on(make_store(), clock)
    p = await prepare(tiers)
    assert await tiers.finalize(p, TurnOutcome(True, "openai-main/m1", None))
    for _ in range(3):
        clock.now += TTL - 1  # activity keeps the lane alive...
        p = await prepare(tiers, turn(model="openai:m2", tier=2), [user(), user("next")])
        assert p.approval_deferred  # ...and the unknown state keeps blocking
        assert await tiers.finalize(p, TurnOutcome(True, "openai-main/m1", ()))
    clock.now += TTL  # idle expiry ends it
    assert (await prepare(tiers, turn(model="openai:m2", tier=2))).new_binding


async def test_unknown_tool_state_ends_with_a_revision_change(make_store: StoreFactory) -> None:
    clock = Clock()
    tiers = tiers_on(make_store(), clock)
    p = await prepare(tiers)
    assert await tiers.finalize(p, TurnOutcome(True, "openai-main/m1", None))
    clock.now += 1
    p = await prepare(tiers, turn(model="openai:m2", tier=2), [user(), user("next")])
    assert p.approval_deferred
    assert await tiers.finalize(p, TurnOutcome(True, "openai-main/m1", ()))
    tiers.set_revision("rev-2")
    p = await prepare(tiers, turn(model="openai:m2", tier=2), [user(), user("next")])
    assert p.new_binding and p.approved_model == "openai:m2"


async def test_default_capacity_is_ten_thousand(make_store: StoreFactory) -> None:
    assert make_store().capacity == 10_000
