"""Record a run in the history while it trains, so a crash loses at most the last second.

`HistoryRecorder` is a `RunCallback`: `begin()` records the run as "running" before
it starts, `on_steps` appends the steps in one transaction at most every
`flush_interval_s`, and `finish(result)` writes the result, once (the job
service, `core.jobs`, calls it with the final result, its verdict included). After a crash or `kill -9`
the run reads back as "interrupted" with every appended step and the figures of
those steps (see `RunStore._close_abandoned_runs`). It writes in the thread that
trains, never the GUI's.

A history that cannot be written never costs the run: the first failure is kept
in `error` (for one message to the user) and recording stops.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from core.config import RunConfig
from core.history.store import RunStore, StoreError
from core.results import RunResult, StepRecord
from core.training.callbacks import RunCallback

FLUSH_INTERVAL_S = 1.0

_T = TypeVar("_T")


class HistoryRecorder(RunCallback):
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
        self.run_id: int | None = None
        self.error = error
        self.finished = False

    def begin(self) -> int | None:
        """Record the run as running; returns its id (None when the history could not be written)."""
        if self.run_id is None:
            self.run_id = self._attempt(lambda store: store.begin_run(self._config, self._label, self._group, self._environment))
        return self.run_id

    def on_steps(self, records: Sequence[StepRecord]) -> None:
        self._pending.extend(records)
        if time.monotonic() - self._last_flush >= self._interval_s:
            self.flush()

    def flush(self) -> None:
        """Append the steps gathered since the last flush, in one transaction."""
        records, self._pending = self._pending, []
        self._last_flush = time.monotonic()
        run_id = self.run_id
        if records and run_id is not None:
            self._attempt(lambda store: store.append_steps(run_id, records))

    def finish(self, result: RunResult) -> int | None:
        """Record how the run ended; returns its id, or None when the history could not be written.

        A run never begun (it failed before it started) is saved in one
        transaction. A run is finished once: a second call raises RuntimeError.
        """
        if self.finished:
            raise RuntimeError(f"run {self.run_id} of the history was already finished")
        self.finished = True
        run_id = self.run_id
        if run_id is None:
            self.run_id = self._attempt(lambda store: store.save(result, self._label, self._group))
        else:
            if not result.losses:
                self.flush()  # the result has no series: keep the appended steps complete
            self._attempt(lambda store: store.finish_run(run_id, result))
        self._pending = []
        return self.run_id if not self.error else None

    def discard(self) -> None:
        """Remove a begun run that turned out not to be one (its job was refused as it started); records nothing more."""
        run_id = self.run_id
        if run_id is not None and not self.finished:
            self._attempt(lambda store: store.delete([run_id]))
        self.finished = True
        self._pending = []

    def _attempt(self, write: Callable[[RunStore], _T]) -> _T | None:
        store = self._store
        if self.error or store is None:
            return None
        try:
            return write(store)
        except Exception as exc:  # StoreError, sqlite3.Error, OSError, KeyError, or anything: recording must never cost the run
            self.error = self._explain(exc, store.path)
            return None

    def _explain(self, exc: Exception, path: Path) -> str:
        where = f"The run history {path}"
        if isinstance(exc, KeyError):
            return f"{where} no longer has run {self.run_id} (it was deleted while the run trained); the rest of this run is not saved."
        reason = str(exc) if isinstance(exc, StoreError) else f"{where} could not be written ({type(exc).__name__}: {exc})."
        if self.run_id is None:
            return f"{reason} This run is not saved there."
        return f"{reason} The steps recorded before that are kept there, and the run reads back as interrupted."
