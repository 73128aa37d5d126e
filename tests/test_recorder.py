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
