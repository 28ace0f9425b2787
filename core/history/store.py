"""Run history: every run, with its config, environment, result and step series, in SQLite.

The file is `history.sqlite3` in `$DEVICE_LAB_DATA_DIR`, else in
`platformdirs.user_data_dir("device-lab")`, unless `RunStore.open(path)` names one.

Step series are packed little-endian float64 blobs (losses and step times side by
side), one row per appended batch and at most `CHUNK_STEPS` steps a row: a million
steps save or load in about 0.1 s (a million-row table read through Python takes
seconds) and an append is one INSERT. float64 rather than float32, so every number
comes back exactly as it was stored. Warm-up steps are the first ones of a run, so a
count (`warmup_steps`) marks them.

The database runs in WAL mode and every write is one transaction, so a crash loses at
most the steps not yet appended. Runs still "running" when a store opens were left by
a crash (or by a store closed before finishing them) and are marked "interrupted",
their steps kept; runs begun by a store still open in this process are left alone.
A file SQLite can not read is moved aside (kept, never deleted) and a new one started,
with `notice` saying so.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.config import RunConfig
from core.history import export
from core.results import RunResult, RunStatus, StepRecord

FILE_NAME = "history.sqlite3"
CHUNK_STEPS = 65_536

# Runs begun by a RunStore that is still open in this process: another RunStore opened
# here on the same file must not take them for runs a crash left behind.
_LIVE_RUNS: set[tuple[Path, int]] = set()
_LIVE_LOCK = threading.Lock()
_SEARCH_COLUMNS = ("label", "run_group", "status", "message", "model", "dataset", "strategy", "devices")


class StoreError(RuntimeError):
    """The history can not be opened; the message says why and what to do."""


@dataclass(frozen=True)
class RunSummary:
    """One row of the History table: the headline figures of a stored run."""

    id: int
    started_at: str
    label: str
    group: str
    status: str
    message: str
    model: str | None
    dataset: str | None
    strategy: str | None
    devices: tuple[str, ...]
    replicas: int | None
    batch_size: int | None
    steps: int
    samples_per_s: float | None
    step_time_median_ms: float | None
    step_time_p95_ms: float | None
    warmup_s: float | None
    final_loss: float | None


# RunSummary field -> column of the runs table.
_COLUMNS = {f.name: ("run_group" if f.name == "group" else f.name) for f in fields(RunSummary)}
# RunResult.summary() keys stored as columns of the same name.
_RESULT_COLUMNS = (
    *("started_at", "status", "message", "model", "dataset", "strategy", "replicas", "batch_size", "steps"),
    *("warmup_steps", "samples_per_s", "step_time_median_ms", "step_time_p95_ms", "warmup_s", "final_loss"),
)


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


# Applied in order; migration i takes the schema from user_version i to i + 1. Append only.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_schema_v1, _schema_v2)


def default_path() -> Path:
    """Where the history lives when no path is given."""
    folder = os.environ.get("DEVICE_LAB_DATA_DIR")
    if not folder:
        import platformdirs

        folder = platformdirs.user_data_dir("device-lab")
    return Path(folder) / FILE_NAME


class RunStore:
    """The run history: save, list, load, delete and export runs. Safe to share between threads."""

    def __init__(self, path: str | Path | None = None):
        self.path = _resolve(path)
        self.recovered_from: Path | None = None
        self.notice = ""
        self._lock = threading.RLock()
        self._live: set[int] = set()
        self._conn = self._open_connection()
        _migrate(self._conn)
        self._mark_interrupted()

    @classmethod
    def open(cls, path: str | Path | None = None) -> RunStore:
        """Open (or create) the history at `path`, or at `default_path()`."""
        return cls(path)

    def close(self) -> None:
        """Close the database; runs begun here and not finished will read back as interrupted."""
        with self._lock:
            self._conn.close()
        with _LIVE_LOCK:
            _LIVE_RUNS.difference_update((self.path, run_id) for run_id in self._live)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def begin_run(
        self, config: RunConfig | dict[str, Any], label: str = "", group: str = "", environment: dict[str, Any] | None = None
    ) -> int:
        """Record a run that is starting (status "running"); returns its id for `append_steps`."""
        config_dict = config.to_dict() if isinstance(config, RunConfig) else dict(config)
        result = RunResult(status=RunStatus.RUNNING, config=config_dict, environment=dict(environment or {}), started_at=_now())
        with self._write():
            run_id = self._insert(result, label, group)
        with _LIVE_LOCK:
            self._live.add(run_id)
            _LIVE_RUNS.add((self.path, run_id))
        return run_id

    def append_steps(self, run_id: int, records: Sequence[StepRecord]) -> None:
        """Add a batch of steps to a run, in one transaction."""
        if not records:
            return
        losses = [r.loss for r in records]
        with self._write():
            updated = self._conn.execute(
                "UPDATE runs SET steps = steps + ?, warmup_steps = warmup_steps + ?, final_loss = ? WHERE id = ?",
                (len(records), sum(r.warmup for r in records), losses[-1], run_id),
            ).rowcount
            if not updated:
                raise KeyError(f"No run {run_id} in the history.")
            self._insert_series(run_id, losses, [r.step_time_s for r in records])

    def finish_run(self, run_id: int, result: RunResult) -> None:
        """Record how a run begun with `begin_run` ended.

        The result's step series, when it has one, replaces the appended steps
        (same numbers, fewer rows); otherwise the appended steps stay.
        """
        with self._write():
            row = self._conn.execute("SELECT started_at FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise KeyError(f"No run {run_id} in the history.")
            result = result if result.started_at else replace(result, started_at=row[0])
            values = _row_values(result)
            assignments = ", ".join(f"{column} = ?" for column in values)
            self._conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*values.values(), run_id))
            if result.losses:
                self._conn.execute("DELETE FROM steps WHERE run_id = ?", (run_id,))
                self._insert_series(run_id, result.losses, result.step_times_s)
        with _LIVE_LOCK:
            self._live.discard(run_id)
            _LIVE_RUNS.discard((self.path, run_id))

    def save(self, result: RunResult, label: str = "", group: str = "") -> int:
        """Store a finished run in one go; returns its id."""
        result = result if result.started_at else replace(result, started_at=_now())
        with self._write():
            run_id = self._insert(result, label, group)
            self._insert_series(run_id, result.losses, result.step_times_s)
        return run_id

    def delete(self, run_ids: Iterable[int]) -> None:
        """Remove runs and their step series."""
        ids = [(int(run_id),) for run_id in run_ids]
        with self._write():
            self._conn.executemany("DELETE FROM steps WHERE run_id = ?", ids)
            self._conn.executemany("DELETE FROM runs WHERE id = ?", ids)

    def list_runs(
        self,
        model: str | None = None,
        status: str | None = None,
        search: str = "",
        order_by: str = "started_at",
        descending: bool = True,
    ) -> list[RunSummary]:
        """Runs for the History panel, filtered and sorted (`order_by` is a RunSummary field)."""
        if order_by not in _COLUMNS:
            raise ValueError(f"order_by: got {order_by!r}; allowed: {', '.join(_COLUMNS)}")
        where, params = ["1"], []
        if model is not None:
            where.append("model = ?")
            params.append(model)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if search:
            pattern = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where.append("(" + " OR ".join(f"{c} LIKE ? ESCAPE '\\'" for c in _SEARCH_COLUMNS) + ")")
            params.extend([pattern] * len(_SEARCH_COLUMNS))
        direction = "DESC" if descending else "ASC"
        sql = (
            f"SELECT {', '.join(_COLUMNS.values())} FROM runs WHERE {' AND '.join(where)} "
            f"ORDER BY {_COLUMNS[order_by]} {direction}, id {direction}"
        )
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [_summary(row) for row in rows]

    def load(self, run_id: int, with_steps: bool = True) -> RunResult:
        """The full result of a stored run; `with_steps=False` skips the step series."""
        with self._write("BEGIN"):
            row = self._conn.execute(
                "SELECT status, message, steps, warmup_steps, final_loss, result FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise KeyError(f"No run {run_id} in the history.")
            series = self._load_series(run_id) if with_steps else ((), ())
        status, message, steps, warmup_steps, final_loss, stored = row
        result = replace(RunResult.from_dict(json.loads(stored)), status=status, message=message)
        if status in (RunStatus.RUNNING, RunStatus.INTERRUPTED):
            result = replace(result, steps_done=steps, warmup_steps=warmup_steps, final_loss=final_loss)
        return replace(result, losses=series[0], step_times_s=series[1])

    def groups(self) -> list[str]:
        """The group names in use, sorted."""
        with self._lock:
            rows = self._conn.execute("SELECT DISTINCT run_group FROM runs WHERE run_group != '' ORDER BY run_group")
            return [name for (name,) in rows]

    def export_csv(self, run_ids: Sequence[int], path: str | Path) -> None:
        """One row of headline figures per run, under a `#` system header."""
        export.write_runs_csv(self._stored(run_ids, with_steps=False), path)

    def export_json(self, run_ids: Sequence[int], path: str | Path) -> None:
        """{"system": ..., "runs": [full results with id, label, group]}."""
        export.write_runs_json(self._stored(run_ids, with_steps=True), path)

    def export_steps_csv(self, run_id: int, path: str | Path) -> None:
        """A run's step series: step, loss, step_time_s, warmup."""
        export.write_steps_csv(self._stored([run_id], with_steps=True)[0], path)

    def _stored(self, run_ids: Sequence[int], with_steps: bool) -> list[export.StoredRun]:
        stored = []
        for run_id in run_ids:
            result = self.load(run_id, with_steps)
            with self._lock:
                label, group = self._conn.execute("SELECT label, run_group FROM runs WHERE id = ?", (run_id,)).fetchone()
            stored.append(export.StoredRun(run_id, label, group, result))
        return stored

    def _open_connection(self) -> sqlite3.Connection:
        """A checked connection; an unreadable file is moved aside and a new one started."""
        try:
            return _checked_connection(self.path)
        except sqlite3.DatabaseError as exc:
            if _is_busy(exc) or not self.path.exists():
                raise StoreError(f"Can not open the run history at {self.path}: {exc}. {_ADVICE}") from exc
            reason = exc
        self.recovered_from = _move_aside(self.path)
        self.notice = (
            f"The run history {self.path} could not be read ({reason}). It was moved to "
            f"{self.recovered_from} and kept; a new, empty history was started."
        )
        return _checked_connection(self.path)

    def _mark_interrupted(self) -> None:
        with _LIVE_LOCK:
            live = [run_id for path, run_id in _LIVE_RUNS if path == self.path]
        with self._write():
            self._conn.execute(
                "UPDATE runs SET status = ?, message = 'Device Lab closed before this run ended; its first '"
                f" || steps || ' steps were kept.' WHERE status = ? AND id NOT IN ({', '.join('?' * len(live))})",
                (RunStatus.INTERRUPTED, RunStatus.RUNNING, *live),
            )

    def _insert(self, result: RunResult, label: str, group: str) -> int:
        values = {"label": label, "run_group": group, **_row_values(result)}
        sql = f"INSERT INTO runs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})"
        return int(self._conn.execute(sql, tuple(values.values())).lastrowid)

    def _insert_series(self, run_id: int, losses: Sequence[float], times: Sequence[float]) -> None:
        (seq,) = self._conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM steps WHERE run_id = ?", (run_id,)).fetchone()
        rows = (
            (run_id, seq + i, _pack(losses[start : start + CHUNK_STEPS]), _pack(times[start : start + CHUNK_STEPS]))
            for i, start in enumerate(range(0, len(losses), CHUNK_STEPS))
        )
        self._conn.executemany("INSERT INTO steps (run_id, seq, losses, times) VALUES (?, ?, ?, ?)", rows)

    def _load_series(self, run_id: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
        losses, times = array("d"), array("d")
        for loss_blob, time_blob in self._conn.execute("SELECT losses, times FROM steps WHERE run_id = ? ORDER BY seq", (run_id,)):
            losses.frombytes(loss_blob)
            times.frombytes(time_blob)
        if sys.byteorder == "big":
            losses.byteswap()
            times.byteswap()
        return tuple(losses), tuple(times)

    @contextmanager
    def _write(self, begin: str = "BEGIN IMMEDIATE") -> Iterator[None]:
        """One transaction under the lock; reads pass "BEGIN" to see a consistent snapshot."""
        with self._lock, _transaction(self._conn, begin):
            yield


_ADVICE = "Close other Device Lab windows, or set DEVICE_LAB_DATA_DIR to a writable folder."


def _resolve(path: str | Path | None) -> Path:
    target = (Path(path) if path is not None else default_path()).absolute()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"Can not create the folder for the run history {target}: {exc}. {_ADVICE}") from exc
    return target


def _checked_connection(path: Path) -> sqlite3.Connection:
    """Connect, prove the file is a sound SQLite database, and switch to WAL."""
    conn = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
    try:
        problems = [line for (line,) in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(problems[:3]))
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def _is_busy(exc: sqlite3.DatabaseError) -> bool:
    """Locked by another process: not corruption, so the file must stay where it is."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is None:
        return "locked" in str(exc)
    return code & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED and their extended codes


def _move_aside(path: Path) -> Path:
    """Rename the file (and its WAL/SHM companions) to `<name>.corrupt-<time>`; returns the new path."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while aside.exists():
        counter += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
    try:
        for suffix in ("-wal", "-shm"):
            companion = path.with_name(path.name + suffix)
            if companion.exists():
                companion.rename(aside.with_name(aside.name + suffix))
        path.rename(aside)
    except OSError as exc:
        raise StoreError(f"The run history {path} is unreadable and could not be moved aside: {exc}. {_ADVICE}") from exc
    return aside


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to the latest version, one migration per transaction."""
    while True:
        with _transaction(conn, "BEGIN IMMEDIATE"):
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"The run history was written by a newer Device Lab (schema {version}; this one reads up to "
                    f"{len(MIGRATIONS)}). Update Device Lab, or set DEVICE_LAB_DATA_DIR to another folder."
                )
            if version == len(MIGRATIONS):
                return
            MIGRATIONS[version](conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")


@contextmanager
def _transaction(conn: sqlite3.Connection, begin: str) -> Iterator[None]:
    conn.execute(begin)
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _row_values(result: RunResult) -> dict[str, Any]:
    """The runs-table columns for a result (label and group aside): headline figures plus the rest as JSON."""
    summary = result.summary()
    values = {column: summary[column] for column in _RESULT_COLUMNS}
    values["devices"] = " ".join(summary["devices"])
    values["result"] = json.dumps(replace(result, losses=(), step_times_s=()).to_dict())
    return values


def _summary(row: Sequence[Any]) -> RunSummary:
    values = dict(zip(_COLUMNS, row, strict=True))
    values["devices"] = tuple(values["devices"].split())
    return RunSummary(**values)


def _pack(values: Sequence[float]) -> bytes:
    packed = array("d", values)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
