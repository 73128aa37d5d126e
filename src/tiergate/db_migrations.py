"""Additive schema migrations: columns added to tables an older release created.

`metadata.create_all` creates missing tables but never touches an existing
one, so a column added to a table after its first release needs an explicit
step. Each step here is numbered, names one nullable column (and the index
that serves it), and is detected by introspection: a database is at version N
when it has the columns of steps 1..N. Nothing is ever dropped, renamed or
rewritten, so running the steps on a database in use, twice, or from two
instances at once is safe; rows written by an older release (without the
column) stay valid and read as NULL there.

Applied by `tiergate db migrate` and at gateway start-up (tiergate.db.migrate).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, MetaData, inspect
from sqlalchemy.schema import CreateIndex


@dataclass(frozen=True, slots=True)
class AddColumn:
    """One additive step: `table.column` as the metadata defines it (nullable)."""

    version: int
    table: str
    column: str
    index: str | None = None  # an index of the table's metadata to create with it

    @property
    def label(self) -> str:
        return f"{self.version}: {self.table}.{self.column}"


#: In order; append only. A step's column must be nullable (or have a server
#: default): existing rows get NULL, and NOT NULL would refuse them.
MIGRATIONS: tuple[AddColumn, ...] = (
    AddColumn(1, "usage", "virtual_key", index="ix_usage_virtual_key_ts"),
)


def _columns(conn: Connection, table: str) -> set[str] | None:
    """The table's column names, or None if the table does not exist."""
    insp = inspect(conn)
    if not insp.has_table(table):
        return None
    return {c["name"] for c in insp.get_columns(table)}


def _indexes(conn: Connection, table: str) -> set[str]:
    return {str(i["name"]) for i in inspect(conn).get_indexes(table)}


def pending(conn: Connection, metadata: MetaData) -> list[str]:
    """What this database lacks: missing tables, then the steps not yet applied."""
    missing = [f"table {name}" for name in metadata.tables if _columns(conn, name) is None]
    for step in MIGRATIONS:
        cols = _columns(conn, step.table)
        if cols is not None and step.column not in cols:
            missing.append(step.label)
    return missing


def apply_all(conn: Connection, metadata: MetaData) -> list[str]:
    """Apply every step the database lacks, in order, inside the caller's
    transaction (after create_all). Returns the labels of the steps applied."""
    applied = []
    for step in MIGRATIONS:
        cols = _columns(conn, step.table)
        if cols is None:  # create_all runs first; a missing table has nothing to migrate
            continue
        table = metadata.tables[step.table]
        if step.column not in cols:
            column = table.c[step.column]
            if not column.nullable and column.server_default is None:
                raise ValueError(f"migration {step.label}: an added column must be nullable")
            prep = conn.dialect.identifier_preparer
            # PostgreSQL: IF NOT EXISTS makes a concurrent instance's identical step
            # a no-op once it holds the table lock (SQLite lacks the clause; there
            # the write lock serialises instances and a retry re-reads the columns).
            guard = "IF NOT EXISTS " if conn.dialect.name == "postgresql" else ""
            conn.exec_driver_sql(
                f"ALTER TABLE {prep.format_table(table)} ADD COLUMN {guard}"
                f"{prep.format_column(column)} {column.type.compile(dialect=conn.dialect)}"
            )
            applied.append(step.label)
        if step.index is not None and step.index not in _indexes(conn, step.table):
            # On a large PostgreSQL table the build holds writes while it runs
            # (docs/deploy.md: migrate off-peak); later runs skip it.
            index = next(i for i in table.indexes if i.name == step.index)
            conn.execute(CreateIndex(index, if_not_exists=True))
    return applied
