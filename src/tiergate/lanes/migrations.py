"""The additive `session_tiers` migration for the SQLite lane store.

Applied by `tiergate db migrate` (call `migrate(path)`), never during a
request: the store opens the database read-write without create, so a missing
file or table surfaces as 503 session_tier_storage_unavailable instead of a
silently fresh, empty lane table. Idempotent and additive (CREATE ... IF NOT
EXISTS only), so it is safe to run against a database already in use.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

TABLE = "session_tiers"

#: One row per live lane. Identities are hashes; no column can hold prompt,
#: response, tool-argument or result text.
SESSION_TIERS_DDL = (
    """
    CREATE TABLE IF NOT EXISTS session_tiers (
        scope TEXT PRIMARY KEY,              -- hash(kind, principal, session, lane)
        lane TEXT NOT NULL,                  -- main | delegation | aux
        approved_model TEXT NOT NULL,        -- approved route id
        approved_tier INTEGER NOT NULL,
        actual_route TEXT,                   -- route that last served (maybe a fallback)
        revision TEXT NOT NULL,              -- hash of the policy revision
        expires_at REAL NOT NULL,            -- idle expiry, epoch seconds
        generation INTEGER NOT NULL,         -- completed turns
        completed_user_turns INTEGER NOT NULL,
        last_turn_ok INTEGER NOT NULL,
        tools_unknown INTEGER NOT NULL,
        outstanding TEXT NOT NULL,           -- space-separated hashed tool-call ids
        lease_id TEXT,
        lease_expires_at REAL,
        completed_turn TEXT,                 -- hash of the last completed user turn
        lease_owner TEXT,                    -- "<instance>/<request id>" holding the lease
        etag TEXT NOT NULL                   -- compare-and-swap version tag
    )
    """,
    "CREATE INDEX IF NOT EXISTS session_tiers_expires_at ON session_tiers (expires_at)",
)


#: Columns added after the first release, for tables created before them.
ADDED_COLUMNS = (("completed_turn", "TEXT"), ("lease_owner", "TEXT"))


def sqlite_path(url_or_path: str) -> str:
    """Accept a plain path or a `sqlite:///path` URL."""
    return url_or_path[len("sqlite:///") :] if url_or_path.startswith("sqlite:///") else url_or_path


def migrate(path: str | Path) -> None:
    """Create the session_tiers table and index if missing (and the file if new)."""
    conn = sqlite3.connect(sqlite_path(str(path)), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")  # persistent: readers never block the writer
        conn.execute("BEGIN IMMEDIATE")
        for statement in SESSION_TIERS_DDL:
            conn.execute(statement)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(session_tiers)")}
        for name, kind in ADDED_COLUMNS:
            if name not in columns:  # a table from an older release: add, never rewrite
                conn.execute(f"ALTER TABLE session_tiers ADD COLUMN {name} {kind}")
        conn.execute("COMMIT")
    finally:
        conn.close()
