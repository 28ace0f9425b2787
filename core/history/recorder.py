"""Record a run in the history while it trains, so a crash loses at most the last second.

`HistoryRecorder` is a `RunCallback`: `begin()` records the run as "running" before
it starts, `on_steps` appends the steps in one transaction at most every
`flush_interval_s`, and `on_run_end` writes the result. After a crash or `kill -9`
the run reads back as "interrupted" with every appended step (see
`RunStore._mark_interrupted`). It writes in the thread that trains, never the GUI's.

A history that cannot be written never costs the run: the first failure is kept
in `error` (for one message to the user) and recording stops.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from core.config import RunConfig
from core.history.store import RunStore, StoreError
from core.results import RunResult, StepRecord
from core.training.callbacks import RunCallback

FLUSH_INTERVAL_S = 1.0


class HistoryRecorder(RunCallback):
    """Writes one run to `store` as it happens: begun, steps appended about once a second, finished."""

    def __init__(
        self,
        store: RunStore,
        config: RunConfig,
        label: str = "",
        group: str = "",
        environment: dict[str, Any] | None = None,
        flush_interval_s: float = FLUSH_INTERVAL_S,
    ):
        self._store = store
        self._config = config
        self._label = label
        self._group = group
        self._environment = environment
        self._interval_s = flush_interval_s
        self._pending: list[StepRecord] = []
        self._last_flush = time.monotonic()
        self.run_id: int | None = None
        self.error = ""

    def begin(self) -> int | None:
        """Record the run as running; returns its id (None when the history could not be written)."""
        self.run_id = self._attempt(lambda: self._store.begin_run(self._config, self._label, self._group, self._environment))
        return self.run_id

    def on_steps(self, records: Sequence[StepRecord]) -> None:
        self._pending.extend(records)
        if time.monotonic() - self._last_flush >= self._interval_s:
            self.flush()

    def flush(self) -> None:
        """Append the steps gathered since the last flush, in one transaction."""
        records, self._pending = self._pending, []
        self._last_flush = time.monotonic()
        if records and self.run_id is not None:
            self._attempt(lambda: self._store.append_steps(self.run_id, records))

    def on_run_end(self, result: RunResult) -> None:
        self.finish(result)

    def finish(self, result: RunResult) -> int | None:
        """Record how the run ended (begins it first if `begin` was never called); returns its id."""
        if self.run_id is None and not self.error:
            self.begin()
        self._pending = []
        if self.run_id is not None:
            self._attempt(lambda: self._store.finish_run(self.run_id, result))
        return self.run_id if not self.error else None

    def _attempt(self, write):
        if self.error:
            return None
        try:
            return write()
        except (StoreError, sqlite3.Error, OSError) as exc:
            self.error = f"The run history {self._store.path} could not be written ({exc}); this run is not saved there."
            return None
