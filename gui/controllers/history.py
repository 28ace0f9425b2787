"""Where the GUI records runs in the history (core.history.store.RunStore), from the job's worker thread.

A job (a training run, a comparison) opens the store once, in its worker thread
(`JobHistory`), and the job service (`core.jobs.run_job`) records each of its
runs there: begun before it trains, its steps appended about once a second,
finished with its result. After a crash the run reads back as "interrupted" with its steps. The
GUI thread never touches this store; reading, exporting and deleting stored
runs is the History panel's (gui.panels.history), through its own store.
"""

from __future__ import annotations

import sqlite3

from core.history.store import RunStore, StoreError


class JobHistory:
    """The history as one job's worker thread writes it: opened on entry, closed on exit.

    A history that cannot be opened never stops the job: `error` says why
    (one message for the user), and `is_open` is False.
    """

    def __init__(self) -> None:
        self.error = ""
        self._store: RunStore | None = None

    def __enter__(self) -> JobHistory:
        try:
            self._store = RunStore.open()
        except (StoreError, sqlite3.Error, OSError) as exc:
            self.error = f"The run was not saved to the history: {exc}"
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    @property
    def is_open(self) -> bool:
        """True when runs can be recorded (the store opened)."""
        return self._store is not None

    @property
    def store(self) -> RunStore | None:
        """The open store (None when it could not be opened: `error` says why)."""
        return self._store

    def groups(self) -> list[str]:
        """The run groups in use (a sweep numbers itself after them); none when the store is not open."""
        return self._store.groups() if self._store is not None else []
