"""`tiergate db migrate` on a database an older release created: the usage table
without `virtual_key` gets the column (and its index), old rows intact, on
SQLite and on the real PostgreSQL; idempotent; `--check` reports what is
missing; a gateway that cannot migrate refuses to start with the operator's
next step, and the recorder migrates before writing after an outage."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import yaml
from sqlalchemy import inspect, text

from admin_support import database
from db_support import OLD_ROWS, create_old_database, old_metadata
from servers import TOKEN, free_port
from tiergate import db
from tiergate.db_migrations import MIGRATIONS
from tiergate.recorder import Recorder

TIERGATE = [sys.executable, "-m", "tiergate"]


def url_of(kind: str, where: str) -> str:
    return where if "://" in where else f"sqlite:///{where}"


@contextlib.contextmanager
def old_database(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database URL holding the old schema and OLD_ROWS."""
    pg = request.getfixturevalue("postgres_url") if kind == "postgresql" else None
    with database(kind, tmp_path, pg) as where:
        url = url_of(kind, where)

        create_old_database(url)
        yield url


async def _schema(url: str) -> tuple[set[str], set[str], list[dict[str, Any]]]:
    engine = db.make_engine(url)
    async with engine.connect() as conn:
        cols = await conn.run_sync(lambda c: {x["name"] for x in inspect(c).get_columns("usage")})
        idx = await conn.run_sync(lambda c: {x["name"] for x in inspect(c).get_indexes("usage")})
        rows = [
            dict(r._mapping) for r in await conn.execute(text("SELECT * FROM usage ORDER BY id"))
        ]
    await engine.dispose()
    return cols, {str(i) for i in idx}, rows


def migrate_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TIERGATE, "db", "migrate", *args], capture_output=True, text=True, timeout=60
    )


def test_every_step_adds_a_nullable_column_the_metadata_defines() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    for m in MIGRATIONS:
        column = db.metadata.tables[m.table].c[m.column]
        assert column.nullable, m.label  # existing rows get NULL
        assert m.index is None or m.index in {i.name for i in column.table.indexes}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_migrate_adds_the_key_column_to_an_old_usage_table(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with old_database(kind, tmp_path, request) as url:
        before, _, _ = asyncio.run(_schema(url))
        assert "virtual_key" not in before

        check = migrate_cli("--url", url, "--check")
        assert check.returncode == 1 and "pending 1: usage.virtual_key" in check.stdout

        out = migrate_cli("--url", url)
        assert out.returncode == 0, out.stderr
        assert "added 1: usage.virtual_key" in out.stdout
        cols, indexes, rows = asyncio.run(_schema(url))
        assert cols == before | {"virtual_key"}
        assert "ix_usage_virtual_key_ts" in indexes
        assert [r["request_id"] for r in rows] == [r["request_id"] for r in OLD_ROWS]
        assert [r["input_tokens"] for r in rows] == [100, 101, 102]
        assert all(r["virtual_key"] is None for r in rows)

        again = migrate_cli("--url", url)  # idempotent: nothing more to add
        assert again.returncode == 0 and "added" not in again.stdout
        assert migrate_cli("--url", url, "--check").stdout.strip().endswith("up to date")
        assert asyncio.run(_schema(url))[2] == rows


def test_a_fresh_database_gets_the_current_schema_directly(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    out = migrate_cli("--url", url)
    assert out.returncode == 0 and "added" not in out.stdout  # created whole, not altered
    cols, indexes, _ = asyncio.run(_schema(url))
    assert "virtual_key" in cols and "ix_usage_virtual_key_ts" in indexes


def test_two_instances_migrating_one_sqlite_file_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"

    async def race() -> list[Any]:
        engine = db.make_engine(url)
        async with engine.begin() as conn:
            await conn.run_sync(old_metadata().create_all)
        others = [db.make_engine(url) for _ in range(3)]
        done = await asyncio.gather(*(db.migrate(e) for e in others), return_exceptions=True)
        for e in [engine, *others]:
            await e.dispose()
        return done

    results = asyncio.run(race())
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert sum(len(r) for r in results) == 1  # exactly one of them added the column
    assert "virtual_key" in asyncio.run(_schema(url))[0]


def test_the_recorder_migrates_before_writing_when_start_up_could_not(tmp_path: Path) -> None:
    """A gateway that started while the database was down later finds an old table:
    its rows (which carry virtual_key) must land, not be refused."""
    url = f"sqlite:///{tmp_path / 'late.db'}"

    async def run() -> None:
        engine = db.make_engine(url)
        async with engine.begin() as conn:
            await conn.run_sync(old_metadata().create_all)
        recorder = Recorder(engine, tmp_path / "spool.jsonl", prepare=db.ensure_schema)
        recorder.record("usage", {**OLD_ROWS[0], "request_id": "new", "virtual_key": "vk_1"})
        await recorder.flush()
        assert recorder.rejected == 0 and recorder.written == 1
        await engine.dispose()

    asyncio.run(run())
    rows = asyncio.run(_schema(url))[2]
    assert [(r["request_id"], r["virtual_key"]) for r in rows] == [("new", "vk_1")]


# ---- a database the gateway may not alter ----------------------------------------------


@contextlib.contextmanager
def role_without_alter(url: str) -> Iterator[str]:
    """A PostgreSQL login that may read and write the tables but not ALTER them
    (it does not own them), as a locked-down production role would."""
    role = f"tg_rw_{uuid.uuid4().hex[:10]}"
    parts = urlsplit(url)
    plain = urlunsplit(parts._replace(scheme="postgresql"))

    async def run(*sql: str) -> None:
        conn = await asyncpg.connect(plain)
        try:
            for statement in sql:
                await conn.execute(statement)
        finally:
            await conn.close()

    on_everything = "ALL TABLES IN SCHEMA public", "ALL SEQUENCES IN SCHEMA public"
    asyncio.run(
        run(
            f"CREATE ROLE {role} LOGIN",
            f"GRANT USAGE ON SCHEMA public TO {role}",
            f"GRANT SELECT, INSERT, UPDATE ON {on_everything[0]} TO {role}",
            f"GRANT USAGE ON {on_everything[1]} TO {role}",
        )
    )
    try:
        yield urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}"))
    finally:
        asyncio.run(
            run(
                *(f"REVOKE ALL ON {what} FROM {role}" for what in on_everything),
                f"REVOKE ALL ON SCHEMA public FROM {role}",
                f"DROP ROLE {role}",
            )
        )


def test_a_gateway_that_cannot_migrate_refuses_to_start_and_says_why(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with old_database("postgresql", tmp_path, request) as url, role_without_alter(url) as limited:
        config = tmp_path / "gw.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "database": {"url": limited},
                    "workspaces": [{"name": "default", "tokens": [TOKEN]}],
                    "channels": [
                        {
                            "name": "oa",
                            "type": "openai",
                            "base_url": "http://127.0.0.1:9/v1",
                            "keys": ["sk-x"],
                            "models": {"openai/gpt-5-mini": {"upstream": "gpt-5-mini"}},
                        }
                    ],
                }
            )
        )
        proc = subprocess.run(
            [*TIERGATE, "serve", "--config", str(config), "--port", str(free_port())],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode != 0
        said = proc.stdout + proc.stderr
        assert "lacks 1: usage.virtual_key" in said and "tiergate db migrate" in said
        # nothing was altered or lost; the owner's migrate then fixes it
        cols, _, rows = asyncio.run(_schema(url))
        assert "virtual_key" not in cols and len(rows) == len(OLD_ROWS)
        assert migrate_cli("--url", url).returncode == 0
        assert "virtual_key" in asyncio.run(_schema(url))[0]


def test_schema_check_reads_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ro.db'}"

    async def run() -> list[str]:
        engine = db.make_engine(url)
        async with engine.begin() as conn:
            await conn.run_sync(old_metadata().create_all)
        missing = await db.pending_migrations(engine)
        async with engine.connect() as conn:
            cols = (await conn.execute(text("PRAGMA table_info(usage)"))).fetchall()
        await engine.dispose()
        assert "virtual_key" not in {c[1] for c in cols}
        return missing

    assert asyncio.run(run()) == ["1: usage.virtual_key"]
