"""Step series in the history: losses and step times as packed little-endian float64 chunks.

One row per appended batch and at most `CHUNK_STEPS` steps a row: a million steps
save or load in about 0.1 s (a million-row table read through Python takes seconds)
and an append is one INSERT. float64 rather than float32, so every number comes back
exactly as it was stored.
"""

from __future__ import annotations

import sqlite3
import sys
from array import array
from collections.abc import Sequence

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
