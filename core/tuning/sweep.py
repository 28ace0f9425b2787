"""Setting sweeps, headless: the same job at each point of a plan, one normal run per point, side by side.

Every point trains the same model, data, steps and seed on the same target
through the job service, `core.jobs.run_job` (warm-up reported apart, as in any run), so
the rows differ only in the settings swept. A point that fails (out of memory,
a NaN loss, a combination the target refuses) is a failed row with its reason,
and the sweep goes on; Stop ends the turn in flight after its step call and
skips the points not started. Each point is recorded in the history as it trains, under one
group ('sweep 3: batch × precision').

The points run in interleaved rounds (`core.jobs.rounds`): each is set up and
warmed up alone, then every round runs every point for its share of the steps
in a new random order, so a load that comes and goes hits every point alike.
The best row is the one that trains fastest to a loss: the first (in steady-state
seconds: the warm-up is a one-off) to bring its smoothed loss down to the sweep's target (`core.training.to_target`: the
target given, else the highest of the rows' smoothed final losses, which every
row reached), not the one with the most samples/s, which a larger batch wins
while it learns less per sample. Without any loss to judge (no row reached a
finite one) it is the row with the most samples/s. It is better beyond noise
only when, for every other completed row, the 95% interval of its time to the
target over the best's lies above 1: that interval is the rounds' interval of
the samples/s (`core.training.noise.between_runs`) scaled by the samples each
needed; rows whose interval holds 1 are tied with it (`tied_with_best`), and
the tables say "tied" instead of starring.

The rows' results are ordinary `RunResult`s of runs that differ in one setting,
so they can stand in for a verdict's probe runs
(`core.diagnosis.probes.diagnose(..., others=sweep.results())`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from core.config import ConfigError, RunConfig
from core.jobs import PLAIN, JobListener, JobOptions, record_unrun, run_job
from core.jobs.rounds import DEFAULT_ROUNDS, RoundGate, announcing, rounds_measured, run_in_rounds
from core.results import RunResult, RunStatus
from core.training.noise import between_runs
from core.training.to_target import common_target, reach, target_how
from core.tuning.sweep_plan import AXES, SweepPlan, point_label, target_text
from core.workloads.workload import model_title

if TYPE_CHECKING:
    from core.history.store import RunStore

LINEAR_SCALING_NOTE = (
    "Linear scaling rule: at a larger batch, try learning rate x batch / {base} (the batch the learning rate was set for), "
    "reached by a linear warm-up over the first few epochs (Goyal et al. 2017; the TPU performance guide)."
)
ROW_FIGURES = ("samples_per_s", "mean_step_ms", "step_time_median_ms", "final_loss", "peak_memory_bytes", "warmup_s")


@dataclass(frozen=True)
class SweepRow:
    """One point of a sweep: its settings, the run's result, where the history keeps it (or why not), and the scaled learning rate."""

    settings: dict[str, Any]
    result: RunResult
    run_id: int | None = None
    suggested_learning_rate: float | None = None
    history_error: str = ""

    @property
    def status(self) -> RunStatus:
        return self.result.status

    @property
    def label(self) -> str:
        return point_label(self.settings)

    def to_dict(self, target_loss: float | None = None) -> dict[str, Any]:
        """JSON-ready: settings, status, message, the row's figures, time to `target_loss`, the suggested learning rate and the history id."""
        return {
            "settings": dict(self.settings),
            "label": self.label,
            "status": self.status.value,
            "message": self.result.message,
            **{name: getattr(self.result, name) for name in ROW_FIGURES},
            "steps": self.result.steps_done,
            "suggested_learning_rate": self.suggested_learning_rate,
            "run_id": self.run_id,
            "contended": self.result.contended,
            "rounds": rounds_measured(self.result),
            "flops_per_step": self.result.flops_per_step,
            "flops_method": self.result.flops_method,
            **reach(self.result, target_loss).to_dict(),
        }


@dataclass(frozen=True)
class Sweep:
    """A finished (or stopped) sweep: its plan, one row per point in plan order, and the fastest completed row."""

    plan: SweepPlan
    rows: tuple[SweepRow, ...]
    group: str = ""
    target_loss: float | None = None  # given (--target-loss); None: the rows' common target

    @property
    def best(self) -> int | None:
        """The index of the completed row fastest to the target loss (None when no row completed)."""
        return best_index(self.rows, self.target_loss)

    @property
    def stopped(self) -> bool:
        """True when Stop cut the sweep short."""
        return any(row.status in (RunStatus.STOPPED, RunStatus.SKIPPED) for row in self.rows)

    def results(self) -> list[RunResult]:
        """The points' results, e.g. as `others` for `core.diagnosis.probes.diagnose`."""
        return [row.result for row in self.rows]

    def lr_note(self) -> str:
        """How the suggested learning rates are made (empty when the batch was not swept)."""
        return LINEAR_SCALING_NOTE.format(base=self.plan.base.batch_size) if _batch_swept(self.plan) else ""

    def to_dict(self) -> dict[str, Any]:
        """The sweep as `main.py sweep --json` prints it: what was swept, the rows, and `best`."""
        base = self.plan.base
        swept = {axis.name for axis in self.plan.axes}
        target = sweep_target(self.rows, self.target_loss)
        best, tied, most = self.best, tied_with_best(self.rows, self.target_loss), most_samples_index(self.rows)
        return {
            "model": base.model,
            "dataset": base.dataset,
            "target": target_text(base),
            "steps": base.steps,
            "learning_rate": base.learning_rate,
            "base_batch_size": base.batch_size,
            "fixed": {name: getattr(base, name) for name in AXES if name not in swept},
            "axes": [{"name": axis.name, "values": list(axis.values)} for axis in self.plan.axes],
            "left_out": [item.to_dict() for item in self.plan.left_out],
            "group": self.group,
            "rows": [row.to_dict(target) for row in self.rows],
            "best": best,
            "tied_with_best": list(tied),
            "best_beyond_noise": best is not None and not tied,
            "target_loss": target,
            "target_how": target_how(self.target_loss),
            "best_by_samples_per_s": most,
            "best_is_most_samples_per_s": best == most,
            "best_why": why_not_most_samples(self.rows, self.target_loss),
            "lr_note": self.lr_note(),
            "rounds": max((rounds_measured(row.result) for row in self.rows), default=0),
        }


def _completed(rows: Sequence[SweepRow | None]) -> list[tuple[int, SweepRow]]:
    return [
        (index, row) for index, row in enumerate(rows) if row is not None and row.status == RunStatus.COMPLETED and row.result.samples_per_s
    ]


def sweep_target(rows: Sequence[SweepRow | None], given: float | None = None) -> float | None:
    """The loss the rows are timed to: `given`, else the highest of the completed rows' smoothed final losses."""
    return given if given is not None else common_target([row.result for _, row in _completed(rows)])


def most_samples_index(rows: Sequence[SweepRow | None]) -> int | None:
    """The index of the completed row with the most samples/s, or None (rows not run yet may be None)."""
    done = [(row.result.samples_per_s, index) for index, row in _completed(rows)]
    return max(done)[1] if done else None


def best_index(rows: Sequence[SweepRow | None], target_loss: float | None = None) -> int | None:
    """The completed row that reached the target loss soonest in steady-state seconds; the most samples/s when none did.

    Steady: the warm-up (tracing, compiling) is paid once however long the training, so in a short sweep it would
    decide the star; it is reported beside (`time_to_target_s`).
    """
    target = sweep_target(rows, target_loss)
    timed = [(to.steady_seconds, index) for index, row in _completed(rows) if (to := reach(row.result, target)).steady_seconds is not None]
    return min(timed)[1] if timed else most_samples_index(rows)


def time_interval(top: SweepRow, row: SweepRow, target_loss: float | None) -> tuple[float, float] | None:
    """The 95% interval of `row`'s time to the target over `top`'s: samples needed, over the rounds' samples/s interval.

    None when either did not reach the target or the samples/s cannot be compared.
    """
    top_to, row_to = reach(top.result, target_loss), reach(row.result, target_loss)
    interval = between_runs(top.result, row.result)
    if interval is None or not (top_to.samples and row_to.samples) or interval.low <= 0:
        return None
    needed = row_to.samples / top_to.samples
    return needed / interval.high, needed / interval.low


def tied_with_best(rows: Sequence[SweepRow | None], target_loss: float | None = None) -> tuple[int, ...]:
    """The completed rows (not the best) no slower to the target than the best beyond noise (the interval holds 1).

    A row that never reached the target is slower; a row without per-call timings to compare counts as tied:
    nothing shows the best is faster. Judged on samples/s where no row reached the target.
    """
    best = best_index(rows, target_loss)
    if best is None:
        return ()
    top = rows[best]
    assert top is not None
    target = sweep_target(rows, target_loss)
    by_time = reach(top.result, target).reached
    tied = []
    for index, row in _completed(rows):
        if index == best:
            continue
        if by_time:
            if not reach(row.result, target).reached:
                continue
            times = time_interval(top, row, target)
            if times is None or times[0] <= 1.0 <= times[1]:
                tied.append(index)
            continue
        interval = between_runs(top.result, row.result)
        if interval is None or not interval.beyond_noise:
            tied.append(index)
    return tuple(tied)


def why_not_most_samples(rows: Sequence[SweepRow | None], target_loss: float | None = None) -> str:
    """One line where the best is not the row with the most samples/s: how much faster that row runs, and how much slower it learns.

    "batch 4096: 6.9× the samples/s, but needs 29× the samples to reach loss 0.0855: 5.0× slower to train" ("" when they agree).
    """
    best, most = best_index(rows, target_loss), most_samples_index(rows)
    if best is None or most is None or best == most:
        return ""
    top, fast = rows[best], rows[most]
    assert top is not None and fast is not None
    target = sweep_target(rows, target_loss)
    top_to, fast_to = reach(top.result, target), reach(fast.result, target)
    speed = (fast.result.samples_per_s or 0.0) / (top.result.samples_per_s or 1.0)
    if target is None:
        return ""
    if not fast_to.reached:
        return f"{fast.label}: {speed:.3g}× the samples/s, but its loss did not reach {target:.4g} ({fast_to.reason})"
    needs = f"{fast_to.samples / top_to.samples:.3g}× the samples" if fast_to.samples and top_to.samples else "more samples"
    slower = (
        f": {fast_to.steady_seconds / top_to.steady_seconds:.3g}× slower to train"
        if fast_to.steady_seconds and top_to.steady_seconds
        else ": slower to train"
    )
    return f"{fast.label}: {speed:.3g}× the samples/s, but needs {needs} to reach loss {target:.4g}{slower}"


def suggested_learning_rate(plan: SweepPlan, settings: dict[str, Any]) -> float | None:
    """The linear scaling rule's learning rate at the point's batch: lr x batch / base batch (None when the batch is not swept)."""
    if not _batch_swept(plan):
        return None
    return plan.base.learning_rate * settings["batch_size"] / plan.base.batch_size


def history_label(config: RunConfig, settings: dict[str, Any]) -> str:
    """'Small CNN · synthetic · CPU:0 · batch 32 · bfloat16 · sweep': how a point shows in the history."""
    return " · ".join([model_title(config.model), str(config.dataset), target_text(config), point_label(settings), "sweep"])


class SweepListener(JobListener):
    """Follows a sweep: on_job_start(index, total, label) before a point trains, its steps, then on_row(index, row)."""

    def on_row(self, index: int, row: SweepRow) -> None:
        """Point `index` ended (a skipped one too): its row."""


def run_sweep(
    plan: SweepPlan,
    store: RunStore | None = None,
    options: JobOptions = PLAIN,
    stop_event: threading.Event | None = None,
    rounds: int = DEFAULT_ROUNDS,
    seed: int | None = None,
) -> Sweep:
    """Run every point of `plan` in interleaved rounds (`core.jobs.rounds`), each recorded in `store` under `options.group`.

    `store` None: not recorded. `options.listener` (a SweepListener) hears
    each point's start (before it is set up), on_turn(index, round, rounds)
    before each of its turns, its steps and its row. Setting `stop_event` ends
    the turn in flight after its step call; the points not started become
    "skipped" rows (not runs in the history).
    """
    stop_event = stop_event or threading.Event()
    listener = options.listener
    points = plan.points()
    rows: list[SweepRow | None] = [None] * len(points)

    def starter(settings: dict[str, Any]) -> Callable[[RoundGate], SweepRow]:
        return lambda gate: run_point(plan, settings, store, replace(options, hooks=(gate, *options.hooks)), stop_event)

    def on_ended(index: int, row: SweepRow | None) -> None:
        if row is not None:
            rows[index] = row
            if isinstance(listener, SweepListener):
                listener.on_row(index, row)

    on_turn = announcing(listener, [point_label(settings) for settings in points])
    run_in_rounds([starter(settings) for settings in points], rounds, stop_event, seed, on_turn, on_ended=on_ended)
    for index, settings in enumerate(points):
        if rows[index] is None:
            skipped = SweepRow(settings, _unrun(plan, settings, RunStatus.SKIPPED, "Not run: the sweep was stopped first."))
            rows[index] = skipped
            if isinstance(listener, SweepListener):
                listener.on_row(index, skipped)
    return Sweep(plan, tuple(row for row in rows if row is not None), options.group)


def run_point(
    plan: SweepPlan,
    settings: dict[str, Any],
    store: RunStore | None = None,
    options: JobOptions = PLAIN,
    stop_event: threading.Event | None = None,
) -> SweepRow:
    """Train one point, recorded; a point that cannot run is a failed row with the reason, never an exception."""
    try:
        config = plan.config_at(settings)
    except ConfigError as exc:
        result = _unrun(plan, settings, RunStatus.FAILED, str(exc))
        recorded = record_unrun(result, plan.base, store, replace(options, label=history_label(plan.base, settings)))
    else:
        recorded = run_job(config, store, replace(options, label=history_label(config, settings)), stop_event)
    return SweepRow(settings, recorded.result, recorded.run_id, suggested_learning_rate(plan, settings), recorded.history_error)


def _unrun(plan: SweepPlan, settings: dict[str, Any], status: RunStatus, message: str) -> RunResult:
    """The result of a point that never trained: its intended config and why it did not run."""
    return RunResult(status=status, config={**plan.base.to_dict(), **settings}, message=message)


def _batch_swept(plan: SweepPlan) -> bool:
    return any(axis.name == "batch_size" for axis in plan.axes)
