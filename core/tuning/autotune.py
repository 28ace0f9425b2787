"""Find the fastest settings: `autotune(config, budget_s) -> AutotuneResult`.

A coordinate search, at the user's global batch so the learning problem stays
the same: first the precisions this target runs
usefully (`core.tuning.sweep_plan.plan_sweep` leaves out float16 on a CPU and
bfloat16 on CPUs without AVX-512/AMX; precision moves the step time most, and
the call sizes worth trying depend on it), then every steps per call of 1, 4,
16 and 64 that keeps one call under MAX_CALL_S, then XLA; with
`allow_batch_change`, then larger batches (doubling, bounded by the largest
batch that fits). Each stage keeps the fastest point so far; a setting takes
over only when it is faster beyond noise: the 95% block-bootstrap interval of
its samples/s over the best's (from the per-call timings, `core.training.noise`)
lies above 1 (with no timings, by GAIN_THRESHOLD). The result says how sure
(`gain_ci`, `sureness`). The start settings and Keras's defaults (one step per execution,
float32, no XLA) are measured too, so the gain over both is known; where Keras's defaults
ran faster than the adopted setting, a note says so, by how much, and whether beyond noise
(only when the rounds measured both: `gain_over_keras_defaults_ci`).

Those points ran one after another, and a load that changed between them can
fake a winner. So the search keeps CONFIRM_SHARE of the budget for a last check:
the start, the best and the runner-up again, in interleaved rounds
(`core.jobs.rounds`: every round runs each for a turn as long as TURN_CALLS of
the slowest one's calls, in a new random order). A runner-up the search found
more than 5% slower than the best beyond noise (DOMINATED_BELOW), under no more
load from other processes than the best ran under, takes no turn (`_Tuner.dominated`: a load only slows a run,
so none hid a gain; a note names it). The best is adopted only when
it is faster than the start beyond noise over those rounds; otherwise the start
stays (one round claims nothing: `rounds` 1 runs none). The reported figures and
"how sure" come from the rounds and describe the adopted setting: with the start
kept there is no gain interval, and the rival it was kept against is reported apart
(`rival`, `rival_ratio`, `rival_ci`); the note says a rival slower beyond noise was
slower, and advises a re-run only where the rounds could not tell (an interval holding 1).

The search ends when its space is searched and its choice checked, not when the
budget is spent: each point is timed until its samples/s is known or told
apart from the best's (`core.tuning.point_clock`), MEASURE_S at most (a point
plainly slower than the best, under SLOW_SHARE of its samples/s, stops after
its first steady calls),
each turn of the rounds lasts a few calls, and the budget only bounds them.
`stopped_because` says what ended it: SEARCHED (every point of its space
measured or ruled out, the rounds run in full), BUDGET (a point skipped or cut
short, or shorter turns or fewer rounds, for time), STOPPED, ABANDONED or
FAILED (the start did not run).

Faster is not enough: a setting must also learn as well (`objective` "loss", the
default). In the rounds every candidate trains from the same weights on the same
data for the same seconds, so the start's smoothed final loss is a target each
can be timed to (`core.training.to_target`); the best is adopted only when it
reached that loss in no more steady-state seconds than the start
(`time_to_target_gain` >= 1). That time decides nothing where the start's loss
did not fall beyond noise (random labels, turns too short to learn) or either
reached the loss within its warm-up: then samples/s alone decides, and the
result says why (`target_undecided`, a note). A larger batch runs there at two learning rates,
each a candidate of its own: the start's and the linear rule's (scaled with the
batch, Goyal et al. 2017; no warm-up); of the candidates that learn as well, the
one that reaches the loss soonest is adopted, and a note says how each learning
rate did. With `objective` "samples" samples/s alone decides, as before, and the result says so.
With `objective` "energy" the rounds decide by measured joules per sample: the candidate
that used the fewest is adopted only where its per-round ratio to the start's is below 1
beyond noise (`energy_ratio`) and it learns no worse, as for "loss"; where no energy
counter exists the CLI refuses the objective before anything runs.

Every point is an ordinary run (`core.jobs.run_job`, not recorded) stopped once
its steady-state samples/s is known (the first call, tracing and compilation,
is warm-up). The start point (the baseline) always runs; any
other is launched only when its set-up, warm-up and shortest measurement fit
in the time left (estimated from the points so far). A running point stops
after its call in flight when the budget runs out or Stop is pressed (a timer
sets its stop at the deadline, so a TPU being probed stops too).

The budget bounds the whole command: it counts from `started` (the CLI passes
the moment the command began, so TensorFlow's start-up is counted), and the
command ends within the budget plus BUDGET_SLACK_S. A point (or the last
check's rounds) still running at the deadline plus that slack is abandoned
(left to finish in its thread, its figures discarded) and the search ends there. A search that
measured nothing has an `error` saying why. Points are not recorded in the history.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from core.config import MAX_STEPS, PRECISIONS, ConfigError, RunConfig
from core.jobs import JobOptions, RecordedRun, run_job
from core.jobs.rounds import DEFAULT_ROUNDS, RoundGate, rounds_measured, run_in_rounds
from core.results import RunResult, RunStatus
from core.training.noise import Interval, between_runs, bootstrap_ratio, call_times, energy_ratio
from core.training.to_target import IN_WARMUP, NO_FALL, fell_beyond_noise, judged_reach, no_fall_reason, reach, smoothed_final_loss
from core.tuning.backend_stage import backends_note, other_backends, setup_guess, setup_key
from core.tuning.max_batch import default_memory_limit
from core.tuning.point_clock import PointClock, bounded_run, reference_of
from core.tuning.sweep_plan import settings_text

DEFAULT_BUDGET_S = 120.0
MIN_BUDGET_S = 5.0
MAX_BUDGET_S = 86_400.0
CALL_SIZES = (1, 4, 16, 64)
MAX_CALL_S = 1.0
"""Larger call sizes are tried only while one call stays under a second: Stop and the budget act between calls."""
MEASURE_S = 0.3
"""Steady seconds a search point is timed at the most, whatever the budget: it stops sooner once its samples/s is known
or told apart from the best's (`core.tuning.point_clock`); enough to rank it, the rounds decide."""
SLOW_SHARE = 0.5
"""A search point under this share of the best's samples/s stops after its first steady calls: it cannot become the best."""
CONFIRM_SHARE = 0.3
"""The share of the budget kept for the last check: the start, the best and the runner-up (unless dominated) again, in
interleaved rounds."""
DOMINATED_BELOW = 0.95
"""A runner-up whose samples/s over the best's lies under this (its whole 95% interval, from the search's calls) under no
more load is left out of the rounds: more than 5% slower, a margin for what the machine did between the two runs, which
the calls' interval cannot see."""
TURN_CALLS = 4
"""Each turn of the last check's rounds lasts as long as this many calls of its slowest candidate (from the search's
figures), whatever the budget: MIN_TURN_S at least, MAX_TURN_S at most (a turn always ends with a whole call)."""
MIN_TURN_S = 0.1
MAX_TURN_S = 0.3
GAIN_THRESHOLD = 0.02
SETUP_GUESS_S = 2.0
"""Set-up and warm-up of a point before any was timed (XLA: XLA_SETUP_GUESS_S, compilation is slower)."""
XLA_SETUP_GUESS_S = 6.0
END_RESERVE_S = 0.5
BUDGET_SLACK_S = 10.0
"""The command ends within its budget plus this: the most a point's call in flight may run past the deadline before it is abandoned."""
OBJECTIVES = ("loss", "samples", "energy")
"""What autotune adopts on: "loss", faster and no later to the start's loss; "samples", samples/s alone."""
TUNED = ("steps_per_call", "precision", "xla", "batch_size", "backend")
KERAS_DEFAULTS = {"steps_per_call": 1, "precision": "off", "xla": False}
BUDGET_FIELD = "--budget-s"
SEARCHED, BUDGET, STOPPED, ABANDONED, FAILED = "searched", "budget", "stopped", "abandoned", "failed"
"""Why autotune ended (`stopped_because`): its space searched and its choice checked in the rounds asked for; the
budget cut a point or the rounds; Stop; a call that outlived the budget's slack; the start did not run."""

OnPoint = Callable[["TunePoint"], None]
Runner = Callable[..., RecordedRun]


@dataclass(frozen=True)
class TunePoint:
    """One measured (or skipped) setting: the stage that tried it, its settings, samples/s and why it has none.

    `step_time_ms` is the run's median steady-state step (`step_time_median_ms`, the typical step), so it is not
    global batch ÷ samples/s; `mean_step_ms` is (samples/s = batch ÷ mean step). JSON carries all three keys.
    """

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
    rounds: int | None = None  # the interleaved rounds it was measured in (the last check); None: a run of its own
    flops_per_step: float | None = None  # the run's own count (None: flops_method says why)
    flops_method: str = "not counted: the point did not run"
    mean_step_ms: float | None = None  # the mean steady-state step: global batch / samples/s
    other_cpu_share: float | None = None  # other processes' share of all cores' time while it ran (None: not read)

    @property
    def in_rounds(self) -> bool:
        return self.stage == "rounds"

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "settings": dict(self.settings),
            "status": self.status,
            "samples_per_s": self.samples_per_s,
            "step_time_ms": self.step_time_ms,
            "step_time_median_ms": self.step_time_ms,
            "mean_step_ms": self.mean_step_ms,
            "seconds": round(self.seconds, 2),
            "message": self.message,
            "peak_bytes": self.peak_bytes,
            "contended": self.contended,
            "rounds": self.rounds,
            "flops_per_step": self.flops_per_step,
            "flops_method": self.flops_method,
            "other_cpu_share": self.other_cpu_share,
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
    gain_interval: Interval | None = None  # best over start, 95% interval from the interleaved rounds of the last check
    abandoned: bool = False  # a point or the rounds still ran past the deadline plus the slack (left in its thread)
    confirmed: bool | None = None  # the interleaved rounds found the best faster than the start beyond noise (None: not run)
    objective: str = (
        "loss"  # "loss": adopted only if it also reached the start's loss no later; "samples": samples/s alone; "energy": fewest joules
    )
    target_loss: float | None = None  # the start's smoothed final loss in the rounds, which the best was timed to
    time_to_target_gain: float | None = None  # the start's steady seconds to target_loss over the best's (None: not timed)
    # why time to target_loss decided nothing (core.training.to_target.UNDECIDED); "" when it decided or was not checked
    target_undecided: str = ""
    energy_interval: Interval | None = None  # objective "energy": the adopted setting's joules per sample over the start's, in the rounds
    stopped_because: str = SEARCHED  # why it ended: SEARCHED, BUDGET, STOPPED, ABANDONED or FAILED
    rival: dict[str, Any] | None = None  # the start kept: the setting that came closest to it (None: one was adopted, or none tried)
    rival_interval: Interval | None = None  # the rival's samples/s over the start's: from the rounds, else the search's (`rounds` 1)
    keras_defaults_interval: Interval | None = None  # the adopted setting's samples/s over Keras defaults', from rounds both ran in

    @property
    def measured(self) -> bool:
        """True when at least one point was measured (else every figure is None and `error` says why)."""
        return any(point.status == "measured" for point in self.points)

    @property
    def points_searched(self) -> int:
        """The search's measured points (the last check's rounds not counted)."""
        return sum(point.status == "measured" and not point.in_rounds for point in self.points)

    @property
    def gain(self) -> float | None:
        return _ratio(self.samples_per_s, self.baseline_samples_per_s)

    def ending(self) -> str:
        """Why it ended, in words: "its space searched (5 points) and its choice checked in 6 interleaved rounds"."""
        rounds = self.rounds_run
        checked = f"its choice checked in {rounds} interleaved rounds" if rounds else "no choice to check in rounds"
        return {
            SEARCHED: f"its space searched ({self.points_searched} points) and {checked}",
            BUDGET: f"the {self.budget_s:g} s budget ran out first: a point or a round was cut for time; give it a larger --budget-s",
            STOPPED: "stopped",
            ABANDONED: f"a call was still running {BUDGET_SLACK_S:g} s after the deadline",
            FAILED: "the start did not run",
        }[self.stopped_because]

    @property
    def gain_over_keras_defaults(self) -> float | None:
        return _ratio(self.samples_per_s, self.keras_defaults_samples_per_s)

    @property
    def keras_defaults_faster(self) -> bool | None:
        """True when Keras's defaults ran more samples/s than the adopted setting (None: one of them was not measured)."""
        gain = self.gain_over_keras_defaults
        return None if gain is None else gain < 1.0

    @property
    def rounds_run(self) -> int | None:
        """The interleaved rounds of the last check (None: they did not run)."""
        return next((p.rounds for p in self.points if p.in_rounds and p.rounds), None)

    def changes(self) -> dict[str, Any]:
        """The RunConfig fields to change to apply the best settings (the scaled learning rate with a new batch)."""
        changed = {name: value for name, value in self.best.items() if self.start.get(name) != value}
        if "batch_size" in changed and self.learning_rate is not None:
            changed["learning_rate"] = self.learning_rate
        return changed

    def sureness(self) -> str:
        """How sure the gain is, in words; where the start was kept against a rival, that it claims none."""
        if self.gain_interval is not None:
            return self.gain_interval.sureness()
        return "the start is kept: no gain claimed (rival_sureness says how its rival did)" if self.rival is not None else ""

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON; gain_ci, beyond_noise and sureness describe the adopted setting, rival_* the one turned down."""
        gain, rival, over_defaults = self.gain_interval, self.rival_interval, self.keras_defaults_interval
        return {
            "best": dict(self.best),
            "samples_per_s": self.samples_per_s,
            "baseline_samples_per_s": self.baseline_samples_per_s,
            "gain": self.gain,
            "gain_ci": gain.to_list() if gain is not None else None,
            "beyond_noise": gain.beyond_noise if gain is not None else None,
            "sureness": self.sureness(),
            "rounds": gain.rounds if gain is not None else self.rounds_run,
            "confirmed": self.confirmed,
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
            "objective": self.objective,
            "target_loss": self.target_loss,
            "time_to_target_gain": self.time_to_target_gain,
            "target_undecided": self.target_undecided,
            "energy_ratio": self.energy_interval.ratio if self.energy_interval is not None else None,
            "energy_ratio_ci": self.energy_interval.to_list() if self.energy_interval is not None else None,
            "energy_beyond_noise": self.energy_interval.beyond_noise if self.energy_interval is not None else None,
            "stopped_because": self.stopped_because,
            "points_searched": self.points_searched,
            "rival": dict(self.rival) if self.rival is not None else None,
            "rival_ratio": rival.ratio if rival is not None else None,
            "rival_ci": rival.to_list() if rival is not None else None,
            "rival_beyond_noise": rival.beyond_noise if rival is not None else None,
            "rival_sureness": rival.sureness() if rival is not None else "",
            "keras_defaults_faster": self.keras_defaults_faster,
            "gain_over_keras_defaults_ci": over_defaults.to_list() if over_defaults is not None else None,
            "gain_over_keras_defaults_beyond_noise": over_defaults.beyond_noise if over_defaults is not None else None,
        }


def check_budget(budget_s: Any, field_name: str = BUDGET_FIELD) -> float:
    """The budget in seconds; ConfigError unless it is a number from MIN_BUDGET_S to MAX_BUDGET_S."""
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not MIN_BUDGET_S <= budget_s <= MAX_BUDGET_S:
        raise ConfigError(field_name, budget_s, f"seconds from {MIN_BUDGET_S:g} to {MAX_BUDGET_S:g}, such as 120")
    return float(budget_s)


def settings_of(config: RunConfig) -> dict[str, Any]:
    """The settings autotune varies, as `config` has them."""
    return {name: getattr(config, name) for name in TUNED}


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
    backends: Sequence[str] = (),
    rounds: int = DEFAULT_ROUNDS,
    objective: str = "loss",
) -> AutotuneResult:
    """Search the fastest settings for `config` within `budget_s` seconds (see the module docstring).

    `max_batch` bounds the batch stage (the largest batch that fits, if
    known); without it a larger batch is tried on the CPU only while twice the
    last point's peak memory stays under `memory_limit` (default: half of the
    available RAM). `has_accelerator` and `cpu_flags` (None: ask the machine)
    decide the precisions; `run` is the job service (`core.jobs.run_job`);
    `started` the time.monotonic() the budget counts from (default: now); `backends` others to try (none: said so);
    `rounds` the interleaved rounds of the last check, which decides whether the best is adopted;
    `objective` "loss" (the best must also reach the start's loss no later), "samples" (samples/s alone) or "energy"
    (the fewest joules per sample beyond noise in the rounds, learning no worse).
    """
    if objective not in OBJECTIVES:
        raise ConfigError("objective", objective, ", ".join(OBJECTIVES))
    from core.tuning.sweep_plan import target_has_accelerator

    started = time.monotonic() if started is None else started
    budget_s = check_budget(budget_s)
    accelerated = target_has_accelerator(config) if has_accelerator is None else has_accelerator
    precisions, left_out = usable_precisions(config, accelerated, cpu_flags)
    tuner = _Tuner(config, (started, budget_s), stop_event or threading.Event(), on_point, run)
    tuner.backends = other_backends(config.backend, backends)
    tuner.objective = objective
    start = tuner.measure(settings_of(config), "start")
    if start.status == "measured":
        tuner.search(precisions)
        if allow_batch_change:
            tuner.batches(max_batch, None if accelerated else (memory_limit or default_memory_limit()))
        tuner.confirm_in_rounds(rounds)
    return tuner.result(left_out)


class _Tuner:
    """The search's state: the deadline, the points so far, the fastest, and what set-up costs."""

    def __init__(self, config: RunConfig, clock: tuple[float, float], stop_event: threading.Event, on_point: OnPoint | None, run: Runner):
        self.config = config
        self.started, self.budget_s = clock  # monotonic start, budget in seconds
        self.deadline = self.started + self.budget_s
        self.hard_deadline = self.deadline + BUDGET_SLACK_S - END_RESERVE_S  # work still running then is abandoned
        self.stop_event = stop_event
        self.on_point = on_point
        self.run = run
        self.points: list[TunePoint] = []
        self.overheads: dict[tuple[str, bool], float] = {}
        self.notes: list[str] = []
        self.cut_for_time = False  # a point was skipped or cut short, or the rounds shortened or left out, for the budget
        self.abandoned = False  # a point's call outlived the deadline plus the slack: nothing more runs
        self.backends: tuple[str, ...] = ()
        self.search_deadline = self.started + self.budget_s * (1 - CONFIRM_SHARE)  # the rest is the interleaved check's
        self.chosen: dict[str, Any] | None = None  # what the interleaved rounds chose (None: they did not run)
        self.chosen_interval: Interval | None = None
        self.energy_interval: Interval | None = None
        self.confirmed: bool | None = None  # the best was faster than the start beyond noise over the rounds
        self.objective = "loss"
        self.target_loss: float | None = None
        self.time_to_target_gain: float | None = None
        self.target_undecided = ""
        self.rival: dict[str, Any] | None = None  # the start kept: the setting that came closest to it
        self.rival_interval: Interval | None = None
        self.round_runs: list[tuple[dict[str, Any], RunResult | None]] = []  # each candidate of the rounds and its run
        self._intervals: dict[tuple[str, str, int], Interval | None] = {}  # `interval`'s answers, by the points measured then

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
            if late <= 0:
                return None
            self.cut_for_time = True
            return TunePoint(stage, settings, "skipped", message=f"not started: the budget ran out {late:.1f} s before it")
        key = setup_key(settings, self.config.backend)
        needed = self.overheads.get(key, setup_guess(key, XLA_SETUP_GUESS_S if settings["xla"] else SETUP_GUESS_S)) + MEASURE_S
        left = self.search_deadline - time.monotonic()
        if left < needed + END_RESERVE_S:
            self.cut_for_time = True
            return TunePoint(stage, settings, "skipped", message=f"not enough time left ({left:.1f} s; it needs about {needed:.1f} s)")
        return None

    def _run_point(self, settings: dict[str, Any], stage: str) -> TunePoint:
        try:
            job = self.config.with_changes(**settings, steps=MAX_STEPS, epochs=None)
        except ConfigError as exc:
            return TunePoint(stage, settings, "failed", message=str(exc))
        point_stop = threading.Event()
        deadline = (self.search_deadline if self.points else self.deadline) - END_RESERVE_S  # the start point may use the whole budget
        best = self.best() if self.points else None
        best_rate = self.rate(best) if best is not None else None
        reference = reference_of(best_rate, self._calls(best)) if best is not None else None
        clock = PointClock(point_stop, self.stop_event, MEASURE_S, deadline, best_rate * SLOW_SHARE if best_rate else None, reference)
        began = time.monotonic()
        result = bounded_run(
            lambda: self.run(job, None, JobOptions(hooks=(clock,)), point_stop).result,
            point_stop,
            clock.deadline,
            self.hard_deadline,
            self.stop_event,
        )
        seconds = time.monotonic() - began
        if result is None:
            self.abandoned = True
            message = f"abandoned: its call was still running {BUDGET_SLACK_S:g} s after the deadline (the budget bounds the command)"
            return TunePoint(stage, settings, "stopped", seconds=seconds, message=message)
        steady_s = time.monotonic() - clock.steady_since if clock.steady_since is not None else 0.0
        self.overheads[setup_key(settings, self.config.backend)] = seconds - steady_s  # the latest: start-up included
        if not clock.finished and not self.stop_event.is_set() and time.monotonic() >= clock.deadline:
            self.cut_for_time = True  # the deadline ended it before it had timed MEASURE_S
        point = self._point_of(settings, stage, result, seconds)
        if clock.gave_up and point.status == "measured":
            note = f"stopped after {clock.steady_calls} steady call(s): under {SLOW_SHARE:.0%} of the best's samples/s"
            point = replace(point, message="; ".join(filter(None, (point.message, note))))
        return point

    def _point_of(self, settings: dict[str, Any], stage: str, result: RunResult | None, seconds: float | None = None) -> TunePoint:
        """The point a run of `settings` makes: measured with its figures, or why not."""
        seconds = result.wall_s if seconds is None and result is not None else seconds or 0.0
        if result is None:
            return TunePoint(stage, settings, "failed", message="could not run")
        if result.status == RunStatus.FAILED:
            return TunePoint(stage, settings, "failed", seconds=seconds, message=result.message)
        if result.samples_per_s is None:
            status = "stopped" if self.stop_event.is_set() else "skipped"
            return TunePoint(stage, settings, status, seconds=seconds, message="no steady-state step was timed")
        calls = call_times(result.step_times_s, result.warmup_steps, int(result.config.get("steps_per_call") or 1))
        busy = f"measured while {result.conditions.get('reason')}" if result.contended else ""
        rounds = rounds_measured(result) if stage == "rounds" else None
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
            rounds,
            result.flops_per_step,
            result.flops_method or "not counted",
            result.mean_step_ms,
            result.conditions.get("other_cpu_share"),
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
        """`settings`' samples/s over `than`'s with its 95% interval, from all their measured calls; None without timings.

        Kept until the next point is measured: `best` asks again for every pair on every call."""
        key = (settings_text(settings), settings_text(than), len(self.points))
        if key not in self._intervals:
            pooled = [self._calls(s) for s in (than, settings)]
            found = None
            if all(calls is not None for calls in pooled):
                found = bootstrap_ratio(pooled[0], pooled[1], settings["batch_size"] / than["batch_size"])  # type: ignore[arg-type]
            self._intervals[key] = found
        return self._intervals[key]

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
        """The stages at the user's batch after the start point: Keras defaults, backend, precision, steps per call, XLA."""
        start = settings_of(self.config)
        defaults = {**start, **KERAS_DEFAULTS}
        if defaults != start:
            self.measure(defaults, "Keras defaults")
        for backend in self.backends:
            self.try_point({"backend": backend}, "backend")
        for precision in precisions:
            self.try_point({"precision": precision}, "precision")
        self._call_sizes()
        self.try_point({"xla": not self.best()["xla"]}, "XLA")

    def confirm_in_rounds(self, rounds: int) -> None:
        """The start, the best and the runner-up (unless `dominated`) measured again in interleaved rounds, within what is
        left of the budget.

        The search picked the best from runs measured one after another; a load that changed between them could have
        made it. The rounds decide: the best is adopted only when it is faster than the start beyond noise over them
        (`confirmed`), and their figures replace the search's.
        """
        start, best = settings_of(self.config), self.best()
        if self.stop_event.is_set() or self.abandoned:
            return
        # the search kept the start: a load that came and went may have hidden a gain, so its two fastest rivals get the rounds
        rivals = self._runner_up(start, best, 2 if best == start else 1)
        dominated = [rival for rival in rivals if self.dominated(rival, best)]
        if dominated:
            rivals = [rival for rival in rivals if rival not in dominated]
            self.notes.append(
                "left out of the rounds: "
                + ", ".join(change_text(rival, start) for rival in dominated)
                + f" (more than {1 - DOMINATED_BELOW:.0%} slower than {'the start' if best == start else change_text(best, start)} "
                "with 95% confidence in the search, under no more load from other processes: no load hid a gain)"
            )
        if best["batch_size"] != start["batch_size"]:
            rivals = []  # the best's second learning rate takes the runner-up's turn
        candidates = [start, *(self.at_learning_rates(best) if best != start else []), *(self.at_learning_rates(r)[0] for r in rivals)]
        if len(candidates) < 2:
            return
        if rounds < 2:
            self.confirmed, self.chosen = False, start
            self._keep_start(candidates[1], self._searched_interval(candidates[1], start))
            self.notes.append(
                f"not adopted: one interleaved round claims nothing beyond noise, so {settings_text(candidates[1])} was not "
                "measured against the start again: could not tell a gain; give it --rounds 2 or more"
            )
            return
        setups = sum(self.overheads.get(setup_key(c, self.config.backend), SETUP_GUESS_S) for c in candidates)
        left = self.deadline - time.monotonic() - END_RESERVE_S - setups
        turn_s = self._turn_s(candidates)
        if left < rounds * len(candidates) * turn_s:  # shorter turns first, then fewer rounds
            self.cut_for_time = True
            turn_s = max(left / (rounds * len(candidates)), MIN_TURN_S)
            rounds = min(rounds, max(int(left / (len(candidates) * turn_s)), 0))
        if rounds < 2:
            self.confirmed = False
            self.chosen = start
            self._keep_start(candidates[1], self._searched_interval(candidates[1], start))
            self.notes.append(
                f"not adopted: too little of the budget was left to measure {settings_text(candidates[1])} against the start in "
                f"interleaved rounds ({max(left, 0):.1f} s): could not tell a gain; give it a larger --budget-s"
            )
            return
        results = self._rounds(candidates, rounds, turn_s)
        if results is None:
            self.abandoned, self.confirmed, self.chosen = True, False, start
            self._keep_start(candidates[1], self._searched_interval(candidates[1], start))
            self.notes.append(
                f"not adopted: the interleaved rounds were still running {BUDGET_SLACK_S:g} s after the deadline "
                "(the budget bounds the command): could not tell a gain; give it a larger --budget-s"
            )
            return
        self.round_runs = list(zip(candidates, results, strict=True))
        for settings, result in self.round_runs:
            self.points.append(self._point_of(settings, "rounds", result))
            if self.on_point is not None:
                self.on_point(self.points[-1])
        start_result = results[0]
        faster = {
            index: interval
            for index in range(1, len(candidates))
            if start_result is not None
            and results[index] is not None
            and (interval := between_runs(start_result, results[index])) is not None
            and interval.beyond_noise
            and interval.low > 1
        }
        if self.objective == "energy":
            self._adopt_by_energy(candidates, results, rounds)
            return
        if best["batch_size"] != start["batch_size"] and start_result is not None:
            self.notes.append(learning_rates_note(candidates[1:3], start_result, results[1:3]))
        if faster:
            index = self._pick(candidates, results, faster)
            self.chosen, self.chosen_interval, self.confirmed = candidates[index], faster[index], True
            self._check_learning(candidates[index], start_result, results[index])
        else:
            self.chosen, self.confirmed = start, False
            how_each_did = [
                (c, between_runs(start_result, r) if start_result is not None and r is not None else None) for c, r in self.round_runs[1:]
            ]
            self._keep_start(*max(how_each_did, key=lambda did: did[1].ratio if did[1] is not None else 0.0))
            self.notes.append(kept_start_note(start, how_each_did))

    def _adopt_by_energy(self, candidates: list[dict[str, Any]], results: list[RunResult | None], rounds: int) -> None:
        """Objective "energy": adopt the candidate that used the fewest joules per sample, only where that is less than the
        start's beyond noise over the rounds (`energy_ratio`'s interval below 1) and it learns no worse (`learning_check`)."""
        start_result = results[0]
        frugal = {
            index: interval
            for index in range(1, len(candidates))
            if start_result is not None
            and (result := results[index]) is not None
            and (interval := energy_ratio(start_result, result)) is not None
            and interval.beyond_noise
            and interval.high < 1
        }
        if not frugal:
            self.chosen, self.confirmed = settings_of(self.config), False
            self._keep_start(
                candidates[1], between_runs(start_result, results[1]) if start_result is not None and results[1] is not None else None
            )
            shown = energy_ratio(start_result, results[1]) if start_result is not None and results[1] is not None else None
            self.notes.append(
                f"not adopted: {settings_text(candidates[1])} did not use less energy per sample than the start beyond noise over "
                f"{rounds} interleaved rounds" + (f" (joules per sample {shown.text()})" if shown is not None else " (no energy measured)")
            )
            return
        index = min(frugal, key=lambda i: frugal[i].ratio)
        self.chosen, self.confirmed = candidates[index], True
        self.chosen_interval = between_runs(start_result, results[index]) if start_result is not None and results[index] else None
        self.energy_interval = frugal[index]
        self._check_learning(candidates[index], start_result, results[index])

    def _pick(self, candidates: list[dict[str, Any]], results: list[RunResult | None], faster: dict[int, Interval]) -> int:
        """Which of the candidates faster than the start (`faster`, by index) to adopt.

        Objective "loss": of those that reached the start's loss no later, the one that got there soonest; where none did,
        the fastest, which the learning check then turns down (or adopts on samples/s where time to the loss decides
        nothing). Objective "samples": the best, unless the runner-up beat it beyond noise in the rounds.
        """
        start_result = results[0]
        if self.objective == "loss" and start_result is not None:
            checks = {i: learning_check(candidates[i], start_result, result) for i in faster if (result := results[i]) is not None}
            learned = [i for i, check in checks.items() if check.adopt and not check.undecided]  # undecided: samples/s picks
            if learned:
                return max(learned, key=lambda i: checks[i].gain or 0.0)
        index = 1 if 1 in faster else min(faster)
        best_result, runner_result = results[1], results[-1]
        over_best = between_runs(best_result, runner_result) if len(candidates) > 2 and best_result and runner_result else None
        if index == 1 and len(candidates) - 1 in faster and over_best is not None and over_best.beyond_noise and over_best.low > 1:
            index = len(candidates) - 1  # the runner-up beat the best beyond noise in the rounds
        return index

    def at_learning_rates(self, settings: dict[str, Any]) -> list[dict[str, Any]]:
        """`settings` as the rounds run them: at the start's batch, as they are; at another batch, at two learning rates,
        the linear rule's (scaled with the batch) and the start's, each a point of its own."""
        if settings["batch_size"] == self.config.batch_size:
            return [settings]
        return [{**settings, "learning_rate": self.learning_rate_for(settings)}, {**settings, "learning_rate": self.config.learning_rate}]

    def _check_learning(self, chosen: dict[str, Any], start_result: RunResult | None, chosen_result: RunResult | None) -> None:
        """Keep the start instead of `chosen` when, in the rounds, it took longer to reach the start's loss (objective "loss")."""
        if start_result is None or chosen_result is None:
            return
        check = learning_check(chosen, start_result, chosen_result, self.objective)
        self.target_loss, self.time_to_target_gain, self.target_undecided = check.target_loss, check.gain, check.undecided
        if check.note:
            self.notes.append(check.note)
        if not check.adopt:
            self.chosen, self.confirmed = settings_of(self.config), False
            self._keep_start(chosen, self.chosen_interval)
            self.chosen_interval = None

    def dominated(self, settings: dict[str, Any], by: dict[str, Any]) -> bool:
        """`settings` ran plainly slower than `by` in the search (its samples/s over `by`'s, 95% interval under
        DOMINATED_BELOW), under no more load than `by` did: each of its measurements uncontended, or with other
        processes' share of the CPU no larger than in any of `by`'s.

        A load only slows a run: one that was slower beyond noise under no more load cannot be the faster one that the
        rounds are there to find, so it takes no turn in them."""
        found = self.interval(settings, by)
        if found is None or found.high >= DOMINATED_BELOW:
            return False
        loads = [[p.other_cpu_share for p in self.points if p.settings == s and p.status == "measured"] for s in (settings, by)]
        if not loads[0] or not loads[1]:
            return False
        if not any(p.contended for p in self.points if p.settings == settings and p.status == "measured"):
            return True
        known = [share for share in loads[1] if share is not None]
        return bool(known) and all(share is not None and share <= min(known) for share in loads[0])

    def _keep_start(self, rival: dict[str, Any], interval: Interval | None) -> None:
        """The start is kept against `rival`, whose samples/s over the start's is `interval`: the result reports it apart."""
        self.rival, self.rival_interval = rival, interval

    def _searched_interval(self, settings: dict[str, Any], than: dict[str, Any]) -> Interval | None:
        """`settings`' samples/s over `than`'s from the search's runs, one after another: `rounds` 1, nothing claimed."""
        found = self.interval(settings, than)
        return replace(found, rounds=1) if found is not None else None

    def _round_run(self, settings: dict[str, Any]) -> RunResult | None:
        return next((result for candidate, result in self.round_runs if candidate == settings), None)

    def keras_defaults_interval(self, adopted: dict[str, Any], defaults: dict[str, Any]) -> Interval | None:
        """The adopted setting's samples/s over Keras defaults', where both ran in the rounds (None otherwise, or the same)."""
        adopted_run, defaults_run = self._round_run(adopted), self._round_run(defaults)
        if adopted == defaults or adopted_run is None or defaults_run is None:
            return None
        return between_runs(defaults_run, adopted_run)

    def _runner_up(self, start: dict[str, Any], best: dict[str, Any], count: int) -> list[dict[str, Any]]:
        """The `count` fastest other measured settings (by mean samples/s), fastest first."""
        others: dict[str, tuple[float, int, dict[str, Any]]] = {}
        for i, p in enumerate(self.points):
            if p.status == "measured" and p.settings not in (start, best):
                others.setdefault(settings_text(p.settings), (-(self.rate(p.settings) or 0), i, p.settings))
        return [settings for _, _, settings in sorted(others.values(), key=lambda item: item[:2])[:count]]

    def _rounds(self, candidates: list[dict[str, Any]], rounds: int, turn_s: float) -> list[RunResult | None] | None:
        """Each candidate as a run of its own, in `rounds` interleaved turns of `turn_s` seconds; None where one could not run.

        Stopped at the deadline or on Stop; None when still running at the hard deadline (a set-up or a call left in its thread).
        """
        rounds_stop = threading.Event()

        def starter(settings: dict[str, Any]) -> Callable[[RoundGate], RunResult | None]:
            def start(gate: RoundGate) -> RunResult | None:
                try:
                    job = self.config.with_changes(**settings, steps=MAX_STEPS, epochs=None)
                except ConfigError:
                    return None
                return self.run(job, None, JobOptions(hooks=(gate,)), gate.end_event).result

            return start

        results = bounded_run(
            lambda: run_in_rounds([starter(c) for c in candidates], rounds, rounds_stop, turn_s=turn_s),
            rounds_stop,
            self.deadline,
            self.hard_deadline,
            self.stop_event,
        )
        if rounds_stop.is_set() and not self.stop_event.is_set():
            self.cut_for_time = True  # the deadline ended the rounds
        return results

    def _turn_s(self, candidates: list[dict[str, Any]]) -> float:
        """A turn of the rounds: TURN_CALLS calls of the candidate whose calls the search timed longest (MAX_TURN_S
        where one was not timed), from MIN_TURN_S to MAX_TURN_S."""
        calls = []
        for settings in candidates:
            searched = {name: value for name, value in settings.items() if name != "learning_rate"}
            rate = self.rate(searched)
            calls.append(searched["batch_size"] / rate * searched["steps_per_call"] if rate else MAX_TURN_S)
        return min(max(TURN_CALLS * max(calls), MIN_TURN_S), MAX_TURN_S)

    def learning_rate_for(self, settings: dict[str, Any]) -> float:
        """The learning rate `settings` would be adopted with: the start's, scaled by the linear rule at another batch."""
        return self.config.learning_rate * settings["batch_size"] / self.config.batch_size

    def _call_sizes(self) -> None:
        """Every call size, upwards from 1, while a call stays under MAX_CALL_S (a short point that did not gain beyond
        noise prunes nothing: the sizes are few, and a load that came and went may have hidden a gain). A call's length:
        the best's mean step so far times the size."""
        for size in CALL_SIZES:
            best = self.best()
            rate = self.rate(best)
            if rate and size > 1 and best["batch_size"] / rate * size > MAX_CALL_S:
                break
            if not self.tried({**best, "steps_per_call": size}):
                self.try_point({"steps_per_call": size}, "steps per call")

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

    def final_rate(self, settings: dict[str, Any]) -> float | None:
        """Samples/s of `settings` from the interleaved rounds where they were measured there, else the search's mean."""
        rounds = [p.samples_per_s for p in self.points if p.in_rounds and p.settings == settings and p.samples_per_s is not None]
        return rounds[-1] if rounds else self.rate(settings)

    def result(self, left_out: tuple[tuple[str, str], ...]) -> AutotuneResult:
        start = settings_of(self.config)
        best = self.chosen if self.chosen is not None else self.best()
        first = self.points[0] if self.points else None
        error = first.message if first is not None and first.status == "failed" else ""
        if not error and not any(p.status == "measured" for p in self.points):
            why = first.message if first is not None else "no point ran"
            error = f"nothing was measured within the {self.budget_s:g} s budget ({why}): give it a larger --budget-s"
        learning_rate = None
        notes = list(self.notes)
        defaults = {**start, **KERAS_DEFAULTS}
        keras_rate, adopted_rate = self.final_rate(defaults), self.final_rate(best)
        over_defaults = self.keras_defaults_interval(best, defaults)
        if keras_rate and adopted_rate and keras_rate > adopted_rate:
            notes.append(keras_defaults_faster_note(keras_rate / adopted_rate, over_defaults))
        notes.append(backends_note(self.config.backend, self.backends))
        if best["batch_size"] != start["batch_size"]:
            learning_rate = best.get("learning_rate", self.learning_rate_for(best))
            if "learning_rate" not in best:  # not measured in the rounds
                notes.append(
                    f"batch {start['batch_size']} -> {best['batch_size']}: learning rate scaled by the linear rule to {learning_rate:.3g}"
                )
        return AutotuneResult(
            start=start,
            best=best,
            samples_per_s=adopted_rate,
            baseline_samples_per_s=self.final_rate(start),
            keras_defaults_samples_per_s=keras_rate,
            points=tuple(self.points),
            budget_s=self.budget_s,
            elapsed_s=time.monotonic() - self.started,
            stopped=self.stop_event.is_set(),
            error=error,
            left_out=left_out,
            learning_rate=learning_rate,
            notes=tuple(notes),
            gain_interval=self.chosen_interval if self.chosen is not None and best != start else None,
            energy_interval=self.energy_interval if self.confirmed else None,
            abandoned=self.abandoned,
            confirmed=self.confirmed,
            objective=self.objective,
            target_loss=self.target_loss,
            time_to_target_gain=self.time_to_target_gain,
            target_undecided=self.target_undecided,
            stopped_because=self.stopped_because(error),
            rival=self.rival if best == start else None,
            rival_interval=self.rival_interval if best == start else None,
            keras_defaults_interval=over_defaults,
        )

    def stopped_because(self, error: str) -> str:
        """Why the search ended (SEARCHED, BUDGET, STOPPED, ABANDONED, FAILED), `error` the result's."""
        if self.abandoned:
            return ABANDONED
        if self.stop_event.is_set():
            return STOPPED
        if self.cut_for_time:
            return BUDGET
        return FAILED if error else SEARCHED


@dataclass(frozen=True)
class LearningCheck:
    """Whether a faster setting also learns as well: its steady seconds to the start's loss against the start's."""

    adopt: bool
    target_loss: float | None  # the start's smoothed final loss
    gain: float | None  # the start's steady seconds to it over the setting's (None: the setting never got there, or undecided)
    note: str = ""  # why it was not adopted, or adopted for samples/s alone
    undecided: str = ""  # why time to the start's loss decides nothing (NO_FALL, IN_WARMUP): adopted on samples/s; "" otherwise


def learning_check(settings: dict[str, Any], start: RunResult, candidate: RunResult, objective: str = "loss") -> LearningCheck:
    """Judge `candidate` (run with `settings`) against `start`, both trained from the same weights and data in the rounds.

    It learns as well when it reached the start's smoothed final loss in no more steady-state seconds. Under
    objective "samples" it is adopted whatever the answer, the note saying what it costs. Where the start's loss did
    not fall beyond noise, or either reached the loss within its warm-up (the candidate having reached it), that time
    decides nothing: the candidate (faster in samples/s beyond noise) is adopted, and `undecided` and the note say why.
    """
    target = smoothed_final_loss(start)
    if target is None:
        return LearningCheck(True, None, None)
    if not fell_beyond_noise(start, target):
        why = f"the start's {no_fall_reason(start, target)}: time to it decides nothing (random labels, or turns too short to learn)"
        return LearningCheck(True, target, None, f"adopted on samples/s: {why}", NO_FALL)
    start_to, candidate_to = reach(start, target), judged_reach(candidate, target)
    early = [name for name, to in (("the start", start_to), (settings_text(settings), candidate_to)) if to.in_warmup]
    if early and candidate_to.reached:  # it got there, and a warm-up hides how soon: samples/s decides
        why = f"{early[0]} reached the start's loss {target:.4g} within its warm-up: no steady time to it is measured"
        return LearningCheck(True, target, None, f"adopted on samples/s: {why}", IN_WARMUP)
    gain = _ratio(start_to.steady_seconds, candidate_to.steady_seconds)
    if candidate_to.reached and (gain is None or gain >= 1.0):
        return LearningCheck(True, target, gain)
    if not candidate_to.reached:
        why = f"{settings_text(settings)} did not reach the start's loss {target:.4g} ({candidate_to.reason})"
    else:
        why = (
            f"{settings_text(settings)} reached the start's loss {target:.4g} later: {candidate_to.steady_seconds:.3g} s against "
            f"{start_to.steady_seconds:.3g} s of steady training ({candidate_to.samples or 0:,} samples against {start_to.samples or 0:,})"
        )
    if objective == "samples":
        return LearningCheck(True, target, gain, f"adopted for samples/s alone (--objective samples), though {why}")
    return LearningCheck(False, target, gain, f"not adopted: {why}; --objective samples adopts the most samples/s regardless")


def change_text(settings: dict[str, Any], start: dict[str, Any]) -> str:
    """What `settings` change from `start`, as people read it: 'float16', '16 steps/call · XLA on'."""
    return settings_text({name: value for name, value in settings.items() if start.get(name) != value}) or settings_text(settings)


def kept_start_note(start: dict[str, Any], rivals: Sequence[tuple[dict[str, Any], Interval | None]]) -> str:
    """Why the rounds kept the start: how each rival did against it (its samples/s over the start's, None: no figures).

    A rival slower beyond noise is said to be slower; the advice to re-run comes only where an interval held 1 (or a
    rival gave no figures): then the rounds could not tell a gain, and a quieter or longer run might.
    """
    parts, undecided = [], False
    for settings, interval in rivals:
        name = change_text(settings, start)
        if interval is None:
            parts.append(f"{name} gave no figures to compare")
        elif interval.beyond_noise and interval.high < 1:
            parts.append(f"{name} was slower: {interval.text()}")
        else:
            parts.append(f"{name}: {interval.text()}")  # the interval holds 1: "...: no difference beyond noise"
        undecided = undecided or interval is None or not interval.beyond_noise
    advice = "; could not tell a gain: re-run on a quiet machine or with a larger --budget-s" if undecided else ""
    return f"not adopted: {'; '.join(parts)} — the start is kept{advice}"


def keras_defaults_faster_note(times: float, interval: Interval | None) -> str:
    """Keras's defaults ran `times` the adopted setting's samples/s; `interval` the adopted's over theirs from the rounds
    both ran in (None, or one round: not measured in the same rounds, so nothing is claimed beyond noise)."""
    said = f"Keras's defaults (1 step per execution, float32, no XLA) ran faster than the adopted setting: {times:.2f}× its samples/s"
    if interval is None or interval.rounds == 1:
        return f"{said}, measured apart (not in the same interleaved rounds): not told apart beyond noise"
    verdict = "beyond noise" if interval.beyond_noise else "not beyond noise"
    return (
        f"{said}, {verdict}: the adopted setting ran {interval.ratio:.2f}× theirs "
        f"(95% interval {interval.low:.2f}–{interval.high:.2f}×, {interval.rounds} rounds)"
    )


def learning_rates_note(variants: list[dict[str, Any]], start: RunResult, results: list[RunResult | None]) -> str:
    """How a larger batch learned at each learning rate the rounds tried: its steady seconds to the start's smoothed final loss."""
    target = smoothed_final_loss(start)
    start_to = reach(start, target) if target is not None else None
    parts = []
    for settings, result, kind in zip(variants, results, ("the linear rule's", "the start's"), strict=False):
        if result is None or target is None:
            parts.append(f"{settings['learning_rate']:.3g} ({kind}) did not run")
            continue
        got = reach(result, target)
        how = (
            f"reached it in {got.steady_seconds:.3g} s"
            if got.reached and got.steady_seconds is not None
            else f"did not reach it ({got.reason})"
        )
        parts.append(f"{settings['learning_rate']:.3g} ({kind}) {how}")
    start_text = f"; the start took {start_to.steady_seconds:.3g} s" if start_to is not None and start_to.steady_seconds is not None else ""
    loss = f" {target:.4g}" if target is not None else ""
    return (
        f"batch {variants[0]['batch_size']} at two learning rates (no warm-up), timed to the start's loss{loss}: "
        + "; ".join(parts)
        + start_text
    )


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None
