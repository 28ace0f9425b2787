"""Record a run in the history while it trains, so a crash loses at most the last second.

`HistoryRecorder` is a `RunHook`: `begin()` records the run as "running" before
it starts, `on_step_records` appends the steps in one transaction at most every
`flush_interval_s`, and `finish(result)` writes the result, once (the job
service, `core.jobs`, calls it with the final result, its verdict included). After a crash or `kill -9`
the run reads back as "interrupted" with every appended step and the figures of
those steps (see `RunStore._close_abandoned_runs`). It writes in the thread that
trains, never the GUI's.

Another process's lock (a transaction it has not ended) never holds up the
training: while training, a write waits at most `FLUSH_WAIT_S` for it, and what
could not be written (the run's beginning, its steps) is kept and written at a
later flush, once the lock is gone. `finish` waits up to `FINISH_WAIT_S`; a run
still locked out then is not saved, and `error` says why.

A history that cannot be written never costs the run: the first failure other
than a lock is kept in `error` (for one message to the user) and recording stops.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from core.config import RunConfig
from core.history import database
from core.history.store import RunStore, StoreError
from core.results import RunResult, StepRecord
from core.training.hooks import RunHook

FLUSH_INTERVAL_S = 1.0
FLUSH_WAIT_S = 0.05
"""While the run trains: the longest a write waits for another process's lock before it is left for the next flush."""
FINISH_WAIT_S = database.BUSY_TIMEOUT_S
"""At the run's end: the longest its last write waits for another process's lock before the run is given up as unsaved."""

_T = TypeVar("_T")
_LOCKED = object()  # `_attempt`'s answer when another process's lock kept the write out


class HistoryRecorder(RunHook):
    """Writes one run to `store` as it happens: begun, steps appended about once a second, finished.

    `store` may be None when the history could not be opened: pass `error`
    (why), and the recorder records nothing and reports that error.
    """

    def __init__(
        self,
        store: RunStore | None,
        config: RunConfig,
        label: str = "",
        group: str = "",
        environment: dict[str, Any] | None = None,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        error: str = "",
    ):
        if store is None and not error:
            raise ValueError("HistoryRecorder without a store needs the reason (error=...)")
        self._store = store
        self._config = config
        self._label = label
        self._group = group
        self._environment = environment
        self._interval_s = flush_interval_s
        self._pending: list[StepRecord] = []
        self._last_flush = float("-inf")  # the first steps are written at once
        self._begun = False  # begin() was called: the run is to be recorded as it trains
        self.run_id: int | None = None
        self.error = error
        self.locked_out = ""  # why the last write had to wait for a later flush (another process's lock); "" when none did
        self.finished = False

    def begin(self) -> int | None:
        """Record the run as running; returns its id (None when the history could not be written, or not yet: locked)."""
        self._begun = True
        if self.run_id is None:
            self._begin(FLUSH_WAIT_S)
        return self.run_id

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        self._pending.extend(records)
        if time.monotonic() - self._last_flush >= self._interval_s:
            self.flush()

    def flush(self, wait_s: float = FLUSH_WAIT_S) -> None:
        """Append the steps gathered since the last flush, in one transaction (begin the run first if a lock kept it out)."""
        self._last_flush = time.monotonic()
        if self.error or self._store is None:
            self._pending = []
            return
        if self.run_id is None and (not self._begun or not self._begin(wait_s)):
            return  # not begun yet: the steps wait for the run's row
        records, run_id = self._pending, self.run_id
        if not records or run_id is None:
            return
        self._pending = []
        if self._attempt(lambda store: store.append_steps(run_id, records), wait_s) is _LOCKED:
            self._pending = [*records, *self._pending]  # written at a later flush, in order

    def finish(self, result: RunResult) -> int | None:
        """Record how the run ended; returns its id, or None when the history could not be written.

        A run never begun (it failed before it started, or a lock kept its beginning
        out) is saved in one transaction. A run is finished once: a second call raises RuntimeError.
        """
        if self.finished:
            raise RuntimeError(f"run {self.run_id} of the history was already finished")
        self.finished = True
        if self.run_id is None and self._begun and not result.losses and self._pending:
            self.flush(FINISH_WAIT_S)  # the result has no series: begin the run and append its steps first
        run_id = self.run_id
        if run_id is None:
            saved = self._attempt(lambda store: store.save(result, self._label, self._group), FINISH_WAIT_S)
            self.run_id = saved if isinstance(saved, int) else None
        else:
            if not result.losses:
                self.flush(FINISH_WAIT_S)  # the result has no series: keep the appended steps complete
            self._attempt(lambda store: store.finish_run(run_id, result), FINISH_WAIT_S)
        if self.locked_out and not self.error:
            self.error = self._explain_lock()
        self._pending = []
        return self.run_id if not self.error else None

    def discard(self) -> None:
        """Remove a begun run that turned out not to be one (its job was refused as it started); records nothing more."""
        run_id = self.run_id
        if run_id is not None and not self.finished:
            self._attempt(lambda store: store.delete([run_id]), FINISH_WAIT_S)
        self.finished = True
        self._pending = []
        self.locked_out = ""

    def _begin(self, wait_s: float) -> bool:
        """Try to record the run's beginning; True once it is recorded."""
        begun = self._attempt(lambda store: store.begin_run(self._config, self._label, self._group, self._environment), wait_s)
        if isinstance(begun, int):
            self.run_id = begun
        return self.run_id is not None

    def _attempt(self, write: Callable[[RunStore], _T], wait_s: float) -> _T | object | None:
        """`write(store)`, waiting at most `wait_s` for another process's lock: its value, `_LOCKED`, or None after an error."""
        store = self._store
        if self.error or store is None:
            return None
        try:
            with store.waiting_at_most(wait_s):
                value = write(store)
        except Exception as exc:  # StoreError, sqlite3.Error, OSError, KeyError, or anything: recording must never cost the run
            if database.is_busy(exc):
                self.locked_out = database.problem(exc, store.path)
                return _LOCKED
            self.error = self._explain(exc, store.path)
            return None
        self.locked_out = ""
        return value

    def _explain(self, exc: Exception, path: Path) -> str:
        where = f"The run history {path}"
        if isinstance(exc, KeyError):
            return f"{where} no longer has run {self.run_id} (it was deleted while the run trained); the rest of this run is not saved."
        reason = str(exc) if isinstance(exc, StoreError) else f"{where} could not be written: {database.problem(exc, path)}."
        return reason + self._what_is_kept()

    def _explain_lock(self) -> str:
        path = self._store.path if self._store is not None else ""
        return f"The run history {path} stayed locked for {FINISH_WAIT_S:g} s at the run's end: {self.locked_out}." + self._what_is_kept()

    def _what_is_kept(self) -> str:
        if self.run_id is None:
            return " This run is not saved there."
        return " The steps recorded before that are kept there, and the run reads back as interrupted."
