"""Device comparison, headless: one job on several devices or strategies, side by side.

Every target trains the same model, data, global batch size, steps and seed,
in interleaved rounds (`core.jobs.rounds`: a load that comes and goes hits every
target alike), so the rows differ only in where the job ran. Speed-ups are
relative to a baseline row the user picks and can change without re-running
(`core.compare.table`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from core.compare.table import Comparison, check_baseline, compare_results
from core.compare.targets import TARGET_FORMS, CompareTarget, sweep_targets
from core.config import ConfigError, RunConfig
from core.history.database import StoreError
from core.hooks.flops import FlopsCounter
from core.jobs import PLAIN, JobOptions, RecordedRun, record_unrun, run_job
from core.jobs.listener import announcing
from core.jobs.rounds import DEFAULT_ROUNDS, RoundGate, crashed_result, run_in_rounds
from core.machine.types import short_name
from core.results import RunResult, RunStatus
from core.workloads.workload import model_title

if TYPE_CHECKING:
    from core.history.store import RunStore


SKIPPED_MESSAGE = "Not run: the comparison was stopped first."


def progress_line(index: int, total: int, label: str) -> str:
    """'run 2 of 3: GPU:0' for the 0-based `index`."""
    return f"run {index + 1} of {total}: {label}"


def history_label(target_label: str, config: dict) -> str:
    """'MLP · digits · mirrored:CPU:0,CPU:1 · batch 64 · compare': how a comparison's run shows in the history.

    A model file shows by its file name, an .npz data file by its name.
    """
    dataset = str(config.get("dataset"))
    data = os.path.basename(dataset) if dataset.lower().endswith(".npz") else dataset
    return " · ".join([model_title(str(config.get("model"))), data, target_label, f"batch {config.get('batch_size')}", "compare"])


def run_comparison(
    base: RunConfig,
    targets: Sequence[CompareTarget],
    baseline_index: int = 0,
    store: RunStore | None = None,
    options: JobOptions = PLAIN,
    stop_event: threading.Event | None = None,
    rounds: int = DEFAULT_ROUNDS,
    seed: int | None = None,
) -> Comparison:
    """Run `base` on each target in interleaved rounds (`core.jobs.rounds`), each recorded in `store` as it trains.

    `store` None: not recorded. Each target is set up and warmed up alone, then
    `rounds` rounds each run every target for its share of the steps, in a new
    random order (`seed`, recorded with the runs); the speed-ups' intervals come
    from the rounds. `options.listener` hears on_job_start(index, total, label)
    before a target is set up, on_turn(index, round, rounds) before each of its
    turns, its steps while it trains, and on_job_end(index, recorded) after
    every target that was not skipped. Setting `stop_event` ends the turn in
    flight and skips the targets not started (rows with status "skipped", not
    recorded). A target that cannot run here (an invalid config, a missing
    device) becomes a failed row with the reason, recorded, and the others still run;
    so does a target whose job raised (`crashed_result`: what it raised), never a skipped one.
    """
    targets = list(targets)
    if not targets:
        raise ConfigError("targets", [], "one or more of " + TARGET_FORMS)
    check_baseline(baseline_index, len(targets))
    stop_event = stop_event or threading.Event()
    counter = FlopsCounter()
    listener = options.listener

    def starter(target: CompareTarget) -> Callable[[RoundGate], RecordedRun]:
        return lambda gate: _run_target(base, target, store, replace(options, hooks=(gate, counter, *options.hooks)), stop_event)

    def on_ended(index: int, recorded: RecordedRun | None) -> None:
        if listener is not None and recorded is not None:
            listener.on_job_end(index, recorded)

    def on_crash(index: int, error: BaseException) -> RecordedRun:
        return _crashed(base, targets[index], error)

    on_turn = announcing(listener, [target.label for target in targets])
    recorded_runs = run_in_rounds(
        [starter(target) for target in targets], rounds, stop_event, seed, on_turn, on_ended=on_ended, on_crash=on_crash
    )
    entries = [
        (target.label, recorded.result if recorded is not None else _unrun(base, target, RunStatus.SKIPPED, SKIPPED_MESSAGE))
        for target, recorded in zip(targets, recorded_runs, strict=True)
    ]
    comparison = compare_results(entries, baseline_index, counter.flops, counter.method, counter.params)
    if store is not None:
        unsaved = _record_judgements(store, comparison, recorded_runs)
        comparison = replace(comparison, warnings=(*comparison.warnings, *unsaved))
    return comparison


def _record_judgements(store: RunStore, comparison: Comparison, recorded_runs: Sequence[RecordedRun | None]) -> list[str]:
    """Store what the comparison judged of each recorded run (verdict, FLOPs, achieved FLOP/s, % of peak): History shows what Compare did.

    The runs were saved as they trained, before the comparison judged them; their steps stay as saved.
    Returns a line for each run whose judgement could not be stored.
    """
    unsaved: list[str] = []
    for row, recorded in zip(comparison.rows, recorded_runs, strict=True):
        if recorded is None or recorded.run_id is None:
            continue
        judged = replace(
            row.result,
            losses=(),
            step_times_s=(),
            flops_per_step=row.result.flops_per_step if row.result.flops_per_step is not None else comparison.flops_per_step,
            achieved_flops=row.achieved_flops,
            pct_of_measured_peak=None if row.fraction_of_peak is None else 100.0 * row.fraction_of_peak,
        )
        try:
            store.finish_run(recorded.run_id, judged)
        except (StoreError, sqlite3.Error) as exc:  # the comparison stands; the history keeps what was saved while training
            unsaved.append(f"{row.label}: the history keeps run #{recorded.run_id} without the comparison's verdict ({exc})")
    return unsaved


def _run_target(
    base: RunConfig, target: CompareTarget, store: RunStore | None, options: JobOptions, stop_event: threading.Event
) -> RecordedRun:
    """Train one target, recorded; a target whose config is invalid is a failed run, recorded with the base job's config."""
    try:
        config = target.config_for(base)
    except ConfigError as exc:
        unrun = _unrun(base, target, RunStatus.FAILED, str(exc))
        return record_unrun(unrun, base, store, replace(options, label=history_label(target.label, unrun.config)))
    return run_job(config, store, replace(options, label=history_label(target.label, config.to_dict())), stop_event)


def _crashed(base: RunConfig, target: CompareTarget, error: BaseException) -> RecordedRun:
    """A target whose job raised instead of ending with a result: a failed row saying what was raised.

    Not recorded again: a job that raised after its record began finished that record as failed (`run_job`).
    """
    return RecordedRun(crashed_result(error, _unrun(base, target, RunStatus.FAILED, "").config), None, "", False)


def _unrun(base: RunConfig, target: CompareTarget, status: RunStatus, message: str) -> RunResult:
    """The result of a target that never trained: its intended config and why it did not run."""
    config = base.to_dict()
    config.update(strategy=target.strategy, devices=list(target.devices))
    if target.workers is not None:
        config["workers"] = target.workers
    if target.tpu_address:
        config["tpu_address"] = target.tpu_address
    return RunResult(status=status, config=config, message=message)


def scaling_sweep(
    base: RunConfig,
    device_kind: str = "CPU",
    counts: Sequence[int] | None = None,
    baseline_index: int = 0,
    store: RunStore | None = None,
    options: JobOptions = PLAIN,
    stop_event: threading.Event | None = None,
    rounds: int = DEFAULT_ROUNDS,
) -> Comparison:
    """The same job on 1, 2, ..., N devices of one kind (strong scaling: the global batch stays fixed).

    The batch size must divide by every count; a count it does not divide
    becomes a failed row saying so. `store`, `options`, `rounds` as in `run_comparison`.
    """
    kind = str(device_kind).upper()
    if kind not in ("CPU", "GPU"):
        raise ConfigError("device_kind", device_kind, "CPU or GPU")
    import tensorflow as tf

    names = [short_name(d.name) for d in tf.config.list_logical_devices(kind)]
    if not names:
        raise ConfigError("device_kind", device_kind, "a kind TensorFlow sees here (no GPU found)")
    counts = list(range(1, len(names) + 1)) if counts is None else list(counts)
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= len(names):
            raise ConfigError("counts", count, f"whole numbers from 1 to {len(names)} (the {kind} devices here)")
    targets = sweep_targets(names, counts)
    return run_comparison(base, targets, baseline_index, store, options, stop_event, rounds)
