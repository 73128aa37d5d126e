"""Persistent lane store on SQLite, for a single host that must survive restarts.

Every write is one `BEGIN IMMEDIATE` transaction (read etag, compare, prune,
count, write), so concurrent gateway processes on the same file serialise per
write and a compare-and-swap is atomic. At most `capacity` (10,000) live rows.
The table comes from the `session_tiers` migration; this adapter never creates
it, and a missing table or file raises StorageUnavailable.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tiergate.lanes.errors import CapacityExhausted, StorageUnavailable
from tiergate.lanes.migrations import sqlite_path
from tiergate.lanes.record import LaneRecord
from tiergate.lanes.store_base import DEFAULT_CAPACITY, Versioned

T = TypeVar("T")

_COLUMNS = (
    "scope, lane, approved_model, approved_tier, actual_route, revision, expires_at, "
    "generation, completed_user_turns, last_turn_ok, tools_unknown, outstanding, "
    "lease_id, lease_expires_at, completed_turn, lease_owner"
)
_UPSERT = (
    f"INSERT OR REPLACE INTO session_tiers ({_COLUMNS}, etag) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _row(record: LaneRecord) -> tuple[Any, ...]:
    return (
        record.scope,
        record.lane,
        record.approved_model,
        record.approved_tier,
        record.actual_route,
        record.revision,
        record.expires_at,
        record.generation,
        record.completed_user_turns,
        int(record.last_turn_ok),
        int(record.tools_unknown),
        " ".join(record.outstanding),
        record.lease_id,
        record.lease_expires_at,
        record.completed_turn,
        record.lease_owner,
    )


def _record(row: tuple[Any, ...]) -> LaneRecord:
    return LaneRecord(
        scope=row[0],
        lane=row[1],
        approved_model=row[2],
        approved_tier=row[3],
        actual_route=row[4],
        revision=row[5],
        expires_at=row[6],
        generation=row[7],
        completed_user_turns=row[8],
        last_turn_ok=bool(row[9]),
        tools_unknown=bool(row[10]),
        outstanding=tuple(row[11].split()),
        lease_id=row[12],
        lease_expires_at=row[13],
        completed_turn=row[14],
        lease_owner=row[15],
    )


class SqliteLaneStore:
    name = "sqlite"

    def __init__(
        self, path: str | Path, capacity: int = DEFAULT_CAPACITY, busy_timeout: float = 5.0
    ) -> None:
        self.path = sqlite_path(str(path))
        self.capacity = capacity
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # one connection, used from worker threads in turn

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            # mode=rw: a missing file is an error, never a new empty database.
            uri = Path(self.path).absolute().as_uri() + "?mode=rw"
            self._conn = sqlite3.connect(
                uri,
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout,
            )
        return self._conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            with self._lock:
                conn = self._connection()
                try:
                    return fn(conn)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise

        try:
            return await asyncio.to_thread(call)
        except sqlite3.Error as err:
            raise StorageUnavailable(f"sqlite lane store: {type(err).__name__}") from err

    async def load(self, scope: str, now: float) -> Versioned | None:
        def op(conn: sqlite3.Connection) -> Versioned | None:
            row = conn.execute(
                f"SELECT {_COLUMNS}, etag FROM session_tiers WHERE scope = ? AND expires_at > ?",
                (scope, now),
            ).fetchone()
            return None if row is None else Versioned(_record(row[:-1]), row[-1])

        return await self._run(op)

    async def swap(
        self, scope: str, expected: str | None, record: LaneRecord | None, now: float
    ) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT etag, expires_at FROM session_tiers WHERE scope = ?", (scope,)
            ).fetchone()
            current = row[0] if row is not None and row[1] > now else None
            if current != expected:
                conn.execute("ROLLBACK")
                return False
            if record is None:
                conn.execute("DELETE FROM session_tiers WHERE scope = ?", (scope,))
            else:
                if current is None:
                    conn.execute("DELETE FROM session_tiers WHERE expires_at <= ?", (now,))
                    (live,) = conn.execute(
                        "SELECT COUNT(*) FROM session_tiers WHERE scope != ?", (scope,)
                    ).fetchone()
                    if live >= self.capacity:
                        conn.execute("ROLLBACK")
                        raise CapacityExhausted()
                conn.execute(_UPSERT, (*_row(record), uuid.uuid4().hex))
            conn.execute("COMMIT")
            return True

        return await self._run(op)

    async def live_count(self, now: float) -> int:
        def op(conn: sqlite3.Connection) -> int:
            (n,) = conn.execute(
                "SELECT COUNT(*) FROM session_tiers WHERE expires_at > ?", (now,)
            ).fetchone()
            return int(n)

        return await self._run(op)

    async def ping(self) -> bool:
        try:
            await self.live_count(0.0)
        except StorageUnavailable:
            return False
        return True

    async def close(self) -> None:
        def op() -> None:
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

        await asyncio.to_thread(op)
