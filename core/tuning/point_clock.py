"""One autotune point's clock: stopped once its samples/s is known, once it is told apart from the best so far,
once it is plainly slower than the best, at the deadline, or on Stop; abandoned past the slack.

`PointClock` is the point's hook (it sets the point's stop event between calls).
A point is known once its steady calls give its samples/s within
±PRECISION (a 95% t-interval over BATCHES contiguous batches of its calls,
batch means: neighbouring calls are correlated), after MIN_STEADY_CALLS calls
and MIN_POINT_S; at `measure_s` at the latest. So a point of millisecond steps
is timed for a tenth of a second and one of long, noisy calls for longer. It
is known sooner where it is told apart from the best so far (`Reference`: its
samples/s and that interval's half-width): its own samples/s differs from the
best's by more than the two half-widths together, so more calls would not
change whether it is faster; only a point within noise of the best runs on to
the precision, which ranks it against the best. A
point reading under `floor_rate` samples/s (a share of the best's) after
GIVE_UP_AFTER_S of steady calls stops there: it cannot become the best, and
its slow calls (an XLA compilation's ten-times-slower steps on a CPU) would
cost the most of any point. `bounded_run` runs a point (or the last check's
rounds) in its own thread, sets its stop at the deadline or on the user's Stop
(a TPU being probed stops too) and gives up on it, returning None, at the hard
deadline: a call still in flight then is left to finish in its thread, so the
command ends within its budget plus the slack.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

import numpy as np

from core.results import StepRecord
from core.training.hooks import RunContext, RunHook

MIN_STEADY_CALLS = 3
MIN_POINT_S = 0.1
"""Steady seconds (of its calls' step times) a point is timed at the least, however steady its calls."""
PRECISION = 0.05
"""A point's samples/s is known once its 95% interval lies within this share of it, either side."""
BATCHES = 8
"""Contiguous batches of calls the interval is taken over (fewer when there are fewer calls)."""
_CHECK_GROWTH = 1.1
"""The interval is worked out again once the calls have grown by this factor (a point of short calls makes thousands)."""
GIVE_UP_AFTER_S = 0.25
"""Steady seconds a point runs before its samples/s may stop it as plainly slower (one call at least)."""
_POLL_S = 0.1
"""How often `bounded_run` looks at the clock and the user's Stop while the work runs."""
T = TypeVar("T")


class Reference(NamedTuple):
    """The best point so far, as a new point is told apart from it: its samples/s and its interval's relative half-width."""

    samples_per_s: float
    half_width: float


def reference_of(samples_per_s: float | None, calls: tuple[Sequence[float], Sequence[int]] | None) -> Reference | None:
    """The Reference of a measured point from its samples/s and its steady calls (seconds, steps each); None without them."""
    if not samples_per_s or calls is None:
        return None
    width = relative_half_width(*calls)
    return Reference(samples_per_s, width) if width is not None else None


def relative_half_width(seconds: Sequence[float], steps: Sequence[int]) -> float | None:
    """The 95% interval's half-width of a run's steps per second over its mean, from its steady calls (seconds, steps each),
    by batch means: the calls in up to BATCHES contiguous batches, a t-interval over the batches' rates. None under
    MIN_STEADY_CALLS calls."""
    if len(seconds) < MIN_STEADY_CALLS:
        return None
    from scipy.special import stdtrit

    groups = min(BATCHES, len(seconds))
    rates = np.array(
        [
            step.sum() / second.sum()
            for second, step in zip(np.array_split(np.asarray(seconds), groups), np.array_split(np.asarray(steps), groups), strict=True)
        ]
    )
    spread = float(np.std(rates, ddof=1)) / math.sqrt(groups)
    return float(stdtrit(groups - 1, 0.975)) * spread / float(np.mean(rates))


class PointClock(RunHook):
    """Stops a point once its samples/s is known (see the module docstring) or it has timed `measure_s` of steady state,
    once it is told apart from `reference` (the best so far; None: never), once its steady samples/s fall under
    `floor_rate` (None: never), at the deadline, or on Stop; `gave_up` says the floor stopped it, `told_apart` the
    reference, `finished` that it was not cut short."""

    def __init__(
        self,
        point_stop: threading.Event,
        user_stop: threading.Event,
        measure_s: float,
        deadline: float,
        floor_rate: float | None = None,
        reference: Reference | None = None,
    ):
        self.point_stop = point_stop
        self.user_stop = user_stop
        self.measure_s = measure_s
        self.deadline = deadline
        self.floor_rate = floor_rate
        self.reference = reference
        self.told_apart = False
        self.steady_since: float | None = None
        self.gave_up = False
        self.finished = False  # its samples/s known, or timed measure_s, or gave up as plainly slower: not cut short
        self._batch_size = 0
        self._call_seconds: list[float] = []
        self._call_steps: list[int] = []
        self._steady_seconds = 0.0
        self._steady_steps = 0
        self._next_check = MIN_STEADY_CALLS

    @property
    def steady_calls(self) -> int:
        return len(self._call_seconds)

    def on_run_start(self, context: RunContext) -> None:
        self._batch_size = context.config.batch_size
        self._check(time.monotonic())

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        now = time.monotonic()
        if self.steady_since is None:
            self.steady_since = now  # the warm-up call just ended
        elif records:
            self._call_seconds.append(sum(record.step_time_s for record in records))
            self._call_steps.append(len(records))
            self._steady_seconds += self._call_seconds[-1]
            self._steady_steps += len(records)
        self._check(now)

    def _check(self, now: float) -> None:
        if not self.finished:
            known = self._known(now)
            self.gave_up = self._plainly_slower(settled=known)
            self.finished = known or self.gave_up
        if self.finished or now >= self.deadline or self.user_stop.is_set():
            self.point_stop.set()

    def _known(self, now: float) -> bool:
        if self.steady_since is None or self.steady_calls < MIN_STEADY_CALLS:
            return False
        if now - self.steady_since >= self.measure_s:
            return True
        if self._steady_seconds < MIN_POINT_S or self.steady_calls < self._next_check:
            return False
        self._next_check = math.ceil(self.steady_calls * _CHECK_GROWTH)
        width = relative_half_width(self._call_seconds, self._call_steps)
        if width is None:
            return False
        self.told_apart = self._apart_from_reference(width)
        return width <= PRECISION or self.told_apart

    def _apart_from_reference(self, width: float) -> bool:
        """Its samples/s differs from the reference's by more than their intervals' half-widths together."""
        if self.reference is None:
            return False
        rate = self._steady_steps * self._batch_size / self._steady_seconds
        return abs(rate / self.reference.samples_per_s - 1) > width + self.reference.half_width

    def _plainly_slower(self, settled: bool) -> bool:
        """Under the floor, once GIVE_UP_AFTER_S of steady calls or a settled rate says so (a fast point settles sooner)."""
        if self.floor_rate is None or not self._steady_steps or not (settled or self._steady_seconds >= GIVE_UP_AFTER_S):
            return False
        return self._steady_steps * self._batch_size / self._steady_seconds < self.floor_rate


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
