"""Run history: every run, with its config, environment, result and step series, in SQLite.

The file is `history.sqlite3` in `$DEVICE_LAB_DATA_DIR`, else in
`platformdirs.user_data_dir("device-lab")`, unless `RunStore.open(path)` names one.

Each run is a row of `runs`: what it ran, one column per headline figure
(`core.results.FIGURES`, kept in step by `database.add_figure_columns`) and the full result as JSON. Step
series live apart, in packed chunks (`database.insert_series`). Warm-up steps are the first ones of a
run, so a count (`warmup_steps`) marks them.

The database runs in WAL mode and every write is one transaction, so a crash loses at
most the steps not yet appended. A run still "running" whose recording process has
ended (a crash, a kill, or a store closed before finishing it) is marked "interrupted"
when a store opens or lists runs: its steps kept and its figures computed from them.
Runs begun by a store still open in this process, or by another live process
(`this_process`, below), are left alone.

A damaged file is moved aside (kept, never deleted) and a new one started, with
`notice` saying so; a file that can not be written is opened read-only and never
changed (`core.history.database`), and so is one on a full disk, or one whose schema
needs an upgrade while another process holds its lock. Writes wait for another
process's lock `database.BUSY_TIMEOUT_S` unless told otherwise (`waiting_at_most`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import psutil

from core import files
from core.backends.call_timer import window_steps
from core.config import RunConfig
from core.formatting import utc_now
from core.history import database, export
from core.history.database import StoreError, insert_series, load_series, open_database
from core.results import FIGURES, RunResult, RunStatus, StepRecord
from core.training.metrics import summarize

__all__ = ["FILE_NAME", "RunStore", "RunSummary", "StoreError", "default_path"]

FILE_NAME = "history.sqlite3"

log = logging.getLogger(__name__)

# Runs begun by a RunStore that is still open in this process: another RunStore opened
# here on the same file must not take them for runs a crash left behind.
_LIVE_RUNS: set[tuple[Path, int]] = set()
_LIVE_LOCK = threading.Lock()
ABANDONED_WAIT_S = 0.5  # marking cut-off runs is best effort: it waits this long at most for another process's lock
_SEARCH_COLUMNS = ("label", "run_group", "status", "message", "model", "dataset", "strategy", "devices")


@dataclass(frozen=True)
class RunSummary:
    """One row of the History table: a stored run's description and its headline figures."""

    id: int
    started_at: str
    label: str
    group: str
    status: RunStatus
    message: str
    model: str | None
    dataset: str | None
    strategy: str | None
    devices: tuple[str, ...]
    replicas: int | None
    batch_size: int | None
    steps: int
    figures: dict[str, Any]  # every core.results.FIGURES name -> its value, or None
    model_sha256: str = ""  # the content of the model file the run trained ("" for a sample model)
    backend: str = "tensorflow"  # the Keras backend that trained it (runs from before backends: tensorflow)
    conditions: dict[str, Any] = field(default_factory=dict)  # what else the machine did meanwhile (RunResult.conditions)
    energy: dict[str, Any] | None = None  # the steady window's measured energy (RunResult.energy); None: not measured
    energy_reason: str = ""  # why not (RunResult.energy_reason)

    @property
    def contended(self) -> bool:
        """True when other work on the machine made the run's figures low and noisy."""
        return bool(self.conditions.get("contended"))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready and flat: the fields, then each figure under its own name (as `history --json` prints)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "figures"}
        data["status"] = self.status.value
        data["devices"] = list(self.devices)
        return {**data, **self.figures}


# RunSummary fields read from the stored result rather than a column of their own.
_FROM_RESULT = {
    "model_sha256": "CASE WHEN json_valid(result) THEN json_extract(result, '$.config.model_sha256') END",
    "backend": "COALESCE(CASE WHEN json_valid(result) THEN json_extract(result, '$.config.backend') END, 'tensorflow')",
    "conditions": "CASE WHEN json_valid(result) THEN json_extract(result, '$.conditions') END",
    "energy": "CASE WHEN json_valid(result) THEN json_extract(result, '$.energy') END",
    "energy_reason": "CASE WHEN json_valid(result) THEN json_extract(result, '$.energy_reason') END",
}
# RunSummary field (all but `figures` and those from the result) -> column of the runs table.
_FIELD_COLUMNS = {
    f.name: ("run_group" if f.name == "group" else f.name) for f in fields(RunSummary) if f.name != "figures" and f.name not in _FROM_RESULT
}
# What `list_runs` can sort by: the fields and every figure.
_SORT_COLUMNS = {**_FIELD_COLUMNS, **{f.name: database.quote(f.name) for f in FIGURES}}
# What `list_runs` reads, in `_summary`'s order: the fields, the figures, then the fields from the result.
_SELECTED = (*_FIELD_COLUMNS.values(), *(database.quote(f.name) for f in FIGURES), *_FROM_RESULT.values())
# RunResult.summary() keys stored as columns of the same name, besides the figures.
_RESULT_COLUMNS = ("started_at", "status", "message", "model", "dataset", "strategy", "replicas", "batch_size", "steps", "warmup_steps")


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
        self._lock = threading.RLock()
        self._live: set[int] = set()
        opened = open_database(self.path)
        self._conn = opened.conn
        self.recovered_from: Path | None = opened.recovered_from
        self.notice = opened.notice
        self.read_only = opened.read_only  # why nothing can be written here; "" when it can
        try:
            database.check_readable(self._conn) if self.read_only else database.migrate(self._conn)
        except database.NewerSchemaError as exc:
            self._conn.close()
            raise StoreError(f"{exc} Update Device Lab, or set DEVICE_LAB_DATA_DIR to another folder.") from exc
        except database.UnreadableSchemaError as exc:
            self._conn.close()
            raise StoreError(f"{exc} Make {self.path} writable once, or set DEVICE_LAB_DATA_DIR to another folder.") from exc
        except sqlite3.Error as exc:  # the schema could not be written: a full disk, another process's lock
            self._conn.close()
            self._read_only_after(exc, opened.created)
        self._close_abandoned_runs()

    def _read_only_after(self, exc: sqlite3.Error, created: bool) -> None:
        """After the schema could not be set up: a history made just now is refused (StoreError; removed when it did
        not fit on its disk); one that was there opens read-only when the disk is full or another process holds the
        lock, so its runs are still listed."""
        path = self.path
        why = database.problem(exc, path)
        if created:
            if database.is_full(exc, path):
                database.remove_created(path)  # no half-made file for the next command to stumble on
            raise StoreError(f"Can not create the run history {path}: {why}. {database.advice(exc, path)}") from exc
        if not (database.is_full(exc, path) or database.is_busy(exc)):
            raise StoreError(f"Can not set up the run history {path}: {why}. {database.advice(exc, path)}") from exc
        opened = database.open_read_only(path, why)
        self._conn, self.notice, self.read_only = opened.conn, opened.notice, opened.read_only
        try:
            database.check_readable(self._conn)
        except (database.NewerSchemaError, database.UnreadableSchemaError, sqlite3.Error) as unreadable:
            self._conn.close()
            raise StoreError(
                f"The run history {path} needs an upgrade that can not be written now ({why}): {unreadable} {database.advice(exc, path)}"
            ) from exc

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
        result = RunResult(status=RunStatus.RUNNING, config=config_dict, environment=dict(environment or {}), started_at=utc_now())
        with self._write():
            run_id = self._insert(result, label, group)
            self._conn.execute("UPDATE runs SET owner = ? WHERE id = ?", (this_process(), run_id))
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
            insert_series(self._conn, run_id, losses, [r.step_time_s for r in records])

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
            values = {**_row_values(result), "owner": ""}
            assignments = ", ".join(f"{database.quote(column)} = ?" for column in values)
            self._conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*values.values(), run_id))
            if result.losses:
                self._conn.execute("DELETE FROM steps WHERE run_id = ?", (run_id,))
                insert_series(self._conn, run_id, result.losses, result.step_times_s)
        with _LIVE_LOCK:
            self._live.discard(run_id)
            _LIVE_RUNS.discard((self.path, run_id))

    def save(self, result: RunResult, label: str = "", group: str = "") -> int:
        """Store a finished run in one go; returns its id."""
        result = result if result.started_at else replace(result, started_at=utc_now())
        with self._write():
            run_id = self._insert(result, label, group)
            insert_series(self._conn, run_id, result.losses, result.step_times_s)
        return run_id

    def delete(self, run_ids: Iterable[int]) -> None:
        """Remove runs and their step series."""
        ids = [(int(run_id),) for run_id in run_ids]
        with self._write():
            self._conn.executemany("DELETE FROM steps WHERE run_id = ?", ids)
            self._conn.executemany("DELETE FROM runs WHERE id = ?", ids)
        with _LIVE_LOCK:
            self._live.difference_update(run_id for (run_id,) in ids)
            _LIVE_RUNS.difference_update((self.path, run_id) for (run_id,) in ids)

    def list_runs(
        self,
        model: str | None = None,
        status: str | None = None,
        search: str = "",
        order_by: str = "started_at",
        descending: bool = True,
    ) -> list[RunSummary]:
        """Runs for the History panel, filtered and sorted (`order_by`: a RunSummary field or a figure name).

        Runs whose recording process has ended since the store opened are marked interrupted first.
        """
        if order_by not in _SORT_COLUMNS:
            raise ValueError(f"order_by: got {order_by!r}; allowed: {', '.join(_SORT_COLUMNS)}")
        self._close_abandoned_runs()
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
            f"SELECT {', '.join(_SELECTED)} FROM runs WHERE {' AND '.join(where)} "
            f"ORDER BY {_SORT_COLUMNS[order_by]} {direction}, id {direction}"
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
            series = load_series(self._conn, run_id) if with_steps else ((), ())
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
        """One row of headline figures per run under its column header; the system header in `PATH.meta.json` beside it."""
        export.write_runs_csv(self._stored(run_ids, with_steps=False), path)

    def export_json(self, run_ids: Sequence[int], path: str | Path) -> None:
        """{"system": ..., "runs": [full results with id, label, group]}."""
        export.write_runs_json(self._stored(run_ids, with_steps=True), path)

    def _stored(self, run_ids: Sequence[int], with_steps: bool) -> list[export.StoredRun]:
        stored = []
        for run_id in run_ids:
            result = self.load(run_id, with_steps)
            with self._lock:
                label, group = self._conn.execute("SELECT label, run_group FROM runs WHERE id = ?", (run_id,)).fetchone()
            stored.append(export.StoredRun(run_id, label, group, result))
        return stored

    def _close_abandoned_runs(self) -> None:
        """Mark "running" runs whose recording process has ended as interrupted, with the figures of their steps.

        Best effort: when the file is busy (another process writing) the runs stay
        "running" until a later listing marks them; listing never fails for it.
        """
        if self.read_only:
            return
        with _LIVE_LOCK:
            live = {run_id for path, run_id in _LIVE_RUNS if path == self.path}
        try:
            with self._lock:
                rows = self._conn.execute("SELECT id, owner FROM runs WHERE status = ?", (RunStatus.RUNNING,)).fetchall()
            me = this_process()
            abandoned = [run_id for run_id, owner in rows if run_id not in live and (owner == me or not is_running(owner))]
            if not abandoned:
                return
            with self.waiting_at_most(ABANDONED_WAIT_S), self._write():
                for run_id in abandoned:
                    self._mark_interrupted(run_id)
        except sqlite3.OperationalError as exc:  # busy, or a full disk: a later listing tries again
            log.warning("Could not mark cut-off runs as interrupted yet: %s", exc)

    def _mark_interrupted(self, run_id: int) -> None:
        """One abandoned run as "interrupted": its steps kept, its figures those of the steps it kept (in the caller's transaction)."""
        row = self._conn.execute(
            "SELECT status, steps, warmup_steps, final_loss, batch_size, result FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
        if row is None or row[0] != RunStatus.RUNNING:
            return  # finished (or marked by another process) meanwhile
        _, steps, warmup_steps, final_loss, batch_size, stored = row
        _, times = load_series(self._conn, run_id)
        begun = RunResult.from_dict(json.loads(stored))
        window = window_steps(begun.backend, begun.config.get("steps_per_call") or 1)  # as the run's own result would have it
        stats = summarize(times, warmup_steps, batch_size or 0, window_steps=window)
        message = f"The run was cut off before it ended (Device Lab closed, crashed or was killed); its first {steps} steps were kept."
        result = replace(
            begun,
            status=RunStatus.INTERRUPTED,
            message=message,
            steps_done=steps,
            **stats.result_fields(),
            final_loss=final_loss,
        )
        values = {**_row_values(result), "owner": ""}
        assignments = ", ".join(f"{database.quote(column)} = ?" for column in values)
        self._conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*values.values(), run_id))

    def _insert(self, result: RunResult, label: str, group: str) -> int:
        values = {"label": label, "run_group": group, **_row_values(result)}
        sql = f"INSERT INTO runs ({', '.join(map(database.quote, values))}) VALUES ({', '.join('?' * len(values))})"
        run_id = self._conn.execute(sql, tuple(values.values())).lastrowid
        if run_id is None:
            raise StoreError(f"The run history {self.path} gave no id for the run just saved.")
        return run_id

    @contextmanager
    def waiting_at_most(self, seconds: float) -> Iterator[None]:
        """Inside the block this thread's writes wait at most `seconds` for another process's lock (then
        `database.is_busy` errors); other threads wait for the block to end. Outside, a write waits
        `database.BUSY_TIMEOUT_S`."""
        with self._lock:
            self._conn.execute(f"PRAGMA busy_timeout = {max(0, round(seconds * 1000))}")
            try:
                yield
            finally:
                with contextlib.suppress(sqlite3.Error):  # closed meanwhile
                    self._conn.execute(f"PRAGMA busy_timeout = {round(database.BUSY_TIMEOUT_S * 1000)}")

    @contextmanager
    def _write(self, begin: str = "BEGIN IMMEDIATE") -> Iterator[None]:
        """One transaction under the lock; reads pass "BEGIN" to see a consistent snapshot."""
        if self.read_only and begin != "BEGIN":
            raise StoreError(f"The run history {self.path} can only be read ({self.read_only}); nothing can be saved or deleted there.")
        with self._lock, database.transaction(self._conn, begin):
            yield


def _resolve(path: str | Path | None) -> Path:
    target = (Path(path) if path is not None else default_path()).absolute()
    long = files.too_long(target)
    if long:
        raise StoreError(f"Can not use {target} for the run history: {long}. Set DEVICE_LAB_DATA_DIR to a folder with a shorter path.")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in (target.parent, *target.parent.parents) if _is_there_but_no_folder(p)), None)
        reason = f"{blocker} is a file, not a folder" if blocker else files.os_error_words(exc, target.parent)
        raise StoreError(
            f"Can not create the folder {target.parent} for the run history: {reason}. Set DEVICE_LAB_DATA_DIR to a writable folder."
        ) from exc
    return target


def _is_there_but_no_folder(path: Path) -> bool:
    try:
        return path.exists() and not path.is_dir()
    except OSError:
        return False


def _row_values(result: RunResult) -> dict[str, Any]:
    """The runs-table columns for a result (label and group aside): headline figures plus the rest as JSON."""
    summary = result.summary()
    values = {column: summary[column] for column in _RESULT_COLUMNS}
    values.update(result.figures())
    values["devices"] = " ".join(summary["devices"])
    values["conditions"] = json.dumps(result.conditions)  # also a column of its own, for queries on contention
    values["result"] = json.dumps(replace(result, losses=(), step_times_s=()).to_dict())
    return values


def _summary(row: Sequence[Any]) -> RunSummary:
    """A `_SELECTED` row as a RunSummary."""
    columns, figure_end = len(_FIELD_COLUMNS), len(_FIELD_COLUMNS) + len(FIGURES)
    values = dict(zip(_FIELD_COLUMNS, row[:columns], strict=True))
    values["status"] = RunStatus(values["status"])
    values["devices"] = tuple(values["devices"].split())
    figures = dict(zip((f.name for f in FIGURES), row[columns:figure_end], strict=True))
    from_result: dict[str, Any] = {name: value or "" for name, value in zip(_FROM_RESULT, row[figure_end:], strict=True)}
    from_result["conditions"] = json.loads(from_result["conditions"] or "{}")
    from_result["energy"] = json.loads(from_result["energy"]) if from_result["energy"] else None
    return RunSummary(**values, figures=figures, **from_result)


_TOLERANCE_S = 0.01


def this_process() -> str:
    """The owner tag of this process: "<pid>@<process start time>" (a pid alone could be reused by a later process, the pair not).

    The window, `main.py history` and a CLI run may have one history open at once; each marks as
    interrupted only the runs whose owner has ended (`is_running`).
    """
    return _tag(os.getpid())


def is_running(owner: str) -> bool:
    """True while the process that `owner` names is still alive (False for "" or a malformed tag)."""
    pid_text, _, started_text = owner.partition("@")
    try:
        pid, started = int(pid_text), float(started_text)
        process = psutil.Process(pid)
        return abs(process.create_time() - started) < _TOLERANCE_S and process.status() != psutil.STATUS_ZOMBIE
    except (ValueError, psutil.Error):
        return False


@functools.cache
def _tag(pid: int) -> str:
    return f"{pid}@{psutil.Process(pid).create_time():.3f}"
