"""Usage and audit rows written off the hot path, and never lost on a DB outage.

Requests append rows to an in-memory batch; a background task flushes batches
to the database. If the database is unreachable the batch is appended to a
bounded on-disk spool (JSON lines) that is replayed, in order, once the
database answers again. A process killed with -9 loses at most the rows of
one flush interval (default 0.5 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncEngine

from tiergate.db import audit_table, usage_table

log = logging.getLogger(__name__)

TABLES = {"usage": usage_table, "audit": audit_table}


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
    ) -> None:
        self.engine = engine
        self.spool_path = Path(spool_path) if spool_path else None
        self.flush_interval = flush_interval
        self.max_spool_bytes = max_spool_bytes
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.written = 0
        self.dropped = 0
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
                await self._write(rows)
            except Exception as err:  # noqa: BLE001 - any DB failure means spool and retry
                if self.db_healthy:
                    log.warning(
                        "database unavailable, spooling rows", extra={"error": type(err).__name__}
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

    async def _write(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        assert self.engine is not None
        grouped: dict[str, list[dict[str, Any]]] = {}
        for table, row in rows:
            grouped.setdefault(table, []).append(_complete(table, row))
        async with self.engine.begin() as conn:
            for table, items in grouped.items():
                await conn.execute(TABLES[table].insert(), items)

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
        with self.spool_path.open("ab") as f:
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
