"""The lane-store contract: memory, SQLite and Redis pass the very same tests.

Each test runs once per adapter against real storage (a migrated SQLite file,
the real Redis under a per-test key prefix). Time is a fake clock passed in,
so "the TTL elapsed" needs no sleeping; Redis TTLs are relative to it.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from uuid import uuid4

import pytest
from redis.asyncio import Redis

from tiergate.core.model import Message, TextPart, ToolCall
from tiergate.lanes import (
    CapacityExhausted,
    LaneRecord,
    LaneStore,
    MemoryLaneStore,
    PreparedTurn,
    RedisLaneStore,
    RouteCandidate,
    SessionTierError,
    SessionTiers,
    SessionTierSettings,
    SqliteLaneStore,
    TierTurn,
    TurnOutcome,
    migrate,
)
from tiergate.lanes.flow import renew
from tiergate.lanes.operator import lane_refs, lane_views, release_lane

TTL = 60
LEASE = 10  # the in-flight lease, renewed by its holder; the lane lives TTL
T0 = 1_900_000_000.0
SESSION = "sess-SECRET-4711"
PRINCIPAL = "principal-SECRET-ws1"
PROMPT = "PROMPT-SECRET-please-refactor"
TOOL_ID = "call_SECRET_tool_77"
TOOL_ARGS = '{"path": "ARG-SECRET-file.py"}'
TOOL_RESULT = "RESULT-SECRET-42 passed"
SECRETS = (SESSION, PRINCIPAL, PROMPT, TOOL_ID, TOOL_ARGS, "ARG-SECRET", TOOL_RESULT)

CANDIDATES = [
    RouteCandidate("openai-main/m1", "m1", 1, "openai"),
    RouteCandidate("azure-east/m1", "m1", 1, "azure"),
    RouteCandidate("openai-main/m2", "m2", 2, "openai"),
]

StoreFactory = Callable[..., LaneStore]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """A factory of handles onto ONE shared storage (a second handle is a second
    gateway instance for SQLite and Redis; memory is process-local by design)."""
    backend: str = request.param
    opened: list[LaneStore] = []
    memory: list[MemoryLaneStore] = []
    prefix = f"test:{uuid4().hex}:"
    path = tmp_path / "lanes.db"
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    if backend == "sqlite":
        migrate(path)

    def make(capacity: int = 10_000) -> LaneStore:
        store: LaneStore
        if backend == "memory":
            if not memory:
                memory.append(MemoryLaneStore(capacity=capacity))
            return memory[0]
        if backend == "sqlite":
            store = SqliteLaneStore(path, capacity=capacity)
        else:
            store = RedisLaneStore(Redis.from_url(redis_url), key_prefix=prefix, capacity=capacity)
        opened.append(store)
        return store

    yield make
    if backend == "redis":
        client = Redis.from_url(redis_url)
        keys = [k async for k in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    for store in opened:
        await store.close()


OPENED: list[SessionTiers] = []


@pytest.fixture(autouse=True)
async def close_tiers() -> AsyncIterator[None]:
    """Stop the lease renewals of every facade a test opened (a crash is simulated
    by stopping one: `crash`)."""
    yield
    while OPENED:
        await OPENED.pop().close()


def tiers_on(
    store: LaneStore, clock: Clock, revision: str = "rev-1", lease: int = TTL
) -> SessionTiers:
    tiers = SessionTiers(SessionTierSettings(True, TTL, lease), store, revision, clock=clock)
    OPENED.append(tiers)
    return tiers


def crash(tiers: SessionTiers, prepared: PreparedTurn) -> None:
    """The holder dies mid-turn: it stops renewing and never finalizes."""
    tiers.renewals.stop(prepared.lease)


def turn(
    lane: str = "main", model: str = "openai:m1", tier: int = 1, session: str = SESSION
) -> TierTurn:
    return TierTurn("managed", "coding", lane, model, tier, session=session)


def user(text: str = PROMPT) -> Message:
    return Message(role="user", content=[TextPart(text)])


def tool_turn() -> list[Message]:
    return [
        user(),
        Message(role="assistant", tool_calls=[ToolCall(TOOL_ID, "edit", TOOL_ARGS)]),
        Message(role="tool", content=[TextPart(TOOL_RESULT)], tool_call_id=TOOL_ID),
    ]


async def prepare(
    tiers: SessionTiers,
    t: TierTurn | None = None,
    messages: list[Message] | None = None,
    principal: str = PRINCIPAL,
) -> PreparedTurn:
    return await tiers.prepare(principal, t or turn(), messages or [user()], CANDIDATES)


async def expect_error(coro: object, status: int, code: str) -> SessionTierError:
    with pytest.raises(SessionTierError) as info:
        await coro  # type: ignore[misc]
    assert (info.value.status, info.value.code) == (status, code)
    return info.value


async def stored(store: LaneStore, prepared: PreparedTurn, now: float) -> LaneRecord | None:
    v = await store.load(prepared.lease.scope, now)
    return v.record if v else None


# ---- the raw compare-and-swap contract ----------------------------------------------


def rec(scope: str, expires_at: float, model: str = "openai:m1") -> LaneRecord:
    return LaneRecord(scope, "main", model, 1, None, "r", expires_at, outstanding=("ab", "cd"))


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


# ---- nothing sensitive reaches storage or logs ----------------------------------------


async def raw_storage(store: LaneStore) -> bytes:
    if isinstance(store, MemoryLaneStore):
        return repr(vars(store)).encode()
    if isinstance(store, SqliteLaneStore):
        data = b""
        for suffix in ("", "-wal", "-journal"):
            p = Path(store.path + suffix)
            if p.exists():
                data += p.read_bytes()
        with sqlite3.connect(store.path) as conn:
            data += repr(conn.execute("SELECT * FROM session_tiers").fetchall()).encode()
        return data
    assert isinstance(store, RedisLaneStore)
    data = b""
    async for key in store.client.scan_iter(match=f"{store.prefix}*"):
        kind = await store.client.type(key)
        if kind == b"hash":
            data += key + repr(await store.client.hgetall(key)).encode()
        else:
            data += key + repr(await store.client.zrange(key, 0, -1, withscores=True)).encode()
    return data


async def test_no_plaintext_reaches_storage_or_logs(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    store = make_store()
    tiers = tiers_on(store, clock)
    p = await prepare(tiers, turn(), [user()])
    await tiers.finalize(p, TurnOutcome(True, "openai-main/m1", (TOOL_ID,)))
    p = await prepare(tiers, turn(), tool_turn())
    await tiers.finalize(p, TurnOutcome(True, "openai-main/m1", (TOOL_ID + "-2",)))
    p = await prepare(tiers, turn(lane="aux"), [*tool_turn(), user()])
    await expect_error(prepare(tiers, turn(lane="aux")), 409, "session_tier_busy")
    await tiers.finalize(p, TurnOutcome(False, credential_failure=True))
    raw = await raw_storage(store)
    assert len(raw) > 100  # the dump really saw the lane
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
        assert secret not in caplog.text, secret


# ---- unavailable storage ---------------------------------------------------------------


async def test_missing_store_is_503() -> None:
    tiers = SessionTiers(SessionTierSettings(True, TTL), None, "rev")
    await expect_error(prepare(tiers), 503, "session_tier_storage_unavailable")


async def test_sqlite_missing_table_is_503_and_never_created(tmp_path: Path) -> None:
    path = tmp_path / "unmigrated.db"
    sqlite3.connect(path).close()  # the file exists, the table does not
    store = SqliteLaneStore(path)
    tiers = tiers_on(store, Clock())
    await expect_error(prepare(tiers), 503, "session_tier_storage_unavailable")
    await store.close()
    with sqlite3.connect(path) as conn:
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    assert tables == []


async def test_sqlite_missing_file_is_503_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    store = SqliteLaneStore(path)
    await expect_error(prepare(tiers_on(store, Clock())), 503, "session_tier_storage_unavailable")
    assert not path.exists()
    assert not await store.ping()


async def test_sqlite_failing_mid_conversation_is_503(tmp_path: Path) -> None:
    path = tmp_path / "lanes.db"
    migrate(path)
    store = SqliteLaneStore(path)
    tiers = tiers_on(store, Clock())
    p = await prepare(tiers)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE session_tiers")
    await expect_error(
        tiers.finalize(p, TurnOutcome(True)), 503, "session_tier_storage_unavailable"
    )
    await store.close()


async def test_redis_unreachable_is_503() -> None:
    client = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    store = RedisLaneStore(client, key_prefix="test:unreachable:")
    await expect_error(prepare(tiers_on(store, Clock())), 503, "session_tier_storage_unavailable")
    assert not await store.ping()
    await store.close()


async def test_sqlite_lanes_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "lanes.db"
    migrate(path)
    clock = Clock()
    before = SqliteLaneStore(path)
    p = await prepare(tiers_on(before, clock))
    assert await tiers_on(before, clock).finalize(p, TurnOutcome(True, "azure-east/m1", ()))
    await before.close()
    after = SqliteLaneStore(path)  # a new process on the same file
    again = await prepare(tiers_on(after, clock), messages=[user(), user()])
    assert not again.new_binding and again.candidates[0].route_id == "azure-east/m1"
    await after.close()


async def test_memory_store_holds_exactly_ten_thousand_live_lanes() -> None:
    store = MemoryLaneStore()
    for i in range(10_000):
        assert await store.swap(f"s{i}", None, rec(f"s{i}", T0 + 10), T0)
    with pytest.raises(CapacityExhausted):
        await store.swap("one-more", None, rec("one-more", T0 + 10), T0)
    assert await store.swap("one-more", None, rec("one-more", T0 + 20), T0 + 10)  # pruned
    assert await store.live_count(T0 + 10) == 1


def test_migration_is_additive_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE usage (id INTEGER PRIMARY KEY, n INTEGER)")
        conn.execute("INSERT INTO usage (n) VALUES (7)")
    migrate(path)
    migrate(f"sqlite:///{path}")  # twice, and by URL
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT n FROM usage").fetchall() == [(7,)]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"usage", "session_tiers", "session_tiers_expires_at"} <= names


async def test_migrate_adds_the_turn_mark_column_to_an_older_table(tmp_path: Path) -> None:
    """A table created by the first release (no completed_turn column) is
    extended in place by migrate, rows kept, and the store works on it."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE session_tiers (scope TEXT PRIMARY KEY, lane TEXT NOT NULL, "
            "approved_model TEXT NOT NULL, approved_tier INTEGER NOT NULL, actual_route TEXT, "
            "revision TEXT NOT NULL, expires_at REAL NOT NULL, generation INTEGER NOT NULL, "
            "completed_user_turns INTEGER NOT NULL, last_turn_ok INTEGER NOT NULL, "
            "tools_unknown INTEGER NOT NULL, outstanding TEXT NOT NULL, lease_id TEXT, "
            "lease_expires_at REAL, etag TEXT NOT NULL)"
        )
    migrate(path)
    migrate(path)  # idempotent
    with sqlite3.connect(path) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(session_tiers)")}
    assert "completed_turn" in columns
    store = SqliteLaneStore(path)
    clock = Clock()
    tiers = tiers_on(store, clock)
    p = await prepare(tiers)
    assert await tiers.finalize(p, TurnOutcome(True, "azure-east/m1", ()))
    await store.close()
