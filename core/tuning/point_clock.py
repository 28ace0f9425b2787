"""One autotune point's clock: stopped once it has timed its share of the budget, at the deadline, or on Stop; abandoned past the slack.

`PointClock` is the point's hook (it sets the point's stop event between calls);
`bounded_run` runs a point (or the last check's rounds) in its own thread, sets
its stop at the deadline or on the user's Stop (a TPU being probed stops too)
and gives up on it, returning None, at the hard deadline: a call still in
flight then is left to finish in its thread, so the command ends within its
budget plus the slack.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from core.results import StepRecord
from core.training.callbacks import RunCallback, RunContext

MIN_STEADY_CALLS = 3
_POLL_S = 0.1
"""How often `bounded_run` looks at the clock and the user's Stop while the work runs."""
T = TypeVar("T")


class PointClock(RunCallback):
    """Stops a point once it has timed `measure_s` of steady state (MIN_STEADY_CALLS calls at least), at the deadline, or on Stop."""

    def __init__(self, point_stop: threading.Event, user_stop: threading.Event, measure_s: float, deadline: float):
        self.point_stop = point_stop
        self.user_stop = user_stop
        self.measure_s = measure_s
        self.deadline = deadline
        self.steady_since: float | None = None
        self.steady_calls = 0

    def on_run_start(self, context: RunContext) -> None:
        self._check(time.monotonic())

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        now = time.monotonic()
        if self.steady_since is None:
            self.steady_since = now  # the warm-up call just ended
        else:
            self.steady_calls += 1
        self._check(now)

    def _check(self, now: float) -> None:
        measured = self.steady_since is not None and now - self.steady_since >= self.measure_s and self.steady_calls >= MIN_STEADY_CALLS
        if measured or now >= self.deadline or self.user_stop.is_set():
            self.point_stop.set()


def bounded_run(
    run: Callable[[], T], stop: threading.Event, deadline: float, hard_deadline: float, user_stop: threading.Event | None = None
) -> T | None:
    """`run()` (work that `stop` stops) in its own thread: stopped at `deadline` or on `user_stop`, abandoned (None) at `hard_deadline`."""
    outcome: list[T] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(run())
        except BaseException as exc:  # re-raised in the calling thread
            errors.append(exc)

    worker = threading.Thread(target=work, name="autotune-point", daemon=True)
    worker.start()
    while worker.is_alive():
        now = time.monotonic()
        if now >= hard_deadline:
            stop.set()
            return None
        if now >= deadline or (user_stop is not None and user_stop.is_set()):
            stop.set()
        worker.join(min(_POLL_S, hard_deadline - now))
    if errors:
        raise errors[0]
    return outcome[0]
