"""Stopping a CLI run from the keyboard: the first Ctrl-C stops after the call in flight, the second aborts."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable


class stop_on_interrupt:
    """Context manager: the first Ctrl-C sets a stop event (the run ends cleanly), the second aborts."""

    def __enter__(self) -> threading.Event:
        self.event = threading.Event()
        self._previous: Callable | int | None = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self.event

    def _handle(self, _signum, _frame) -> None:
        if self.event.is_set():
            raise KeyboardInterrupt
        self.event.set()
        print("\nstopping after the current step call (Ctrl-C again to abort)", file=sys.stderr)

    def __exit__(self, *exc_info) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
