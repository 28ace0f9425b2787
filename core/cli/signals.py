"""Stopping a CLI run: Ctrl-C, SIGTERM and SIGHUP stop after the call in flight; a second one ends at once.

SIGTERM is what `timeout`, Slurm preemption and systemd send, SIGHUP what a
closed terminal or a logout sends: both get Ctrl-C's treatment, so the partial
result is printed and saved. The second signal ends the process at once
(`os._exit`, no traceback): SQLite never commits half a transaction, so the run
stays in the history with the steps appended so far and reads back as
"interrupted" (`core.history.store`).

Python runs signal handlers in the main thread only, between bytecodes: a
step call inside TensorFlow could hold one off for as long as the call takes.
`run_interruptibly` therefore trains in a worker thread while the main thread
waits, so a signal is handled at once. `ends_by` ends the process at a deadline
even inside such a call (or TensorFlow's import): a budget bounds the command.

`main.py worker` stops the same way, in `core.cluster.worker.attend` (below this
package, so with its own handler): a worker trains in a child process, because
TensorFlow's cluster set-up holds the GIL and takes SIGTERM for itself; a
multi-worker `run`'s chief is such a child too (`core.cluster.supervisor`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

from core.cli.exits import EXIT_RUN_FAILED

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
WAIT_S = 0.2

_T = TypeVar("_T")
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None  # what signal.signal returns and takes


class stop_on_signals:
    """Context manager: the first stop signal sets the yielded event, the second ends the process at once."""

    def __enter__(self) -> threading.Event:
        self.event = threading.Event()
        self._previous: dict[int, _Handler] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self.event

    def _handle(self, signum: int, _frame: object) -> None:
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if self.event.is_set():
            _say(f"\n{name} again: stopping now; the run is kept in the history as interrupted, with the steps saved so far")
            os._exit(EXIT_RUN_FAILED)
        self.event.set()
        _say(f"\n{name}: stopping after the current step call ({name} again to stop at once)")

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def run_interruptibly(work: Callable[[], _T]) -> _T:
    """`work()` in a worker thread while this thread waits for it, so signals are handled at once; its result or exception."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in the waiting thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="device-lab-cli-run", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(WAIT_S)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def _say(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, RuntimeError):  # stderr closed (a logged-out terminal): stopping matters more than saying so
        pass


@contextmanager
def ends_by(deadline: float, on_time_out: Callable[[], None], code: int = EXIT_RUN_FAILED) -> Iterator[None]:
    """Inside the block the process ends at `deadline` (time.monotonic()), whatever runs: `on_time_out()` says why, then exit `code`."""

    def end() -> None:
        try:
            on_time_out()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

    timer = threading.Timer(max(0.0, deadline - time.monotonic()), end)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
