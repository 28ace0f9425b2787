"""One autotune point's clock: stopped once it has timed its share of the budget, at the deadline, or on Stop; abandoned past the slack.

`PointClock` is the point's hook (it sets the point's stop event between calls);
`bounded_run` runs the point in its own thread with a timer that sets the stop
at the deadline (a TPU being probed stops too) and gives up on it, returning
None, at the hard deadline: a call still in flight then is left to finish in its
thread, so the command ends within its budget plus the slack.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from core.results import RunResult, StepRecord
from core.training.callbacks import RunCallback, RunContext

MIN_STEADY_CALLS = 3


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

    def on_steps(self, records: Sequence[StepRecord]) -> None:
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


def bounded_run(run: Callable[[], RunResult], point_stop: threading.Event, deadline: float, hard_deadline: float) -> RunResult | None:
    """`run()` (a point that `point_stop` stops) in its own thread: stopped at `deadline`, abandoned (None) at `hard_deadline`."""
    outcome: list[RunResult] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(run())
        except BaseException as exc:  # re-raised in the searching thread
            errors.append(exc)

    timer = threading.Timer(max(0.0, deadline - time.monotonic()), point_stop.set)
    timer.daemon = True
    timer.start()
    worker = threading.Thread(target=work, name="autotune-point", daemon=True)
    worker.start()
    worker.join(max(0.0, hard_deadline - time.monotonic()))
    timer.cancel()
    if worker.is_alive():
        point_stop.set()
        return None
    if errors:
        raise errors[0]
    return outcome[0]
