"""The history's SQLite file: opening it (writable, read-only, or damaged and moved aside), its schema, its step series.

Only damage is a reason to move a file aside: SQLite saying the file is corrupt
or not a database, or `PRAGMA quick_check` finding a problem. A file that cannot
be written (read-only file or folder, a read-only mount, an immutable file) is
opened read-only instead and left byte-for-byte as it is; a busy file, a full
disk or a missing permission is reported, never taken for damage.

A full disk is said as such, with the space left (`problem`): SQLite reports it
as "database or disk is full" or, when the -shm file cannot grow, as a "disk I/O
error". An existing history on a full disk opens read-only (its runs are listed);
a new one that does not fit is removed again, so the next command finds no half-made
file. Opening never waits for another process's write lock: the schema is read
first and locked only when it needs a migration (`migrate`).

A history file that is not a regular file (a folder, a device, a named pipe) is
refused with a StoreError before SQLite sees it, and left as it is.

The schema: versioned migrations, then one runs column per headline figure.
Migrations are append-only: migration i takes `PRAGMA user_version` from i to
i + 1. The headline-figure columns are not migrations: after them,
`add_figure_columns` gives the runs table a column for every
`core.results.FIGURES` entry it lacks (filled from each run's stored result), so
a new figure on `RunResult` needs no migration and a database from any earlier
Device Lab keeps its runs.

Step series are rows of `steps`: losses and step times as packed little-endian
float64 chunks, one row per appended batch and at most `CHUNK_STEPS` steps a row.
A million steps save or load in about 0.1 s (a million-row table read through
Python takes seconds) and an append is one INSERT; float64 rather than float32,
so every number comes back exactly as it was stored.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from core import files
from core.formatting import format_bytes
from core.results import FIGURES

ADVICE = "Close other Device Lab windows, or set DEVICE_LAB_DATA_DIR to a writable folder."
FULL_ADVICE = "Free some space there, or set DEVICE_LAB_DATA_DIR to a folder on another disk."
FULL_BELOW_BYTES = 1 << 20
"""An I/O error on a file system with less free space than this is taken for a full disk."""
BUSY_TIMEOUT_S = 10.0
"""How long a write waits for another process's lock unless told otherwise (`RunStore.waiting_at_most`)."""
_COMPANIONS = ("-wal", "-shm")
_WAL_MAGIC, _WAL_HEADER, _WAL_FRAME_HEADER = 0x377F0682, 32, 24
_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
_READ_ONLY_CODES = (8, 14, 3)  # SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_PERM
_IOERR, _FULL = 10, 13  # SQLITE_IOERR, SQLITE_FULL


class StoreError(RuntimeError):
    """The history can not be opened or written; the message says why and what to do."""


class Damaged(sqlite3.DatabaseError):
    """`PRAGMA quick_check` found problems in the file."""


@dataclass
class Opened:
    """A connection to the history and how it was opened."""

    conn: sqlite3.Connection
    read_only: str = ""  # why the file can only be read; "" when it can be written
    recovered_from: Path | None = None
    notice: str = ""
    created: bool = False  # the file was made by this open (`remove_created` may take it away again)


def open_database(path: Path) -> Opened:
    """Connect to the history at `path`: read-write, else read-only, else moved aside when damaged.

    A damaged write-ahead log (-wal) is copied aside first: SQLite keeps the changes before the
    damage, silently drops the rest and then resets the log, so the copy and the notice are all
    the user would otherwise never learn of.
    """
    refuse_other_than_files(path)
    reason = read_only_reason(path)
    if reason:
        return open_read_only(path, reason)
    wal_notice = _keep_damaged_wal(path)
    created = not os.path.lexists(path)
    try:
        return Opened(_checked_connection(path), notice=wal_notice, created=created)
    except sqlite3.DatabaseError as exc:
        if created:
            if is_full(exc, path):
                remove_created(path)  # no half-made file for the next command to stumble on
            raise StoreError(f"Can not create the run history {path}: {problem(exc, path)}. {advice(exc, path)}") from exc
        if _code(exc) in _READ_ONLY_CODES:
            return open_read_only(path, f"SQLite can not write it: {exc}")
        if is_full(exc, path):
            return open_read_only(path, problem(exc, path))
        if not is_damage(exc):
            raise StoreError(f"Can not open the run history at {path}: {problem(exc, path)}. {advice(exc, path)}") from exc
        damage = exc
    aside = _move_aside(path)
    notice = f"The run history {path} could not be read ({damage}). It was moved to {aside} and kept; a new, empty history was started."
    return Opened(_checked_connection(path), recovered_from=aside, notice=notice)


def refuse_other_than_files(path: Path) -> None:
    """StoreError when the history at `path`, or its -wal or -shm file, is there but is not a regular file.

    A folder, a device (a link to /dev/zero) or a named pipe is never opened, read or moved aside: SQLite would
    read it as damage or wait on it, and the message would blame permissions.
    """
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in _COMPANIONS)):
        try:
            files.regular_file(candidate)
        except FileNotFoundError:
            continue
        except files.NotARegularFile as exc:
            raise StoreError(
                f"The run history file {candidate} is {exc.kind}, not a regular file: move it away, "
                "or set DEVICE_LAB_DATA_DIR to another folder."
            ) from exc
        except OSError as exc:
            raise StoreError(
                f"Can not open the run history {candidate}: {files.os_error_words(exc, candidate)}. "
                "Set DEVICE_LAB_DATA_DIR to another folder."
            ) from exc


def read_only_reason(path: Path) -> str:
    """Why the existing history at `path` can only be read, or "" when it can be written (or does not exist).

    `os.access` asks the kernel, so a read-only mount or an immutable file counts
    for root too (root ignores a file's mode bits, so a chmod alone does not).
    """
    if not path.exists():
        return ""
    if not os.access(path, os.W_OK):
        return "the file is read-only"
    for suffix in _COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.exists() and not os.access(companion, os.W_OK):
            return f"its {companion.name} file is read-only"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return f"its folder {path.parent} is not writable"
    return ""


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """True when SQLite says the file itself is damaged (never for busy, read-only or I/O errors)."""
    return isinstance(exc, Damaged) or _code(exc) in _CORRUPT_CODES


def is_busy(exc: BaseException) -> bool:
    """Locked by another process: not damage, so the file must stay where it is."""
    return isinstance(exc, sqlite3.DatabaseError) and _code(exc) in _BUSY_CODES


def is_full(exc: BaseException, path: Path) -> bool:
    """SQLite could not grow the history at `path`: SQLITE_FULL, or an I/O error where (almost) no space is left.

    On a full disk SQLite says "disk I/O error" when the -shm file cannot grow, "database or disk is full"
    when the database or its -wal cannot.
    """
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = _code(exc)
    if code == _FULL:
        return True
    free = free_bytes(path)
    return code == _IOERR and free is not None and free < FULL_BELOW_BYTES


def free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the file system holding `path` (its folder when the file is not there); None when unknown."""
    for candidate in (path, path.parent):
        try:
            stats = os.statvfs(candidate)
        except OSError:
            continue
        return stats.f_bavail * stats.f_frsize
    return None


def problem(exc: BaseException, path: Path) -> str:
    """What stopped SQLite at the history `path`, in words for one line: a lock, a full disk (and the space left), or SQLite's own words."""
    if is_busy(exc):
        return f"another process holds it locked (SQLite: {exc})"
    if is_full(exc, path):
        free = free_bytes(path)
        if free is not None and free < FULL_BELOW_BYTES:
            return f"the disk holding {path.parent} is full ({format_bytes(free)} free)"
        return f"SQLite found the database or disk full ({format_bytes(free)} free on its disk: a quota or file size limit may apply)"
    return f"SQLite: {exc}" if isinstance(exc, sqlite3.Error) else f"{type(exc).__name__}: {exc}"


def advice(exc: BaseException, path: Path) -> str:
    """What to do about `problem(exc, path)`."""
    if is_full(exc, path):
        return FULL_ADVICE
    if is_busy(exc):
        return "End the other program's transaction (or close it), or set DEVICE_LAB_DATA_DIR to another folder."
    return ADVICE


def remove_created(path: Path) -> None:
    """Remove a history this process has just created (and its -wal and -shm) that did not fit on its disk; errors ignored."""
    for candidate in (path.with_name(path.name + suffix) for suffix in _COMPANIONS):
        with contextlib.suppress(OSError):
            candidate.unlink()
    with contextlib.suppress(OSError):
        path.unlink()


def _code(exc: sqlite3.DatabaseError) -> int | None:
    """SQLite's primary result code of an error (from its message before Python 3.11)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    text = str(exc)
    for fragment, value in (
        ("locked", 5),
        ("malformed", 11),
        ("not a database", 26),
        ("readonly", 8),
        ("unable to open", 14),
        ("disk is full", _FULL),
        ("disk I/O error", _IOERR),
    ):
        if fragment in text:
            return value
    return None


def _checked_connection(path: Path) -> sqlite3.Connection:
    """Connect, prove the file is a sound SQLite database, and switch to WAL."""
    conn = _connect(str(path))
    try:
        _quick_check(conn)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def open_read_only(path: Path, reason: str) -> Opened:
    """A connection that can not write (SQLite's `mode=ro`); the file is never changed, nor moved.

    A WAL database whose shared-memory file can not be made (its folder is not
    writable) opens as `immutable=1`; the changes still in its -wal file are not
    seen then, and the notice says so.
    """
    uri = path.absolute().as_uri()
    notice = f"The run history {path} can only be read ({reason}): runs are listed and exported, but new runs are not saved there."
    try:
        return Opened(_read_only_connection(f"{uri}?mode=ro"), read_only=reason, notice=notice)
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            raise StoreError(f"The run history {path} is damaged ({exc}) and read-only, so it was left as it is. {ADVICE}") from exc
    try:
        conn = _read_only_connection(f"{uri}?immutable=1")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"The run history {path} can not be read ({exc}); it is read-only and was left as it is. {ADVICE}") from exc
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size:
        notice += f" Its latest changes, in {wal.name}, can not be read without a writable folder."
    return Opened(conn, read_only=reason, notice=notice)


def _keep_damaged_wal(path: Path) -> str:
    """Copy a damaged -wal to `<name>-wal.damaged-<time>` before SQLite opens it; the notice saying what was kept, or ""."""
    wal = path.with_name(path.name + "-wal")
    try:
        data = wal.read_bytes()
    except OSError:
        return ""
    damage = wal_damage(data)
    if not damage:
        return ""
    copy = wal.with_name(f"{wal.name}.damaged-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    try:
        copy.write_bytes(data)
    except OSError as exc:
        return f"The run history's write-ahead log {wal} is damaged ({damage}) and could not be kept ({exc}): changes after the damage are lost."
    return (
        f"The run history's write-ahead log {wal} is damaged ({damage}): the changes before the damage were recovered, "
        f"those after it could not be read. The log was kept as {copy}."
    )


def wal_damage(data: bytes) -> str:
    """Where a SQLite write-ahead log's bytes are damaged ("" when sound, empty, or only stale frames of an earlier pass follow).

    SQLite's format (sqlite.org/fileformat2.html#walformat): a 32-byte header (magic, version, page size,
    checkpoint number, two salts, a checksum), then frames of a 24-byte header and a page, each with the
    running checksum. A frame with the header's salts and a wrong checksum is damage; a frame with other
    salts is left over from before the last checkpoint, as SQLite expects.
    """
    if len(data) < _WAL_HEADER:
        return ""
    magic = int.from_bytes(data[:4], "big")
    if magic not in (_WAL_MAGIC, _WAL_MAGIC | 1):
        return "its header is not a write-ahead log's"
    order: Literal["big", "little"] = "big" if magic & 1 else "little"
    page_size = int.from_bytes(data[8:12], "big")
    salts = data[16:24]
    checksum = _wal_checksum(data[:24], (0, 0), order)
    if checksum != (int.from_bytes(data[24:28], "big"), int.from_bytes(data[28:32], "big")):
        return "its header's checksum does not match"
    frame_size = _WAL_FRAME_HEADER + page_size
    frames = (len(data) - _WAL_HEADER) // frame_size
    for index in range(frames):
        start = _WAL_HEADER + index * frame_size
        header = data[start : start + _WAL_FRAME_HEADER]
        if header[8:16] != salts:
            return ""  # an earlier pass's frames: not part of this log
        checksum = _wal_checksum(header[:8] + data[start + _WAL_FRAME_HEADER : start + frame_size], checksum, order)
        if checksum != (int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")):
            return f"frame {index + 1} of {frames} does not match its checksum"
    return ""


def _wal_checksum(data: bytes, start: tuple[int, int], order: Literal["big", "little"]) -> tuple[int, int]:
    """SQLite's running checksum over `data` (a multiple of 8 bytes), in the byte order the log's magic names."""
    s0, s1 = start
    words = memoryview(data).cast("I")  # native order; swapped below where the log's differs
    values = words.tolist() if sys.byteorder == order else [int.from_bytes(data[i : i + 4], order) for i in range(0, len(data), 4)]
    for x0, x1 in zip(values[0::2], values[1::2], strict=True):
        s0 = (s0 + x0 + s1) & 0xFFFFFFFF
        s1 = (s1 + x1 + s0) & 0xFFFFFFFF
    return s0, s1


def _read_only_connection(uri: str) -> sqlite3.Connection:
    conn = _connect(uri, uri=True)
    try:
        _quick_check(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect(target: str, uri: bool = False) -> sqlite3.Connection:
    return sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False, uri=uri)


def _quick_check(conn: sqlite3.Connection) -> None:
    problems = [line for (line,) in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise Damaged("; ".join(problems[:3]))


def _move_aside(path: Path) -> Path:
    """Rename the file (and its WAL/SHM companions) to `<name>.corrupt-<time>`; returns the new path."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while aside.exists():
        counter += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
    try:
        for suffix in _COMPANIONS:
            companion = path.with_name(path.name + suffix)
            if companion.exists():
                companion.rename(aside.with_name(aside.name + suffix))
        path.rename(aside)
    except OSError as exc:
        raise StoreError(f"The run history {path} is unreadable and could not be moved aside: {exc}. {ADVICE}") from exc
    return aside


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
    """The process recording a running run ("<pid>@<start time>", `core.history.store.this_process`); "" once it ended."""
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
    """Bring the schema to the latest version (one migration per transaction), then add missing figure columns.

    A schema that is up to date is only read: no write lock is taken, so another process's
    transaction does not hold up (nor fail) the opening.
    """
    if not needs_migration(conn):
        return
    while True:
        with transaction(conn, "BEGIN IMMEDIATE"):
            version = _version(conn)
            if version == len(MIGRATIONS):
                break
            MIGRATIONS[version](conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
    with transaction(conn, "BEGIN IMMEDIATE"):
        add_figure_columns(conn)


def needs_migration(conn: sqlite3.Connection) -> bool:
    """Whether `migrate` has anything to do (read without a write lock); NewerSchemaError for a newer schema."""
    if _version(conn) < len(MIGRATIONS):
        return True
    present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    return any(figure.name not in present for figure in FIGURES)


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


CHUNK_STEPS = 65_536


def insert_series(conn: sqlite3.Connection, run_id: int, losses: Sequence[float], times: Sequence[float]) -> None:
    """Append steps to a run's series, after the chunks it already has (inside the caller's transaction)."""
    (seq,) = conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM steps WHERE run_id = ?", (run_id,)).fetchone()
    rows = (
        (run_id, seq + i, _pack(losses[start : start + CHUNK_STEPS]), _pack(times[start : start + CHUNK_STEPS]))
        for i, start in enumerate(range(0, len(losses), CHUNK_STEPS))
    )
    conn.executemany("INSERT INTO steps (run_id, seq, losses, times) VALUES (?, ?, ?, ?)", rows)


def load_series(conn: sqlite3.Connection, run_id: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A run's losses and step times, in step order."""
    losses, times = array("d"), array("d")
    for loss_blob, time_blob in conn.execute("SELECT losses, times FROM steps WHERE run_id = ? ORDER BY seq", (run_id,)):
        losses.frombytes(loss_blob)
        times.frombytes(time_blob)
    if sys.byteorder == "big":
        losses.byteswap()
        times.byteswap()
    return tuple(losses), tuple(times)


def _pack(values: Sequence[float]) -> bytes:
    packed = array("d", values)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()
