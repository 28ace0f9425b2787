"""Opening the history's SQLite file: writable, read-only, or damaged and moved aside.

Only damage is a reason to move a file aside: SQLite saying the file is corrupt
or not a database, or `PRAGMA quick_check` finding a problem. A file that cannot
be written (read-only file or folder, a read-only mount, an immutable file) is
opened read-only instead and left byte-for-byte as it is; a busy file, a full
disk or a missing permission is reported, never taken for damage.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

ADVICE = "Close other Device Lab windows, or set DEVICE_LAB_DATA_DIR to a writable folder."
_COMPANIONS = ("-wal", "-shm")
_WAL_MAGIC, _WAL_HEADER, _WAL_FRAME_HEADER = 0x377F0682, 32, 24
_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
_READ_ONLY_CODES = (8, 14, 3)  # SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_PERM


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


def open_database(path: Path) -> Opened:
    """Connect to the history at `path`: read-write, else read-only, else moved aside when damaged.

    A damaged write-ahead log (-wal) is copied aside first: SQLite keeps the changes before the
    damage, silently drops the rest and then resets the log, so the copy and the notice are all
    the user would otherwise never learn of.
    """
    reason = read_only_reason(path)
    if reason:
        return _open_read_only(path, reason)
    wal_notice = _keep_damaged_wal(path)
    try:
        opened = Opened(_checked_connection(path))
        opened.notice = wal_notice
        return opened
    except sqlite3.DatabaseError as exc:
        if not path.exists():
            raise StoreError(f"Can not create the run history {path}: {exc}. {ADVICE}") from exc
        if _code(exc) in _READ_ONLY_CODES:
            return _open_read_only(path, f"SQLite can not write it: {exc}")
        if not is_damage(exc):
            raise StoreError(f"Can not open the run history at {path}: {exc}. {ADVICE}") from exc
        damage = exc
    aside = _move_aside(path)
    notice = f"The run history {path} could not be read ({damage}). It was moved to {aside} and kept; a new, empty history was started."
    return Opened(_checked_connection(path), recovered_from=aside, notice=notice)


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


def is_busy(exc: sqlite3.DatabaseError) -> bool:
    """Locked by another process: not damage, so the file must stay where it is."""
    return _code(exc) in _BUSY_CODES


def _code(exc: sqlite3.DatabaseError) -> int | None:
    """SQLite's primary result code of an error (from its message before Python 3.11)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    text = str(exc)
    for fragment, value in (("locked", 5), ("malformed", 11), ("not a database", 26), ("readonly", 8), ("unable to open", 14)):
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


def _open_read_only(path: Path, reason: str) -> Opened:
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
    return sqlite3.connect(target, timeout=10, isolation_level=None, check_same_thread=False, uri=uri)


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
