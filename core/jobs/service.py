"""The recorded-job service: train one config, record it as it trains, diagnose it, finish its record once.

`run_job` builds the run's hooks (`core.jobs.run_hooks`: the standard ones
from the config, the caller's listener and hooks), begins the run in the
history before it trains (so a crash or `kill -9` leaves it "interrupted" with
its steps), passes the hooks and the recorder to `core.runner.run_training`,
ends every hook in a `finally` (also those of a run that failed before its first
step), and finishes the record exactly once with the final result, its verdict
included: the diagnosis is a hook that amends the result before the run ends.
`record_unrun` saves a run that never trained (a comparison target that does
not fit this machine).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config import ConfigError, RunConfig, backend_title
from core.jobs.listener import JobListener, RecordedRun
from core.jobs.run_hooks import RunHooks
from core.results import RunResult, RunStatus
from core.runner import run_training
from core.training.hooks import RunHook
from core.workloads.workload import check_workload, model_title

if TYPE_CHECKING:  # the history and the diagnosis load when a job needs them: the CLI checks its input first
    from core.history.recorder import HistoryRecorder
    from core.history.store import RunStore


@dataclass(frozen=True)
class JobOptions:
    """How a job runs besides its config.

    `label`/`group`: how the run shows in the history. `diagnose`: give a
    completed run its verdict (short probe runs, not recorded). `hooks`: the
    caller's own hooks (a FLOP counter shared by a comparison, a round's gate, a
    clock, a view's watcher); the standard ones (TensorBoard and the profiler as
    `config.hooks` asks, conditions, GPU use, energy, FLOPs, the verdict) come
    with every run (`core.jobs.run_hooks`). `listener`: the one progress
    channel. `raise_config_error`: a ConfigError found as the run starts (a
    device this machine lacks, a profile past its steps) is raised and a begun
    record removed, instead of becoming a failed, recorded run. `unsaved_reason`: why
    the store is None when the run was meant to be saved (said in the result's
    `history_error`).
    """

    label: str = ""
    group: str = ""
    diagnose: bool = False
    hooks: tuple[RunHook, ...] = ()
    listener: JobListener | None = None
    raise_config_error: bool = False
    unsaved_reason: str = ""


PLAIN = JobOptions()
"""A job with no label, group, hooks, listener or diagnosis."""


def run_label(config: RunConfig) -> str:
    """A run's name in the plots and the history, the window's and `run`'s alike: 'MLP · digits · one-device CPU:0 · JAX ·
    batch 64 · TensorBoard'."""
    where = config.strategy + (" " + " ".join(config.devices) if config.devices else "")
    if config.backend != "tensorflow":
        where += " · " + backend_title(config.backend)
    if config.strategy == "multi-worker":
        where += f" ×{config.workers}"
    extras = [f"batch {config.batch_size}"]
    if config.precision != "off":
        extras.append(config.precision)
    if config.xla:
        extras.append("XLA")
    if config.hooks.tensorboard:
        extras.append("TensorBoard")
    if config.hooks.profile:
        extras.append(f"profiled {config.hooks.profile_text}")
    data = os.path.basename(config.dataset) if config.dataset.lower().endswith(".npz") else config.dataset
    return " · ".join([model_title(config.model), data, where, *extras])


def run_job(
    config: RunConfig, store: RunStore | None, options: JobOptions = PLAIN, stop_event: threading.Event | None = None
) -> RecordedRun:
    """Train `config`, recorded in `store` (None: not recorded) while it trains, diagnosed when `options.diagnose`.

    Setting `stop_event` ends the run after the call in flight (and its
    diagnosis, which then leaves no verdict). Never raises for a run that
    fails: a config this machine cannot run is a failed run, recorded, with
    `started` False (raised instead with `options.raise_config_error`). Every
    hook of the run is ended, whatever happened.
    """
    stop_event = stop_event or threading.Event()
    recorder: HistoryRecorder | None = None
    try:
        config = check_workload(config)
        recorder = _recorder(store, config, options)
        hooks = _run_hooks(config, options, recorder, stop_event)
    except ConfigError as exc:  # a model or data the catalogue does not have, a profile past the run: a run that never started
        if options.raise_config_error:
            raise
        return record_unrun(_failed(config, exc), config, store, options)
    if options.listener is not None:
        options.listener.on_run_hooks(hooks)
    if recorder is not None:
        recorder.begin()
    try:
        result, started = _trained(config, hooks, stop_event), True
    except Exception as exc:  # a config the machine cannot run: a failed run, recorded like any other
        result, started = _failed(config, exc), False
        if options.raise_config_error and isinstance(exc, ConfigError):
            if recorder is not None:
                recorder.discard()  # bad input found as the run started: not a run
            raise
    except BaseException as exc:  # SystemExit from a model file's code, say: its record finished as failed, then on up
        result = _failed(config, exc)
        _finished(recorder, result, options, started=True)
        raise
    return _finished(recorder, result, options, started)


def _trained(config: RunConfig, hooks: RunHooks, stop_event: threading.Event) -> RunResult:
    """`config` trained with `hooks`, every one of them ended whatever happens (a run that fails before its first step ends none)."""
    try:
        result = run_training(config, stop_event=stop_event, hooks=list(hooks))
    except BaseException as exc:
        hooks.close(_failed(config, exc))
        raise
    hooks.close(result)
    return result


def _run_hooks(config: RunConfig, options: JobOptions, recorder: HistoryRecorder | None, stop_event: threading.Event) -> RunHooks:
    """The run's hooks: the listener first, the caller's hooks, the recorder, then the standard ones (`RunHooks`)."""
    listener = options.listener
    own = [*([listener] if listener is not None else []), *options.hooks, *([recorder] if recorder is not None else [])]
    return RunHooks(config, stop_event, own, options.diagnose, listener.on_diagnosing if listener is not None else None)


def record_unrun(result: RunResult, config: RunConfig, store: RunStore | None, options: JobOptions = PLAIN) -> RecordedRun:
    """Save `result`, a run that never trained (failed before it started), in one transaction; `config` is the job it was meant to be."""
    return _finished(_recorder(store, config, options), result, options, started=False)


def _recorder(store: RunStore | None, config: RunConfig, options: JobOptions) -> HistoryRecorder | None:
    from core.history.recorder import HistoryRecorder

    if store is not None:
        return HistoryRecorder(store, config, options.label, options.group)
    if options.unsaved_reason:
        return HistoryRecorder(None, config, options.label, options.group, error=options.unsaved_reason)
    return None


def _finished(recorder: HistoryRecorder | None, result: RunResult, options: JobOptions, started: bool) -> RecordedRun:
    """The run's record finished (the one place it is) and what the caller gets back."""
    if recorder is None:
        return RecordedRun(result, None, "", started)
    run_id = recorder.finish(result)
    return RecordedRun(result, run_id, recorder.error, started)


def _failed(config: RunConfig, exc: BaseException) -> RunResult:
    from core.training.failures import explain_failure

    return RunResult(status=RunStatus.FAILED, config=config.to_dict(), message=explain_failure(exc))
