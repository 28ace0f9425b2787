"""Find the fastest settings: `autotune(config, budget_s) -> AutotuneResult`.

A coordinate search within a time budget, at the user's global batch so the
learning problem stays the same: first the precisions this target runs
usefully (`core.tuning.sweep_plan.plan_sweep` leaves out float16 on a CPU and
bfloat16 on CPUs without AVX-512/AMX; precision moves the step time most, and
the call sizes worth trying depend on it), then steps per call (1, 4, 16, 64;
only call sizes that keep one call under MAX_CALL_S), then XLA; with
`allow_batch_change`, then larger batches (doubling, bounded by the largest
batch that fits). Each stage keeps the fastest point so far; a setting takes
over only when it is faster beyond noise: the 95% block-bootstrap interval of
its samples/s over the best's (from the per-call timings, `core.training.noise`)
lies above 1 (with no timings, by GAIN_THRESHOLD). The result says how sure
(`gain_ci`, `sureness`). The start settings and Keras's defaults (one step per execution,
float32, no XLA) are measured too, so the gain over both is known, and at the
end the start and the best are measured again (each figure is then the mean of
its two measurements): the first run in a process pays for thread pools and
caches that later runs find warm.

Every point is an ordinary run (`core.jobs.run_job`, not recorded) stopped once it
has timed its share of the budget in steady state (the first call, tracing
and compilation, is warm-up). The start point (the baseline) always runs; any
other is launched only when its set-up, warm-up and shortest measurement fit
in the time left (estimated from the points so far). A running point stops
after its call in flight when the budget runs out or Stop is pressed (a timer
sets its stop at the deadline, so a TPU being probed stops too).

The budget bounds the whole command: it counts from `started` (the CLI passes
the moment the command began, so TensorFlow's start-up is counted), and the
command ends within the budget plus BUDGET_SLACK_S. A point whose call is still
running at the deadline plus that slack is abandoned (left to finish in its
thread, its figures discarded) and the search ends there. A search that
measured nothing has an `error` saying why. Points are not recorded in the history.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.config import MAX_STEPS, PRECISIONS, ConfigError, RunConfig
from core.jobs import JobOptions, RecordedRun, run_job
from core.results import RunStatus
from core.training.noise import Interval, bootstrap_ratio, call_times
from core.tuning.max_batch import default_memory_limit
from core.tuning.point_clock import PointClock, bounded_run

DEFAULT_BUDGET_S = 120.0
MIN_BUDGET_S = 5.0
MAX_BUDGET_S = 86_400.0
CALL_SIZES = (1, 4, 16, 64)
MAX_CALL_S = 1.0
"""Larger call sizes are tried only while one call stays under a second: Stop and the budget act between calls."""
MIN_MEASURE_S = 1.0
MAX_MEASURE_S = 8.0
GAIN_THRESHOLD = 0.02
SETUP_GUESS_S = 2.0
"""Set-up and warm-up of a point before any was timed (XLA: XLA_SETUP_GUESS_S, compilation is slower)."""
XLA_SETUP_GUESS_S = 6.0
END_RESERVE_S = 0.5
BUDGET_SLACK_S = 10.0
"""The command ends within its budget plus this: the most a point's call in flight may run past the deadline before it is abandoned."""
TUNED = ("steps_per_call", "precision", "xla", "batch_size")
KERAS_DEFAULTS = {"steps_per_call": 1, "precision": "off", "xla": False}
BUDGET_FIELD = "--budget-s"

OnPoint = Callable[["TunePoint"], None]
Runner = Callable[..., RecordedRun]


@dataclass(frozen=True)
class TunePoint:
    """One measured (or skipped) setting: the stage that tried it, its settings, samples/s and why it has none."""

    stage: str
    settings: dict[str, Any]
    status: str  # "measured" | "failed" | "skipped" | "stopped"
    samples_per_s: float | None = None
    step_time_ms: float | None = None
    seconds: float = 0.0
    message: str = ""
    peak_bytes: int | None = None
    calls: tuple[Any, Any] | None = field(default=None, compare=False, repr=False)  # core.training.noise.call_times of the run
    contended: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "settings": dict(self.settings),
            "status": self.status,
            "samples_per_s": self.samples_per_s,
            "step_time_ms": self.step_time_ms,
            "seconds": round(self.seconds, 2),
            "message": self.message,
            "peak_bytes": self.peak_bytes,
            "contended": self.contended,
        }


@dataclass(frozen=True)
class AutotuneResult:
    """The fastest settings found, their samples/s, the start's and Keras defaults', and every point tried."""

    start: dict[str, Any]
    best: dict[str, Any]
    samples_per_s: float | None
    baseline_samples_per_s: float | None
    keras_defaults_samples_per_s: float | None
    points: tuple[TunePoint, ...]
    budget_s: float
    elapsed_s: float
    stopped: bool = False
    error: str = ""
    left_out: tuple[tuple[str, str], ...] = ()
    learning_rate: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    gain_interval: Interval | None = None  # best over start, 95% interval from the per-call timings
    abandoned: bool = False  # a point's call was still running past the deadline plus the slack (left in its thread)

    @property
    def measured(self) -> bool:
        """True when at least one point was measured (else every figure is None and `error` says why)."""
        return any(point.status == "measured" for point in self.points)

    @property
    def gain(self) -> float | None:
        return _ratio(self.samples_per_s, self.baseline_samples_per_s)

    @property
    def gain_over_keras_defaults(self) -> float | None:
        return _ratio(self.samples_per_s, self.keras_defaults_samples_per_s)

    def changes(self) -> dict[str, Any]:
        """The RunConfig fields to change to apply the best settings (the scaled learning rate with a new batch)."""
        changed = {name: value for name, value in self.best.items() if self.start.get(name) != value}
        if "batch_size" in changed and self.learning_rate is not None:
            changed["learning_rate"] = self.learning_rate
        return changed

    def to_dict(self) -> dict[str, Any]:
        return {
            "best": dict(self.best),
            "samples_per_s": self.samples_per_s,
            "baseline_samples_per_s": self.baseline_samples_per_s,
            "gain": self.gain,
            "gain_ci": self.gain_interval.to_list() if self.gain_interval is not None else None,
            "beyond_noise": self.gain_interval.beyond_noise if self.gain_interval is not None else None,
            "sureness": self.gain_interval.sureness() if self.gain_interval is not None else "",
            "slack_s": BUDGET_SLACK_S,
            "abandoned": self.abandoned,
            "keras_defaults_samples_per_s": self.keras_defaults_samples_per_s,
            "gain_over_keras_defaults": self.gain_over_keras_defaults,
            "start": dict(self.start),
            "changes": self.changes(),
            "points": [point.to_dict() for point in self.points],
            "budget_s": self.budget_s,
            "elapsed_s": round(self.elapsed_s, 2),
            "stopped": self.stopped,
            "error": self.error,
            "left_out": [{"precision": value, "reason": reason} for value, reason in self.left_out],
            "notes": list(self.notes),
        }


def check_budget(budget_s: Any, field_name: str = BUDGET_FIELD) -> float:
    """The budget in seconds; ConfigError unless it is a number from MIN_BUDGET_S to MAX_BUDGET_S."""
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not MIN_BUDGET_S <= budget_s <= MAX_BUDGET_S:
        raise ConfigError(field_name, budget_s, f"seconds from {MIN_BUDGET_S:g} to {MAX_BUDGET_S:g}, such as 120")
    return float(budget_s)


def settings_of(config: RunConfig) -> dict[str, Any]:
    """The settings autotune varies, as `config` has them."""
    return {name: getattr(config, name) for name in TUNED}


def settings_text(settings: dict[str, Any]) -> str:
    """'batch 64 · 16 steps/call · float32 · XLA off': the tuned settings present in `settings`, as people read them."""
    from core.tuning.sweep_plan import format_setting

    return " · ".join(
        format_setting(name, settings[name]) for name in ("batch_size", "steps_per_call", "precision", "xla") if name in settings
    )


def usable_precisions(config: RunConfig, has_accelerator: bool | None = None, cpu_flags: Sequence[str] | None = None):
    """(precisions this target runs usefully, ((precision, why it is left out), ...)), as a sweep decides."""
    from core.tuning.sweep_plan import plan_sweep

    plan = plan_sweep(config, {"precision": PRECISIONS}, has_accelerator, cpu_flags)
    return tuple(plan.axes[0].values), tuple((item.value, item.reason) for item in plan.left_out)


def autotune(
    config: RunConfig,
    budget_s: float = DEFAULT_BUDGET_S,
    allow_batch_change: bool = False,
    max_batch: int | None = None,
    stop_event: threading.Event | None = None,
    on_point: OnPoint | None = None,
    memory_limit: int | None = None,
    has_accelerator: bool | None = None,
    cpu_flags: Sequence[str] | None = None,
    run: Runner = run_job,
    started: float | None = None,
) -> AutotuneResult:
    """Search the fastest settings for `config` within `budget_s` seconds (see the module docstring).

    `max_batch` bounds the batch stage (the largest batch that fits, if
    known); without it a larger batch is tried on the CPU only while twice the
    last point's peak memory stays under `memory_limit` (default: half of the
    available RAM). `has_accelerator` and `cpu_flags` (None: ask the machine)
    decide the precisions; `run` is the job service (`core.jobs.run_job`);
    `started` the time.monotonic() the budget counts from (default: now).
    """
    from core.tuning.sweep_plan import target_has_accelerator

    started = time.monotonic() if started is None else started
    budget_s = check_budget(budget_s)
    accelerated = target_has_accelerator(config) if has_accelerator is None else has_accelerator
    precisions, left_out = usable_precisions(config, accelerated, cpu_flags)
    tuner = _Tuner(config, (started, budget_s), stop_event or threading.Event(), on_point, run)
    tuner.plan(len(precisions), allow_batch_change)
    start = tuner.measure(settings_of(config), "start")
    if start.status == "measured":
        tuner.search(precisions)
        if allow_batch_change:
            tuner.batches(max_batch, None if accelerated else (memory_limit or default_memory_limit()))
        tuner.measure_again()
    return tuner.result(left_out)


class _Tuner:
    """The search's state: the deadline, the points so far, the fastest, and what set-up costs."""

    def __init__(self, config: RunConfig, clock: tuple[float, float], stop_event: threading.Event, on_point: OnPoint | None, run: Runner):
        self.config = config
        self.started, self.budget_s = clock  # monotonic start, budget in seconds
        self.deadline = self.started + self.budget_s
        self.stop_event = stop_event
        self.on_point = on_point
        self.run = run
        self.points: list[TunePoint] = []
        self.overheads: dict[bool, float] = {}
        self.measure_s = MIN_MEASURE_S
        self.notes: list[str] = []
        self.abandoned = False  # a point's call outlived the deadline plus the slack: nothing more runs

    def plan(self, precisions: int, allow_batch_change: bool) -> None:
        """Share the budget among the points the search expects to run."""
        expected = 1 + 1 + (len(CALL_SIZES) - 1) + (precisions - 1) + 1 + (3 if allow_batch_change else 0) + 2
        self.measure_s = min(MAX_MEASURE_S, max(MIN_MEASURE_S, self.budget_s / expected - SETUP_GUESS_S))

    def measure(self, settings: dict[str, Any], stage: str) -> TunePoint:
        """Run one point (or skip it when it cannot finish in time) and record it."""
        point = self._skip_reason(settings, stage) or self._run_point(settings, stage)
        self.points.append(point)
        if self.on_point is not None:
            self.on_point(point)
        return point

    def _skip_reason(self, settings: dict[str, Any], stage: str) -> TunePoint | None:
        """Why the point does not run: Stop, or too little time left (the start point, the baseline, always runs)."""
        if self.stop_event.is_set():
            return TunePoint(stage, settings, "stopped", message="stopped before it started")
        if self.abandoned:
            return TunePoint(stage, settings, "skipped", message="not run: an earlier point's call outlived the budget")
        if not self.points:
            late = time.monotonic() - self.deadline
            return (
                TunePoint(stage, settings, "skipped", message=f"not started: the budget ran out {late:.1f} s before it")
                if late > 0
                else None
            )
        needed = self.overheads.get(settings["xla"], XLA_SETUP_GUESS_S if settings["xla"] else SETUP_GUESS_S) + MIN_MEASURE_S
        left = self.deadline - time.monotonic()
        if left < needed + END_RESERVE_S:
            return TunePoint(stage, settings, "skipped", message=f"not enough time left ({left:.1f} s; it needs about {needed:.1f} s)")
        return None

    def _run_point(self, settings: dict[str, Any], stage: str) -> TunePoint:
        try:
            job = self.config.with_changes(**settings, steps=MAX_STEPS, epochs=None)
        except ConfigError as exc:
            return TunePoint(stage, settings, "failed", message=str(exc))
        point_stop = threading.Event()
        clock = PointClock(point_stop, self.stop_event, self.measure_s, self.deadline - END_RESERVE_S)
        began = time.monotonic()
        result = bounded_run(
            lambda: self.run(job, None, JobOptions(hooks=(clock,)), point_stop).result,
            point_stop,
            clock.deadline,
            self.deadline + BUDGET_SLACK_S,
        )
        seconds = time.monotonic() - began
        if result is None:
            self.abandoned = True
            message = f"abandoned: its call was still running {BUDGET_SLACK_S:g} s after the deadline (the budget bounds the command)"
            return TunePoint(stage, settings, "stopped", seconds=seconds, message=message)
        steady_s = time.monotonic() - clock.steady_since if clock.steady_since is not None else 0.0
        self.overheads[settings["xla"]] = seconds - steady_s  # the latest: the first point in a process also pays for its start-up
        if result.status == RunStatus.FAILED:
            return TunePoint(stage, settings, "failed", seconds=seconds, message=result.message)
        if result.samples_per_s is None:
            status = "stopped" if self.stop_event.is_set() else "skipped"
            return TunePoint(stage, settings, status, seconds=seconds, message="no steady-state step was timed")
        calls = call_times(result.step_times_s, result.warmup_steps, int(result.config.get("steps_per_call") or 1))
        busy = f"measured while {result.conditions.get('reason')}" if result.contended else ""
        return TunePoint(
            stage,
            settings,
            "measured",
            result.samples_per_s,
            result.step_time_median_ms,
            seconds,
            busy,
            result.peak_memory_bytes,
            calls,
            result.contended,
        )

    def rate(self, settings: dict[str, Any]) -> float | None:
        """Mean samples/s of the measurements of `settings`; None when none was measured."""
        rates = [p.samples_per_s for p in self.points if p.settings == settings and p.samples_per_s is not None]
        return sum(rates) / len(rates) if rates else None

    def best(self) -> dict[str, Any]:
        """The fastest settings: in the order they were first measured, each takes over only when faster beyond noise."""
        chosen: dict[str, Any] | None = None
        for point in self.points:
            if point.status == "measured" and (chosen is None or self._faster(point.settings, chosen)):
                chosen = point.settings
        return dict(chosen) if chosen is not None else settings_of(self.config)

    def interval(self, settings: dict[str, Any], than: dict[str, Any]) -> Interval | None:
        """`settings`' samples/s over `than`'s with its 95% interval, from all their measured calls; None without timings."""
        pooled = [self._calls(s) for s in (than, settings)]
        if any(calls is None for calls in pooled):
            return None
        return bootstrap_ratio(pooled[0], pooled[1], settings["batch_size"] / than["batch_size"])  # type: ignore[arg-type]

    def _calls(self, settings: dict[str, Any]) -> tuple[Any, Any] | None:
        found = [p.calls for p in self.points if p.settings == settings and p.status == "measured" and p.calls is not None]
        return (np.concatenate([c[0] for c in found]), np.concatenate([c[1] for c in found])) if found else None

    def _faster(self, settings: dict[str, Any], than: dict[str, Any]) -> bool:
        found = self.interval(settings, than)  # without timings, the mean rates by GAIN_THRESHOLD
        return found.low > 1 if found is not None else (self.rate(settings) or 0) > (self.rate(than) or 0) * (1 + GAIN_THRESHOLD)

    def tried(self, settings: dict[str, Any]) -> bool:
        return any(p.settings == settings and p.status in ("measured", "failed") for p in self.points)

    def try_point(self, changes: dict[str, Any], stage: str) -> bool:
        """Measure the best settings with `changes`; True when they became the best."""
        settings = {**self.best(), **changes}
        if self.tried(settings) or self.stop_event.is_set():
            return False
        self.measure(settings, stage)
        return self.best() == settings

    def search(self, precisions: Sequence[str]) -> None:
        """The stages at the user's batch after the start point: Keras defaults, precision, steps per call, XLA."""
        start = settings_of(self.config)
        defaults = {**start, **KERAS_DEFAULTS}
        if defaults != start:
            self.measure(defaults, "Keras defaults")
        for precision in precisions:
            self.try_point({"precision": precision}, "precision")
        self._call_sizes()
        self.try_point({"xla": not self.best()["xla"]}, "XLA")

    def measure_again(self) -> None:
        """The start and the best once more, when they differ: each figure becomes the mean of two measurements."""
        start, best = settings_of(self.config), self.best()
        if best != start:
            self.measure(start, "start again")
            self.measure(best, "best again")

    def _call_sizes(self) -> None:
        """Steps per call, upwards from 1, while a call stays under MAX_CALL_S and larger calls keep gaining."""
        step_ms = next((p.step_time_ms for p in self.points if p.step_time_ms), None)
        for size in CALL_SIZES:
            if step_ms is not None and size > 1 and step_ms * size / 1e3 > MAX_CALL_S:
                break
            current = self.best()["steps_per_call"]
            if self.tried({**self.best(), "steps_per_call": size}):
                continue
            if not self.try_point({"steps_per_call": size}, "steps per call") and size > current:
                break  # larger calls stopped paying

    def batches(self, max_batch: int | None, memory_limit: int | None) -> None:
        """Double the batch while it gains, up to `max_batch`; without it, while twice the last peak stays under `memory_limit`.

        `memory_limit` None: no memory bound (on a GPU running out of memory is a failed point, not a crash).
        """
        while not self.stop_event.is_set():
            batch = self.best()["batch_size"] * 2
            if max_batch is not None and batch > max_batch:
                break
            last_peak = next((p.peak_bytes for p in reversed(self.points) if p.status == "measured" and p.peak_bytes), None)
            if max_batch is None and memory_limit is not None and (last_peak is None or 2 * last_peak >= memory_limit):
                self.notes.append(
                    f"batch {batch} not tried: twice the last peak memory would pass the memory budget ({memory_limit:,} bytes)"
                )
                break
            if not self.try_point({"batch_size": batch}, "batch"):
                break

    def result(self, left_out: tuple[tuple[str, str], ...]) -> AutotuneResult:
        start = settings_of(self.config)
        best = self.best()
        first = self.points[0] if self.points else None
        error = first.message if first is not None and first.status == "failed" else ""
        if not error and not any(p.status == "measured" for p in self.points):
            why = first.message if first is not None else "no point ran"
            error = f"nothing was measured within the {self.budget_s:g} s budget ({why}): give it a larger --budget-s"
        scaled = self.config.learning_rate * best["batch_size"] / start["batch_size"] if best["batch_size"] != start["batch_size"] else None
        notes = list(self.notes)
        if scaled is not None:
            notes.append(
                f"batch {start['batch_size']} -> {best['batch_size']}: learning rate scaled by the linear rule to {scaled:.3g}, with warm-up"
            )
        return AutotuneResult(
            start=start,
            best=best,
            samples_per_s=self.rate(best),
            baseline_samples_per_s=self.rate(start),
            keras_defaults_samples_per_s=self.rate({**start, **KERAS_DEFAULTS}),
            points=tuple(self.points),
            budget_s=self.budget_s,
            elapsed_s=time.monotonic() - self.started,
            stopped=self.stop_event.is_set(),
            error=error,
            left_out=left_out,
            learning_rate=scaled,
            notes=tuple(notes),
            gain_interval=self.interval(best, start) if best != start else None,
            abandoned=self.abandoned,
        )


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None
