"""`run` and `compare`: train in this process (or its workers) with progress on stderr.

Each run is recorded in the history when it starts, its steps appended about once
a second while it trains, and finished with its result, so a crash or `kill -9`
loses at most the last second. A completed `run` is then diagnosed (its verdict:
what bounds its speed, the evidence, the advice; `--no-verdict` skips it) and its
history record finished with the verdict. The result is printed whether or not the history
could take it. While training, stdout is sent to stderr so that it holds only
the result (`--json` stays one JSON document).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import TYPE_CHECKING

from core.cli.exits import EXIT_OK, EXIT_RUN_FAILED
from core.cli.history_commands import CliHistory
from core.cli.job_options import job_config
from core.cli.machine_commands import configure_tensorflow
from core.cli.output import ProgressPrinter, format_result, stdout_to_stderr
from core.cli.run_setup import JoinProgress, announce_cluster, check_output_folder, run_config
from core.cli.signals import run_interruptibly, stop_on_signals
from core.config import ConfigError, RunConfig
from core.results import RunResult, RunStatus

if TYPE_CHECKING:
    from core.history.recorder import HistoryRecorder
    from core.training.callbacks import RunCallback
    from core.training.flops import FlopsCounter

NOT_STARTED = "stopped before the run started; nothing was recorded"
DIAGNOSING = (
    "Diagnosing: why is it this fast? (the input pipeline timed alone, then short probe runs that are not saved; --no-verdict skips this)"
)


def cmd_run(args: argparse.Namespace) -> int:
    config = run_config(args)
    profile = parse_step_range(args.profile) if args.profile else None
    tensorboard = check_output_folder("--tensorboard", args.tensorboard) if args.tensorboard else None
    config = config.with_hooks(tensorboard, profile)
    with stop_on_signals() as stop_event:
        if config.strategy == "multi-worker":
            announce_cluster(config)
        configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False))
        from core.diagnosis.run_verdict import HoldRunEnd
        from core.hooks.profiler import run_callbacks_for
        from core.runner import run_training
        from core.training.engine import check_against_machine, total_steps
        from core.training.flops import FlopsCounter

        check_against_machine(config)
        callbacks = [*run_callbacks_for(config, tensorboard, profile), *_device_use(config)]
        if config.strategy == "multi-worker":
            callbacks.append(JoinProgress())
        if stop_event.is_set():
            print(NOT_STARTED, file=sys.stderr)
            return EXIT_RUN_FAILED
        history = CliHistory(args.no_save)
        recorder = history.recorder(config)
        history.begin(recorder)
        progress = ProgressPrinter(total_steps(config), config.batch_size)
        counter = FlopsCounter()
        # the history record is finished with the verdict, after the diagnosis
        listeners = [*callbacks, *([] if args.no_verdict else [counter]), *([HoldRunEnd(recorder)] if recorder is not None else [])]
        try:
            with stdout_to_stderr(), progress.ticking(stop_event):
                result = run_interruptibly(lambda: run_training(config, progress, stop_event, listeners))
        except ConfigError:
            if recorder is not None:
                recorder.discard()  # bad input found as the run started: not a run
            raise
        progress.finish()
        _report_hooks(callbacks)
        if not args.no_verdict:
            result = _with_verdict(config, result, counter, stop_event)
        if recorder is not None:
            recorder.finish(result)
    print(json.dumps(result.summary(), indent=2) if args.json else format_result(result))
    history.report(recorder)
    if result.status != RunStatus.COMPLETED:
        print(f"{result.status}: {result.message}", file=sys.stderr)
    return EXIT_OK if result.status == RunStatus.COMPLETED else EXIT_RUN_FAILED


def _device_use(config: RunConfig) -> list[RunCallback]:
    """The GPU-use sampler (NVML, ~10 Hz) where there is a GPU to sample; none elsewhere."""
    from core.hooks.device_use import device_use_hook_for

    hook = device_use_hook_for(config)
    return [hook] if hook is not None else []


def _report_hooks(callbacks: list[RunCallback]) -> None:
    """On stderr: a profile's top ops and how to open its trace; each GPU's memory as TensorFlow and the driver see it."""
    from core.hooks.device_use import DeviceUseHook
    from core.hooks.profiler import ProfilerCapture, profile_report
    from core.machine.gpu_sampler import memory_lines

    for callback in callbacks:
        if isinstance(callback, ProfilerCapture):
            print(profile_report(callback), file=sys.stderr)
        elif isinstance(callback, DeviceUseHook) and callback.active:
            for view in callback.memory_views():
                print("\n".join(memory_lines(view)), file=sys.stderr)


def _with_verdict(config: RunConfig, result: RunResult, counter: FlopsCounter, stop_event: threading.Event) -> RunResult:
    """A completed run with its verdict, the diagnosis said on stderr as it goes (a few seconds of short probe runs)."""
    if result.status != RunStatus.COMPLETED or stop_event.is_set():
        return result
    from core.diagnosis.run_verdict import diagnose_run

    def announce(what: str) -> None:
        print(f"diagnosing: {what}", file=sys.stderr, flush=True)

    print(DIAGNOSING, file=sys.stderr, flush=True)
    with stdout_to_stderr():
        diagnosed, _probes = run_interruptibly(lambda: diagnose_run(config, result, counter, stop_event, announce))
    if diagnosed.bound is not None:
        print(f"diagnosing: done, {diagnosed.bound}-bound" if diagnosed.bound != "unknown" else "diagnosing: done", file=sys.stderr)
    return diagnosed


def cmd_compare(args: argparse.Namespace) -> int:
    from core.compare.runner import progress_line, run_comparison
    from core.compare.table import format_table
    from core.compare.targets import parse_targets

    targets = parse_targets(args.targets)
    if not 0 <= args.baseline < len(targets):
        raise ConfigError("baseline", args.baseline, f"a row index from 0 to {len(targets) - 1}")
    base = job_config(args)
    history = CliHistory(args.no_save)
    recorders: dict[int, HistoryRecorder | None] = {}

    def announce(index: int, total: int, label: str) -> None:
        print(progress_line(index, total, label), file=sys.stderr)

    def recorder_for(index: int, config: RunConfig) -> HistoryRecorder | None:
        recorders[index] = history.recorder(config, targets[index].label)
        return recorders[index]

    with stop_on_signals() as stop_event:
        configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False))
        from core.diagnosis.ceilings import cached_peaks

        cached_peaks()  # each row's verdict and % of peak are judged against this machine's measured ceilings
        if stop_event.is_set():
            print(NOT_STARTED, file=sys.stderr)
            return EXIT_RUN_FAILED
        with stdout_to_stderr():
            comparison = run_interruptibly(
                lambda: run_comparison(
                    base,
                    targets,
                    args.baseline,
                    announce,
                    None,
                    stop_event,
                    on_result=lambda index, _result: history.report(recorders.get(index)),
                    recorders=recorder_for,
                )
            )
    for recorder in recorders.values():
        history.say_error(recorder)
    if args.json:
        print(json.dumps(comparison.to_rows_dict(), indent=2))
    else:
        print(format_table(comparison))
        for row in comparison.rows:
            if row.result.bound:
                print(f"verdict: {row.label}: {row.result.bound}. {row.result.advice}")
        for warning in comparison.warnings:
            print(f"warning: {warning}")
    return EXIT_OK if all(row.status == RunStatus.COMPLETED for row in comparison.rows) else EXIT_RUN_FAILED


def parse_step_range(text: str) -> tuple[int, int]:
    from core.hooks.profiler import PROFILE_FIELD, check_profile_steps

    first, _, last = text.partition("-")
    if not (first.strip().isdigit() and last.strip().isdigit()):
        raise ConfigError(PROFILE_FIELD, text, "a step range such as 10-20")
    check_profile_steps(int(first), int(last))
    return int(first), int(last)
