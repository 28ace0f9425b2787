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
target given, else the highest smoothed final loss of the rows whose loss fell beyond noise, which each of them
reached), not the one with the most samples/s, which a larger batch wins while it learns less per sample. A row whose
loss did not fall beyond noise to the target has not reached it. Time to the target decides nothing when no row's loss
fell beyond noise (random labels, too few steps), when a row reached it within its warm-up, or when no row reached a
given target: then the best is the row with the most samples/s (of those that reached the target, where a warm-up hid
the time to it), and the sweep says why (`best_by`, `target_undecided`, `target_undecided_why`). It is better beyond noise only when, for every other completed row, the
95% interval of the compared figure lies beyond 1: by time, the interval of its time to the target over the best's,
the rounds' interval of the samples/s (`core.training.noise.between_runs`) scaled by the samples each needed; by
samples/s, the rounds' interval itself. Rows whose interval holds 1 are tied with it (`tied_with_best`); then no row
is starred, and the tables say "tied" instead. Each row's `versus_best` compares the same figure as the star.

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
from core.jobs.listener import announcing
from core.jobs.rounds import DEFAULT_ROUNDS, RoundGate, crashed_result, rounds_measured, run_in_rounds
from core.results import RunResult, RunStatus
from core.training.noise import Interval, between_runs, energy_ratio
from core.training.to_target import IN_WARMUP, TargetDecision, ToTarget, decide, judged_reach, target_how
from core.tuning.sweep_plan import AXES, SweepPlan, point_label, target_text
from core.workloads.workload import model_title

if TYPE_CHECKING:
    from core.history.store import RunStore

LINEAR_SCALING_NOTE = (
    "Linear scaling rule: at a larger batch, try learning rate x batch / {base} (the batch the learning rate was set for), "
    "reached by a linear warm-up over the first few epochs (Goyal et al. 2017; the TPU performance guide)."
)
BY_TIME = "time_to_target"
BY_SAMPLES = "samples_per_s"
"""What the star compares (`best_by`): steady seconds to the target loss, or samples/s where that decides nothing."""
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

    def to_dict(self, target_loss: float | None = None, to: ToTarget | None = None) -> dict[str, Any]:
        """JSON-ready: settings, status, message, the row's figures, time to `target_loss` (`to`: as the sweep judged it),
        the suggested learning rate and the history id."""
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
            **energy_fields(self.result, to if to is not None else judged_reach(self.result, target_loss)),
            **(to if to is not None else judged_reach(self.result, target_loss)).to_dict(),
        }


@dataclass(frozen=True)
class Sweep:
    """A finished (or stopped) sweep: its plan, one row per point in plan order, and the fastest completed row."""

    plan: SweepPlan
    rows: tuple[SweepRow, ...]
    group: str = ""
    target_loss: float | None = None  # given (--target-loss); None: the rows' common target
    objective: str = "time"  # "time": fastest to the target (or most samples/s); "energy": fewest measured joules

    @property
    def best(self) -> int | None:
        """The index of the completed row fastest to the target loss, or with the fewest joules (None when no row completed)."""
        if self.objective == "energy":
            return energy_best(self.rows, self.target_loss)[0]
        return best_index(self.rows, self.target_loss)

    def tied(self) -> tuple[int, ...]:
        """The rows no worse than the best beyond noise, in what the objective compares."""
        if self.objective == "energy":
            return energy_best(self.rows, self.target_loss)[1]
        return tied_with_best(self.rows, self.target_loss)

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
        decision = target_decision(self.rows, self.target_loss)
        target = decision.target_loss
        best, tied, most = self.best, self.tied(), most_samples_index(self.rows)
        reached = row_reach(self.rows, self.target_loss)
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
            "rows": [
                {**row.to_dict(target, reached[index]), "versus_best": versus_dict(versus_best(self.rows, index, self.target_loss))}
                for index, row in enumerate(self.rows)
            ],
            "best": best,
            "tied_with_best": list(tied),
            "best_beyond_noise": best is not None and not tied,
            "best_by": (energy_best(self.rows, self.target_loss)[2] if self.objective == "energy" else best_by(self.rows, self.target_loss))
            if best is not None
            else None,
            "objective": self.objective,
            **decision.to_dict(),
            "target_loss": target,
            "target_how": target_how(self.target_loss),
            "best_by_samples_per_s": most,
            "best_is_most_samples_per_s": best == most,
            "best_why": why_not_most_samples(self.rows, self.target_loss),
            "lr_note": self.lr_note(),
            "rounds": max((rounds_measured(row.result) for row in self.rows), default=0),
        }


OBJECTIVES = ("time", "energy")
BY_JOULES_TO_TARGET, BY_JOULES_PER_SAMPLE = "joules_to_target", "joules_per_sample"


def energy_fields(result: RunResult, to: ToTarget) -> dict[str, Any]:
    """A row's measured energy: joules per sample, samples per joule, joules to the target loss, or why none."""
    energy = result.energy or {}
    per_sample = energy.get("joules_per_sample")
    return {
        "joules_per_sample": per_sample,
        "samples_per_joule": energy.get("samples_per_joule"),
        "joules_to_target": per_sample * to.samples if per_sample and to.reached and to.samples else None,
        "energy_reason": result.energy_reason,
    }


def energy_best(rows: Sequence[SweepRow | None], target_loss: float | None = None) -> tuple[int | None, tuple[int, ...], str]:
    """(the row with the fewest joules, the rows tied with it, what was compared): joules to the target where time to it
    decides (`target_decision`), else joules per sample; ties where the interval of their joules per sample over the
    rounds (`energy_ratio`) holds 1. (None, (), "") where no completed row measured its energy."""
    decision = target_decision(rows, target_loss)
    judged = dict(zip((index for index, _ in _completed(rows)), decision.reached, strict=True))
    by = BY_JOULES_TO_TARGET if decision.decides else BY_JOULES_PER_SAMPLE
    costs = {}
    for index, row in _completed(rows):
        fields = energy_fields(row.result, judged[index])
        cost = fields["joules_to_target"] if by == BY_JOULES_TO_TARGET else fields["joules_per_sample"]
        if cost is not None:
            costs[index] = cost
    if not costs:
        return None, (), ""
    best = min(costs, key=lambda index: costs[index])
    top = rows[best]
    assert top is not None
    tied = []
    for index in costs:
        other = rows[index]
        if index == best or other is None:
            continue
        interval = energy_ratio(top.result, other.result)
        if interval is None or not interval.beyond_noise:
            tied.append(index)
    return best, tuple(tied), by


def _completed(rows: Sequence[SweepRow | None]) -> list[tuple[int, SweepRow]]:
    return [
        (index, row) for index, row in enumerate(rows) if row is not None and row.status == RunStatus.COMPLETED and row.result.samples_per_s
    ]


def target_decision(rows: Sequence[SweepRow | None], given: float | None = None) -> TargetDecision:
    """The completed rows' target (`given`, else the common one), each one's judged time to it, and whether that decides
    (`core.training.to_target.decide`); `reached` holds the completed rows only, in order."""
    done = _completed(rows)
    return decide([row.result for _, row in done], given, [row.label for _, row in done])


def row_reach(rows: Sequence[SweepRow | None], given: float | None = None) -> list[ToTarget]:
    """Each row's judged time to the sweep's target (`core.training.to_target.judged_reach`; rows not run yet: none)."""
    decision = target_decision(rows, given)
    judged = dict(zip((index for index, _ in _completed(rows)), decision.reached, strict=True))
    return [
        judged[index] if index in judged else judged_reach(row.result, decision.target_loss) if row is not None else ToTarget(None)
        for index, row in enumerate(rows)
    ]


def most_samples_index(rows: Sequence[SweepRow | None]) -> int | None:
    """The index of the completed row with the most samples/s, or None (rows not run yet may be None)."""
    done = [(row.result.samples_per_s, index) for index, row in _completed(rows)]
    return max(done)[1] if done else None


def _samples_pool(rows: Sequence[SweepRow | None], decision: TargetDecision) -> set[int]:
    """The completed rows the samples/s star may go to: those that reached the target where a warm-up hid the time to it
    (one that never got there is slower to train whatever its samples/s), else every completed row."""
    done = _completed(rows)
    if decision.reason == IN_WARMUP:
        return {index for (index, _), to in zip(done, decision.reached, strict=True) if to.reached}
    return {index for index, _ in done}


def best_by(rows: Sequence[SweepRow | None], target_loss: float | None = None) -> str:
    """What the star compares: BY_TIME where time to the target decides (see `target_decision`), else BY_SAMPLES."""
    return BY_TIME if target_decision(rows, target_loss).decides else BY_SAMPLES


def best_index(rows: Sequence[SweepRow | None], target_loss: float | None = None) -> int | None:
    """The completed row that reached the target loss soonest in steady-state seconds; the most samples/s where that decides nothing.

    Steady: the warm-up (tracing, compiling) is paid once however long the training, so in a short sweep it would
    decide the star; it is reported beside (`time_to_target_s`). A target reached within a warm-up, or one no row's
    loss fell to beyond noise, decides nothing (`target_decision`).
    """
    decision = target_decision(rows, target_loss)
    if not decision.decides:
        pool = _samples_pool(rows, decision)
        done = [(row.result.samples_per_s, index) for index, row in _completed(rows) if index in pool]
        return max(done)[1] if done else most_samples_index(rows)
    timed = [
        (to.steady_seconds, index)
        for (index, _), to in zip(_completed(rows), decision.reached, strict=True)
        if to.reached and to.steady_seconds is not None
    ]
    return min(timed)[1] if timed else most_samples_index(rows)


def time_interval(
    top: SweepRow, row: SweepRow, target_loss: float | None, judged: tuple[ToTarget, ToTarget] | None = None
) -> tuple[float, float] | None:
    """The 95% interval of `row`'s time to the target over `top`'s: samples needed, over the rounds' samples/s interval.

    None when either did not reach the target or the samples/s cannot be compared. `judged`: the two rows' times to
    the target as the sweep judged them (default: judged between the two alone).
    """
    found = time_ratio(top, row, target_loss, judged)
    return None if found is None else (found.low, found.high)


def time_ratio(top: SweepRow, row: SweepRow, target_loss: float | None, judged: tuple[ToTarget, ToTarget] | None = None) -> Interval | None:
    """`row`'s time to the target over `top`'s with its 95% interval (`rounds` as the samples/s interval's); None as `time_interval`."""
    top_to, row_to = judged if judged is not None else decide([top.result, row.result], target_loss).reached
    interval = between_runs(top.result, row.result)
    if interval is None or not (top_to.samples and row_to.samples) or interval.low <= 0 or not (top_to.reached and row_to.reached):
        return None
    needed = row_to.samples / top_to.samples
    return Interval(needed / interval.ratio, needed / interval.high, needed / interval.low, interval.calls, interval.rounds)


def versus_best(rows: Sequence[SweepRow | None], index: int, target_loss: float | None = None) -> tuple[str, Interval | None]:
    """Row `index` against the best, in the figure the star compares (`best_by`): its time to the target over the
    best's, or its samples/s over the best's, with the 95% interval; (that figure, None) for the best itself or without one."""
    best = best_index(rows, target_loss)
    by = best_by(rows, target_loss)
    row = rows[index] if index < len(rows) else None
    if best is None or index == best or row is None or row.status != RunStatus.COMPLETED or not row.result.samples_per_s:
        return by, None
    top = rows[best]
    assert top is not None
    if by == BY_SAMPLES:
        return by, between_runs(top.result, row.result)
    judged = dict(zip((i for i, _ in _completed(rows)), target_decision(rows, target_loss).reached, strict=True))
    return by, time_ratio(top, row, target_loss, (judged[best], judged[index]))


def versus_dict(versus: tuple[str, Interval | None]) -> dict[str, Any]:
    """`versus_best` for JSON: what it compares ("of"), the ratio, its 95% interval and whether that excludes 1."""
    by, interval = versus
    return {
        "of": by,
        "ratio": interval.ratio if interval is not None else None,
        "ci": interval.to_list() if interval is not None else None,
        "beyond_noise": interval.beyond_noise if interval is not None else None,
    }


def tied_with_best(rows: Sequence[SweepRow | None], target_loss: float | None = None) -> tuple[int, ...]:
    """The completed rows (not the best) no slower than the best beyond noise (the interval holds 1), in what the star compares.

    By time: a row that never reached the target is slower; a row without per-call timings to compare counts as tied:
    nothing shows the best is faster. By samples/s (where time to the target decides nothing): the rounds' interval.
    """
    best = best_index(rows, target_loss)
    if best is None:
        return ()
    decision = target_decision(rows, target_loss)
    judged = dict(zip((i for i, _ in _completed(rows)), decision.reached, strict=True))
    tied = []
    for index, _ in _completed(rows):
        if index == best:
            continue
        if (decision.decides and not judged[index].reached) or index not in _samples_pool(rows, decision):
            continue
        _, interval = versus_best(rows, index, target_loss)
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
    decision = target_decision(rows, target_loss)
    target = decision.target_loss
    judged = dict(zip((i for i, _ in _completed(rows)), decision.reached, strict=True))
    top_to, fast_to = judged[best], judged[most]
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

    def on_crash(index: int, error: BaseException) -> SweepRow:  # its job raised: a failed row saying what, not a skipped one
        return SweepRow(points[index], crashed_result(error, _unrun(plan, points[index], RunStatus.FAILED, "").config))

    on_turn = announcing(listener, [point_label(settings) for settings in points])
    run_in_rounds([starter(settings) for settings in points], rounds, stop_event, seed, on_turn, on_ended=on_ended, on_crash=on_crash)
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
