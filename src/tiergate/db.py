"""Usage, audit, config-version, shadow-label and feedback tables, on SQLite
(default) or PostgreSQL (by URL).

Rows hold identifiers, token counts, money and decision evidence — never
prompt or completion text. Tables are created by `tiergate db migrate` and,
for convenience, at gateway start-up (idempotent CREATE IF NOT EXISTS).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
)
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

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


def async_url(url: str) -> str:
    """Map a plain database URL to its asyncio driver."""
    if url.startswith("sqlite:///"):
        return "sqlite+aiosqlite:///" + url[len("sqlite:///") :]
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+asyncpg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str) -> AsyncEngine:
    return create_async_engine(async_url(url), pool_pre_ping=True)


async def migrate(engine: AsyncEngine) -> None:
    """Create the usage and audit tables if missing (additive, idempotent)."""
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
