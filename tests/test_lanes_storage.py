"""Lane storage beyond the swap contract: no plaintext at rest or in logs, a
missing or failing store is 503 (never created behind the operator's back), and
migrations are additive.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from redis.asyncio import Redis

from lanes_store_support import (
    SECRETS,
    T0,
    TOOL_ID,
    TTL,
    Clock,
    StoreFactory,
    close_tiers,
    expect_error,
    make_store,
    prepare,
    rec,
    tiers_on,
    tool_turn,
    turn,
    user,
)
from tiergate.lanes import (
    CapacityExhausted,
    LaneStore,
    MemoryLaneStore,
    RedisLaneStore,
    SessionTiers,
    SessionTierSettings,
    SqliteLaneStore,
    TurnOutcome,
    migrate,
)

#: pytest fixtures from the support module, used by name in the tests below
FIXTURES = (close_tiers, make_store)

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
