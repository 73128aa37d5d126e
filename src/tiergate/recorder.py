"""Usage and audit rows written off the hot path, and never lost on a DB outage.

Requests append rows to an in-memory batch; a background task flushes batches
to the database. If the database is unreachable the batch is appended to a
bounded on-disk spool (JSON lines) that is replayed, in order, once the
database answers again. A process killed with -9 loses at most the rows of
one flush interval (default 0.5 s).

With `prepare` (the gateway passes tiergate.db.ensure_schema), the schema is
migrated before the first write unless start-up already did it: a gateway that
started while the database was down must not write this release's columns into
an older table, which would refuse them. Until it succeeds rows spool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from tiergate.db import SchemaOutdated, audit_table, usage_table

log = logging.getLogger(__name__)

TABLES = {"usage": usage_table, "audit": audit_table}

_PERMANENT_TYPES = (
    sa_exc.DataError,
    sa_exc.IntegrityError,
    sa_exc.ProgrammingError,
    sa_exc.NotSupportedError,
)
#: SQLSTATE classes of errors the row itself causes: data (22), integrity (23),
#: syntax or access rule (42). Others (08 connection, 57 shutdown, ...) are outages.
_PERMANENT_SQLSTATE_CLASSES = ("22", "23", "42")


def _detail(err: BaseException) -> str | None:
    """A schema refusal's own message (it names the operator's next step); other
    errors only by type, since driver messages can quote connection strings."""
    return str(err) if isinstance(err, SchemaOutdated) else None


class RejectedForGood(Exception):
    """The database refused these rows for a reason retrying will never fix."""


def _is_rejected_for_good(err: BaseException) -> bool:
    if isinstance(err, _PERMANENT_TYPES):
        return True
    if not isinstance(err, sa_exc.DBAPIError) or err.connection_invalidated:
        return False
    cause: BaseException | None = err.orig
    while cause is not None:  # drivers wrap: sqlalchemy -> adapter -> asyncpg error
        state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
        if isinstance(state, str):
            return state[:2] in _PERMANENT_SQLSTATE_CLASSES
        cause = cause.__cause__
    return False


def _complete(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """Every column present (absent ones None): one executemany needs uniform rows,
    and a short row mixed into a batch must never block the rows around it."""
    columns = TABLES[table].columns
    out = {c.name: row.get(c.name) for c in columns if c.name != "id"}
    for c in columns:
        if out.get(c.name) is None and c.default is not None and c.name != "id":
            out[c.name] = getattr(c.default, "arg", None)
    return out


class Recorder:
    """Batches rows per table and flushes them to the database in the background."""

    def __init__(
        self,
        engine: AsyncEngine | None,
        spool_path: str | Path | None = None,
        *,
        flush_interval: float = 0.5,
        max_spool_bytes: int = 256 * 1024 * 1024,
        prepare: Callable[[AsyncEngine], Awaitable[Any]] | None = None,
    ) -> None:
        self.engine = engine
        self.prepare = prepare
        #: set once the schema is known current (start-up migrated, or prepare ran)
        self.schema_ready = prepare is None
        self.spool_path = Path(spool_path) if spool_path else None
        self.flush_interval = flush_interval
        self.max_spool_bytes = max_spool_bytes
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.written = 0
        self.dropped = 0
        self.rejected = 0
        self.db_healthy = True

    def record(self, table: str, row: dict[str, Any]) -> None:
        """Queue one row. Never blocks, never raises."""
        self._pending.append((table, row))

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            await self.flush()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()

    async def flush(self) -> None:
        """Write the spool (if any) then the pending batch; spool on failure."""
        async with self._lock:
            batch, self._pending = self._pending, []
            if self.engine is None:
                self.written += len(batch)
                return
            spooled = self._read_spool()
            rows = spooled + batch
            if not rows:
                return
            try:
                if not self.schema_ready:
                    assert self.prepare is not None
                    await self.prepare(self.engine)
                    self.schema_ready = True
                try:
                    await self._write(rows)
                except RejectedForGood:
                    # One bad row (e.g. a value the column cannot hold) must not block
                    # the rest: write row by row and set aside only what is refused.
                    # (An outage in the middle of that re-spools the batch: rows may
                    # then be written twice, never lost.)
                    rows = await self._write_each(rows)
            except Exception as err:  # noqa: BLE001 - any other DB failure: spool and retry
                if self.db_healthy:
                    log.warning(
                        "database unavailable, spooling rows",
                        extra={"error": type(err).__name__, "detail": _detail(err)},
                    )
                self.db_healthy = False
                self._append_spool(batch)
                return
            if spooled:
                self._clear_spool()
            if not self.db_healthy:
                log.info("database back, spool drained", extra={"rows": len(spooled)})
            self.db_healthy = True
            self.written += len(rows)

    async def _write_each(
        self, rows: list[tuple[str, dict[str, Any]]]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Write rows one at a time; rows the database refuses for good go to the
        rejected file (kept, never retried). Returns the rows written."""
        written = []
        for item in rows:
            try:
                await self._write([item])
            except RejectedForGood as err:
                self.rejected += 1
                log.error(
                    "row rejected by the database",
                    extra={"table": item[0], "error": type(err).__name__},
                )
                self._append_file(self._rejected_path(), [item])
                continue
            written.append(item)
        return written

    def _rejected_path(self) -> Path | None:
        if self.spool_path is None:
            return None
        return self.spool_path.with_name(self.spool_path.name + ".rejected")

    async def _write(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        assert self.engine is not None
        grouped: dict[str, list[dict[str, Any]]] = {}
        for table, row in rows:
            grouped.setdefault(table, []).append(_complete(table, row))
        try:
            async with self.engine.begin() as conn:
                for table, items in grouped.items():
                    await conn.execute(TABLES[table].insert(), items)
        except Exception as err:
            if _is_rejected_for_good(err):
                raise RejectedForGood(type(err).__name__) from err
            raise

    # ---- the on-disk spool ---------------------------------------------------

    def _append_spool(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        if not rows:
            return
        if self.spool_path is None:
            self._pending[:0] = rows  # keep in memory, bounded below
            if len(self._pending) > 100_000:
                self.dropped += len(self._pending) - 100_000
                del self._pending[:-100_000]
            return
        size = self.spool_path.stat().st_size if self.spool_path.exists() else 0
        if size > self.max_spool_bytes:
            self.dropped += len(rows)
            log.error("spool full, dropping rows", extra={"rows": len(rows)})
            return
        self._append_file(self.spool_path, rows)

    @staticmethod
    def _append_file(path: Path | None, rows: list[tuple[str, dict[str, Any]]]) -> None:
        """Append rows as JSON lines and fsync (the spool's kill -9 guarantee)."""
        if path is None:
            return
        with path.open("ab") as f:
            for table, row in rows:
                f.write(orjson.dumps({"t": table, "r": row}) + b"\n")
            f.flush()
            os.fsync(f.fileno())

    def _read_spool(self) -> list[tuple[str, dict[str, Any]]]:
        if self.spool_path is None or not self.spool_path.exists():
            return []
        out = []
        for line in self.spool_path.read_bytes().splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                item = orjson.loads(line)
                out.append((item["t"], item["r"]))
        return out

    def _clear_spool(self) -> None:
        if self.spool_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.spool_path.unlink()
