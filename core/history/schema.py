"""The history database's schema: versioned migrations, then one runs column per headline figure.

Migrations are append-only: migration i takes `PRAGMA user_version` from i to i + 1.
The headline-figure columns are not migrations: after them, `add_figure_columns`
gives the runs table a column for every `core.results.FIGURES` entry it lacks
(filled from each run's stored result), so a new figure on `RunResult` needs no
migration and a database from any earlier Device Lab keeps its runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from core.results import FIGURES


class NewerSchemaError(RuntimeError):
    """The database was written by a newer Device Lab, with a schema this one does not know."""


class UnreadableSchemaError(RuntimeError):
    """A read-only database lacks columns this Device Lab reads, and can not be upgraded."""


def _schema_v1(conn: sqlite3.Connection) -> None:
    """Runs with their headline figures as columns (for listing), the rest as JSON; series in chunks."""
    conn.execute(
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            started_at TEXT NOT NULL,
            label TEXT NOT NULL DEFAULT '',
            run_group TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL,
            message TEXT NOT NULL DEFAULT '',
            model TEXT, dataset TEXT, strategy TEXT,
            devices TEXT NOT NULL DEFAULT '',
            replicas INTEGER, batch_size INTEGER,
            steps INTEGER NOT NULL DEFAULT 0,
            warmup_steps INTEGER NOT NULL DEFAULT 0,
            samples_per_s REAL, step_time_median_ms REAL, step_time_p95_ms REAL,
            warmup_s REAL, final_loss REAL,
            result TEXT NOT NULL)"""
    )
    conn.execute(
        """CREATE TABLE steps (
            run_id INTEGER NOT NULL, seq INTEGER NOT NULL,
            losses BLOB NOT NULL, times BLOB NOT NULL,
            PRIMARY KEY (run_id, seq))"""
    )


def _schema_v2(conn: sqlite3.Connection) -> None:
    """Indexes for the History panel's default sort and its model/status filters."""
    conn.execute("CREATE INDEX runs_started_at ON runs (started_at)")
    conn.execute("CREATE INDEX runs_model ON runs (model, started_at)")
    conn.execute("CREATE INDEX runs_status ON runs (status)")


def _schema_v3(conn: sqlite3.Connection) -> None:
    """The process recording a running run ("<pid>@<start time>", `core.history.owners`); "" once it ended."""
    if "owner" not in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}:
        conn.execute("ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT ''")


def _schema_v4(conn: sqlite3.Connection) -> None:
    """The conditions each run was measured in (`core.machine.conditions`), as JSON; filled from older runs' results ({} if none)."""
    if "conditions" not in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}:
        conn.execute("ALTER TABLE runs ADD COLUMN conditions TEXT NOT NULL DEFAULT '{}'")
        conn.execute(
            "UPDATE runs SET conditions = json(json_extract(result, '$.conditions')) "
            "WHERE json_valid(result) AND json_type(result, '$.conditions') = 'object'"
        )


# Applied in order; migration i takes the schema from user_version i to i + 1. Append only.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_schema_v1, _schema_v2, _schema_v3, _schema_v4)


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to the latest version (one migration per transaction), then add missing figure columns."""
    while True:
        with transaction(conn, "BEGIN IMMEDIATE"):
            version = _version(conn)
            if version == len(MIGRATIONS):
                break
            MIGRATIONS[version](conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
    with transaction(conn, "BEGIN IMMEDIATE"):
        add_figure_columns(conn)


def check_readable(conn: sqlite3.Connection) -> None:
    """For a database that can not be written (so not migrated): raise unless this Device Lab can read it as it is.

    An older schema reads fine while it has every figure column (the later
    migrations add nothing the listing needs).
    """
    _version(conn)
    present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    missing = [figure.name for figure in FIGURES if figure.name not in present]
    if not present or missing:
        raise UnreadableSchemaError(
            f"The run history is from an older Device Lab and lacks {', '.join(missing) or 'its tables'}; "
            "it can not be upgraded because it is read-only."
        )


def _version(conn: sqlite3.Connection) -> int:
    """The schema version; NewerSchemaError when it is newer than this Device Lab knows."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > len(MIGRATIONS):
        raise NewerSchemaError(
            f"The run history was written by a newer Device Lab (schema {version}; this one reads up to {len(MIGRATIONS)})."
        )
    return version


def add_figure_columns(conn: sqlite3.Connection) -> None:
    """Give the runs table a column for each figure it lacks, filled from the stored results.

    A run stored before its figure had a column keeps that figure in its JSON result,
    so the new column is filled from there (None where the result never had it).
    """
    present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    added = [figure for figure in FIGURES if figure.name not in present]
    for figure in added:
        column = quote(figure.name)
        conn.execute(f"ALTER TABLE runs ADD COLUMN {column} {figure.sql_type}")
        conn.execute(f"UPDATE runs SET {column} = json_extract(result, ?)", (f'$."{figure.name}"',))


def quote(name: str) -> str:
    """A column name as a quoted SQL identifier; only plain identifiers (figure names are attribute names) pass."""
    if not name.isidentifier():
        raise ValueError(f"Not a column name: {name!r}")
    return f'"{name}"'


@contextmanager
def transaction(conn: sqlite3.Connection, begin: str) -> Iterator[None]:
    """`begin` ... COMMIT, rolled back if the body raises (the connection is in autocommit mode)."""
    conn.execute(begin)
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
