"""Device comparison, headless: one job on several devices or strategies, side by side.

Every target trains the same model, data, global batch size, steps and seed,
one after another, so the rows differ only in where the job ran. Speed-ups are
relative to a baseline row the user picks and can change without re-running
(`core.compare.table`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from core.compare.table import Comparison, check_baseline, compare_results
from core.compare.targets import TARGET_FORMS, CompareTarget, sweep_targets
from core.config import ConfigError, RunConfig
from core.machine.types import short_name
from core.results import RunResult, RunStatus, StepRecord
from core.training.callbacks import RunCallback
from core.training.flops import FlopsCounter

if TYPE_CHECKING:
    from core.history.recorder import HistoryRecorder

OnProgress = Callable[[int, int, str], None]
OnIndexedSteps = Callable[[int, Sequence[StepRecord]], None]
OnResult = Callable[[int, RunResult], None]
Recorders = Callable[[int, RunConfig], "HistoryRecorder | None"]


def progress_line(index: int, total: int, label: str) -> str:
    """'run 2 of 3: GPU:0' for the 0-based `index`."""
    return f"run {index + 1} of {total}: {label}"


def run_comparison(
    base: RunConfig,
    targets: Sequence[CompareTarget],
    baseline_index: int = 0,
    on_progress: OnProgress | None = None,
    on_steps: OnIndexedSteps | None = None,
    stop_event: threading.Event | None = None,
    on_result: OnResult | None = None,
    callbacks: Sequence[RunCallback] = (),
    recorders: Recorders | None = None,
) -> Comparison:
    """Run `base` on each target in turn and put the results side by side.

    Callbacks get the target's 0-based index: on_progress(index, total,
    label) before a run, on_steps(index, records) while it trains,
    on_result(index, result) after every run that started. Setting
    `stop_event` ends the current run and skips the rest (rows with status
    "skipped"). A target that cannot run here (an invalid config, a missing
    device) becomes a failed row with the reason, and the others still run.

    `recorders(index, config)` gives each target its history recorder (None:
    not recorded): begun before the target trains and passed in its callbacks,
    so its steps are appended while it trains; a target that never reaches the
    engine (skipped, or failed before it started) is finished with its row's
    result. `config` is the target's job, or `base` when the target's job is invalid.
    """
    targets = list(targets)
    if not targets:
        raise ConfigError("targets", [], "one or more of " + TARGET_FORMS)
    check_baseline(baseline_index, len(targets))
    stop_event = stop_event or threading.Event()
    counter = FlopsCounter()
    entries: list[tuple[str, RunResult]] = []
    for index, target in enumerate(targets):
        if stop_event.is_set():  # a skipped target never ran: it is a row, not a run in the history
            entries.append((target.label, _unrun(base, target, RunStatus.SKIPPED, "Not run: the comparison was stopped first.")))
            continue
        recorder = _recorder_for(recorders, index, base, target)
        if on_progress is not None:
            on_progress(index, len(targets), target.label)
        sink = None if on_steps is None else (lambda records, i=index: on_steps(i, records))
        result, started = _run_target(base, target, sink, stop_event, [counter, *callbacks], recorder)
        if started and on_result is not None:
            on_result(index, result)
        if recorder is not None:
            recorder.finish(result)  # a no-op when the engine has finished it
        entries.append((target.label, result))
    return compare_results(entries, baseline_index, counter.flops, counter.method, counter.params)


def _recorder_for(recorders: Recorders | None, index: int, base: RunConfig, target: CompareTarget) -> HistoryRecorder | None:
    if recorders is None:
        return None
    try:
        config = target.config_for(base)
    except ConfigError:
        config = base
    return recorders(index, config)


def _run_target(base, target, on_steps, stop_event, callbacks, recorder) -> tuple[RunResult, bool]:
    """Train one target; (its result, whether it started). A target that cannot run gives a failed result."""
    from core.runner import run_training

    try:
        config = target.config_for(base)
        if recorder is not None:
            recorder.begin()
            callbacks = [*callbacks, recorder]
        return run_training(config, on_steps, stop_event, callbacks), True
    except Exception as exc:  # one target that cannot run must not lose the others' results
        from core.training.engine import explain_failure

        return _unrun(base, target, RunStatus.FAILED, explain_failure(exc)), False


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
    on_progress: OnProgress | None = None,
    on_steps: OnIndexedSteps | None = None,
    stop_event: threading.Event | None = None,
    on_result: OnResult | None = None,
    callbacks: Sequence[RunCallback] = (),
    recorders: Recorders | None = None,
) -> Comparison:
    """The same job on 1, 2, ..., N devices of one kind (strong scaling: the global batch stays fixed).

    The batch size must divide by every count; a count it does not divide
    becomes a failed row saying so. `recorders` as in `run_comparison`.
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
    return run_comparison(base, targets, baseline_index, on_progress, on_steps, stop_event, on_result, callbacks, recorders)
