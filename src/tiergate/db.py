"""Usage, audit, config-version, shadow-label, feedback and session-outcome tables, on SQLite
(default) or PostgreSQL (by URL).

Rows hold identifiers, token counts, money and decision evidence — never
prompt or completion text. Tables are created, and columns added to tables an
older release created, by `tiergate db migrate` and, for convenience, at
gateway start-up (idempotent and additive only: tiergate.db_migrations).
"""

from __future__ import annotations

import asyncio

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
)
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tiergate import db_migrations

metadata = MetaData()

usage_table = Table(
    "usage",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("request_id", String(64), nullable=False, index=True),
    Column("ts", Float, nullable=False, index=True),
    Column("workspace", String(128), nullable=False),
    Column("router", String(128)),
    Column("model", String(256)),
    Column("channel", String(128)),
    Column("key_index", Integer),
    Column("tier", String(16)),
    Column("status", Integer, nullable=False),
    Column("stream", Integer, nullable=False, default=0),
    Column("input_tokens", Integer, nullable=False, default=0),
    Column("cache_read_tokens", Integer, nullable=False, default=0),
    Column("cache_write_tokens", Integer, nullable=False, default=0),
    Column("output_tokens", Integer, nullable=False, default=0),
    Column("cost_usd", Float, nullable=False, default=0.0),
    Column("uncached_cost_usd", Float, nullable=False, default=0.0),
    Column("latency_ms", Float, nullable=False, default=0.0),
    Column("attempts", Integer, nullable=False, default=1),
    Column("session_hash", String(64)),
    Column("error_type", String(64)),
    #: the virtual key's public id (vk_...), never its token or hash; None for the
    #: YAML tokens. Added by migration 1 (tiergate.db_migrations).
    Column("virtual_key", String(64)),
    Index("ix_usage_virtual_key_ts", "virtual_key", "ts"),
)

audit_table = Table(
    "audit_events",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("ts", Float, nullable=False, index=True),
    Column("event", String(32), nullable=False, index=True),
    Column("workspace", String(128)),
    Column("router", String(128), index=True),
    Column("session_hash", String(64)),
    Column("request_id", String(64)),
    Column("trigger", String(64)),
    Column("detail", JSON),
)

#: Every version of the shared config (admin API changes and YAML seeds), newest
#: wins. `document` is the config before ${VAR} expansion, without the
#: instance-local sections (server, state, database); see tiergate.config_store.
config_versions_table = Table(
    "config_versions",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("ts", Float, nullable=False),
    Column("source", String(16), nullable=False),  # seed | admin
    Column("seed_hash", String(64), nullable=False, index=True),
    Column("actor", String(128)),
    Column("change", JSON),
    Column("document", JSON, nullable=False),
)

#: Virtual keys, apart from the config document so that no YAML seed can delete
#: them (tiergate.virtual_keys_store). `token_hash` is HMAC-SHA256 under the
#: server secret of the token's SHA-256 (tiergate.server_secret), never the token;
#: `seq` is the keys counter value of the row's last write.
virtual_keys_table = Table(
    "virtual_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("workspace", String(128), nullable=False),
    Column("name", String(128), nullable=False, default=""),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False, default=""),
    Column("created", Float, nullable=False),
    Column("revoked", Float),
    Column("rate_limit_rpm", Integer),
    Column("budget_usd_per_day", Float),
    Column("budget_usd_per_month", Float),
    Column("seq", BigInteger, nullable=False, index=True),
)

#: Small named values: the virtual keys counter every instance polls, and the
#: server secret's check value (a mismatch is reported at start-up).
meta_table = Table(
    "tiergate_meta",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", String(200)),
    Column("counter", BigInteger, nullable=False, default=0),
)

#: Operator verdicts on shadow escalation decisions (audit_events kind "shadow").
shadow_labels_table = Table(
    "shadow_labels",
    metadata,
    Column("audit_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("router", String(128), nullable=False, index=True),
    Column("event_ts", Float, nullable=False, index=True),
    Column("correct", Boolean, nullable=False),
    Column("hard_turns_before", Integer),
    Column("note", String(500)),
    Column("actor", String(128)),
    Column("ts", Float, nullable=False),
)

#: Client verdicts on served requests (POST /v1/feedback), by X-Orca-Request-Id.
feedback_table = Table(
    "feedback",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("request_id", String(64), nullable=False, index=True),
    Column("workspace", String(128), nullable=False),
    Column("score", Float, nullable=False),
    Column("credited", Boolean, nullable=False, default=False),
    Column("ts", Float, nullable=False, index=True),
)


#: Operator-reported session outcomes (POST /v1/outcomes), for the dashboard's
#: counterfactual escalation value: r (did the agent resolve its task?) and,
#: when known, p (the strong model's odds on it). `task` is the operator's key
#: of the task (a ticket, a benchmark instance), never its text.
session_outcomes_table = Table(
    "session_outcomes",
    metadata,
    Column("session_hash", String(64), primary_key=True),
    Column("workspace", String(128), nullable=False, index=True),
    Column("resolved", Float, nullable=False),
    Column("strong_odds", Float),
    Column("task", String(200)),
    Column("ts", Float, nullable=False, index=True),
)


def async_url(url: str) -> str:
    """Map a plain database URL to its asyncio driver."""
    if url.startswith("sqlite:///"):
        return "sqlite+aiosqlite:///" + url[len("sqlite:///") :]
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+asyncpg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str) -> AsyncEngine:
    return create_async_engine(async_url(url), pool_pre_ping=True)


async def migrate(engine: AsyncEngine, attempts: int = 3) -> list[str]:
    """Create missing tables, then add the columns older releases lack (additive,
    idempotent). Returns what was added, e.g. ["1: usage.virtual_key"].

    Retried on SQLite: two instances starting at once on one file can collide on
    the write lock; the retry re-reads the schema and finds the work done. (On
    PostgreSQL the steps are guarded by IF NOT EXISTS, and a retry would only
    multiply the wait on an unreachable server.)"""
    if engine.dialect.name != "sqlite":
        attempts = 1
    for attempt in range(attempts):
        try:
            async with engine.begin() as conn:
                await conn.run_sync(metadata.create_all)
                return await conn.run_sync(db_migrations.apply_all, metadata)
        except Exception:
            if attempt + 1 >= attempts:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


async def pending_migrations(engine: AsyncEngine) -> list[str]:
    """The additive migrations this database still lacks (reads only)."""
    async with engine.connect() as conn:
        return await conn.run_sync(db_migrations.pending, metadata)


class SchemaOutdated(RuntimeError):
    """The database answers but lacks columns this release writes, and the
    additive migration could not be applied (e.g. a role without ALTER)."""


async def ensure_schema(engine: AsyncEngine) -> list[str]:
    """Migrate before rows are written (start-up, and the recorder after an outage).

    Raises SchemaOutdated, with the operator's next step, when the database is
    reachable but stays behind; re-raises the original error when it is not
    reachable at all (the recorder's outage path: rows spool until it answers).
    """
    try:
        return await migrate(engine)
    except Exception as err:
        try:
            missing = await pending_migrations(engine)
        except Exception:  # noqa: BLE001 - not reachable at all: the first error says so
            raise err from None
        if not missing:  # e.g. another instance migrated at the same moment
            return []
        raise SchemaOutdated(
            f"The database at {_shown_url(engine)} lacks {', '.join(missing)} and could not "
            f"be migrated ({type(err).__name__}). Run `tiergate db migrate --config FILE` "
            "with a database role allowed to CREATE and ALTER tables, then start again."
        ) from err


def _shown_url(engine: AsyncEngine) -> str:
    """The database's host and name for messages, never its password."""
    return engine.url.render_as_string(hide_password=True)
