"""The recorder writes every row, whatever columns each one carries."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from tiergate import db
from tiergate.recorder import Recorder


async def test_rows_with_different_columns_in_one_batch_are_all_written(tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'u.db'}")
    await db.migrate(engine)
    rec = Recorder(engine)
    rec.record(
        "usage",
        {
            "request_id": "a",
            "ts": 1.0,
            "workspace": "w",
            "status": 200,
            "input_tokens": 5,
            "cost_usd": 0.1,
            "model": "m",
        },
    )
    rec.record(
        "usage",
        {"request_id": "b", "ts": 2.0, "workspace": "w", "status": 502, "error_type": "status"},
    )
    rec.record("audit", {"ts": 3.0, "event": "escalated", "router": "r"})
    await rec.flush()
    async with engine.connect() as conn:
        usage = (await conn.execute(text("SELECT request_id, input_tokens FROM usage"))).all()
        audit = (await conn.execute(text("SELECT count(*) FROM audit_events"))).scalar()
    assert sorted(usage) == [("a", 5), ("b", 0)]
    assert audit == 1
    await engine.dispose()


async def test_a_row_the_database_refuses_does_not_block_the_others(
    postgres_url: str, tmp_path: Path
) -> None:
    """On PostgreSQL a 200-character router name does not fit its column: that row
    is set aside in the rejected file and every other row is still written."""
    import uuid

    import asyncpg

    name = f"tg_rec_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(postgres_url)
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        engine = db.make_engine(postgres_url.rsplit("/", 1)[0] + f"/{name}")
        await db.migrate(engine)
        rec = Recorder(engine, tmp_path / "spool.jsonl")
        rec.record(
            "usage",
            {"request_id": "bad", "ts": 1.0, "workspace": "w", "status": 200, "router": "r" * 200},
        )
        for i in range(5):
            rec.record(
                "usage", {"request_id": f"ok{i}", "ts": 2.0, "workspace": "w", "status": 200}
            )
        await rec.flush()
        rec.record("usage", {"request_id": "later", "ts": 3.0, "workspace": "w", "status": 200})
        await rec.flush()
        async with engine.connect() as conn:
            ids = (await conn.execute(text("SELECT request_id FROM usage"))).scalars().all()
        assert sorted(ids) == ["later", "ok0", "ok1", "ok2", "ok3", "ok4"]
        assert rec.rejected == 1 and rec.db_healthy
        assert (tmp_path / "spool.jsonl.rejected").read_text().count("\n") == 1
        assert not (tmp_path / "spool.jsonl").exists()
        await engine.dispose()
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
