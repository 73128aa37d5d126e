"""The database as an older release left it, for migration tests: the tables
without the columns tiergate.db_migrations adds, and a few rows in them."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import MetaData, Table

from tiergate import db
from tiergate.db_migrations import MIGRATIONS

OLD_ROWS: list[dict[str, Any]] = [
    {"request_id": f"old-{i}", "ts": 1_700_000_000.0 + i, "workspace": "default",
     "router": "coding", "model": "openai/gpt-5-mini", "status": 200, "stream": 0,
     "input_tokens": 100 + i, "cache_read_tokens": 0, "cache_write_tokens": 0,
     "output_tokens": 7, "cost_usd": 0.001, "uncached_cost_usd": 0.001,
     "latency_ms": 12.0, "attempts": 1}
    for i in range(3)
]  # fmt: skip


def old_metadata() -> MetaData:
    """The tables as the release before migration 1 created them: the usage table
    without `virtual_key` (and without its index); the others as they are."""
    old = MetaData()
    for table in db.metadata.tables.values():
        added = {m.column for m in MIGRATIONS if m.table == table.name}
        Table(table.name, old, *(c._copy() for c in table.columns if c.name not in added))
    return old


def create_old_database(url: str, rows: list[dict[str, Any]] = OLD_ROWS) -> None:
    """Create the old schema at `url` and insert `rows` into its usage table."""

    async def build() -> None:
        engine = db.make_engine(url)
        old = old_metadata()
        async with engine.begin() as conn:
            await conn.run_sync(old.create_all)
            if rows:
                await conn.execute(old.tables["usage"].insert(), rows)
        await engine.dispose()

    asyncio.run(build())
