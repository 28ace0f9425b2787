"""`run` and `compare`: train in this process (or its workers) with progress on stderr.

Each run is recorded in the history when it starts, its steps appended about once
a second while it trains, and finished with its result, so a crash or `kill -9`
loses at most the last second (`core.jobs.run_job` does it all). A completed
`run` is diagnosed as it ends (its verdict: what bounds its speed, the evidence,
the advice; `--no-verdict` skips it) and its history record finished with the verdict. The result is printed whether or not the history
could take it. While training, stdout is sent to stderr so that it holds only
the result (`--json` stays one JSON document). Before TensorFlow loads, `run`
checks its config and output folders and says the cluster's warnings
(`run_config`, `check_output_folder`, `announce_cluster`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from core.cli.exits import EXIT_OK, EXIT_RUN_FAILED
from core.cli.job_options import CliHistory, configure_tensorflow, job_config
from core.cli.output import ProgressPrinter, format_result, stdout_to_stderr
from core.cli.signals import run_interruptibly, stop_on_signals
from core.cluster.topology import ClusterHook, WorkerInfo
from core.config import ConfigError, RunConfig, parse_step_range
from core.jobs import JobListener, RecordedRun, RunHooks, run_label
from core.results import RunStatus, StepRecord
from core.training.hooks import RunContext
from core.training.to_target import reach, to_target_text

NOT_STARTED = "stopped before the run started; nothing was recorded"
DIAGNOSING = (
    "Diagnosing: why is it this fast? (the input pipeline timed alone, then short probe runs that are not saved; --no-verdict skips this)"
)


def cmd_run(args: argparse.Namespace) -> int:
    config = run_config(args)
    profile = parse_step_range(args.profile) if args.profile else None
    if profile is not None and config.epochs is None:  # past the run's steps: refused before TensorFlow starts
        from core.hooks.profiler import check_profile_steps

        check_profile_steps(*profile, total_steps=config.steps)
    tensorboard = check_output_folder("--tensorboard", args.tensorboard) if args.tensorboard else None
    config = config.with_hooks(tensorboard, profile)
    with stop_on_signals() as stop_event:
        if config.strategy == "multi-worker":
            announce_cluster(config)
        configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False), [config])
        from core.hooks.profiler import check_profile
        from core.jobs import run_job
        from core.training.engine import check_against_machine, total_steps

        check_against_machine(config)
        check_profile(config)  # said before the history is opened; the run's hooks come from config.hooks (core.jobs.run_hooks)
        if stop_event.is_set():
            print(NOT_STARTED, file=sys.stderr)
            return EXIT_RUN_FAILED
        history = CliHistory(args.no_save)
        history.say_error(history.error)
        printer = ProgressPrinter(total_steps(config), config.batch_size)
        progress = RunProgress(printer)
        joining = (JoinProgress(),) if config.strategy == "multi-worker" else ()
        options = history.options(
            label=run_label(config), diagnose=not args.no_verdict, hooks=joining, listener=progress, raise_config_error=True
        )
        with stdout_to_stderr(), printer.ticking(stop_event):
            recorded = run_interruptibly(lambda: run_job(config, history.store, options, stop_event))
        progress.finish()
    result = recorded.result
    if result.bound is not None:
        print(f"diagnosing: done, {result.bound}-bound" if result.bound != "unknown" else "diagnosing: done", file=sys.stderr)
    reached = reach(result, args.target_loss) if args.target_loss is not None else None
    if args.json:
        print(json.dumps({**result.summary(), **(reached.to_dict() if reached else {})}, indent=2))
    else:
        print(format_result(result) + (f"\ntime to loss {args.target_loss:g}: {to_target_text(reached)}" if reached else ""))
    history.report(recorded)
    if result.status != RunStatus.COMPLETED:
        print(f"{result.status}: {result.message}", file=sys.stderr)
    return EXIT_OK if result.status == RunStatus.COMPLETED else EXIT_RUN_FAILED


class RunProgress(JobListener):
    """`run`'s progress on stderr: the step line, then what the run's hooks found, then each step of the diagnosis."""

    def __init__(self, printer: ProgressPrinter):
        self._printer = printer
        self._hooks: RunHooks | None = None
        self._ended = False

    def on_run_hooks(self, hooks: RunHooks) -> None:
        self._hooks = hooks

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        self._printer(records)

    def on_diagnosing(self, what: str) -> None:
        if not what:
            self.finish()
            print(DIAGNOSING, file=sys.stderr, flush=True)
        else:
            print(f"diagnosing: {what}", file=sys.stderr, flush=True)

    def finish(self) -> None:
        """End the step line and report the hooks (once: before the diagnosis, or after a run without one)."""
        if not self._ended:
            self._ended = True
            self._printer.finish()
            if self._hooks is not None:
                _report_hooks(self._hooks)


def _report_hooks(hooks: RunHooks) -> None:
    """On stderr: a profile's top ops and how to open its trace; each GPU's memory as the run's framework and the driver see it."""
    from core.hooks.profiler import profile_report
    from core.machine.gpu_sampler import memory_lines

    if hooks.profiler is not None:
        print(profile_report(hooks.profiler), file=sys.stderr)
    if hooks.device_use is not None and hooks.device_use.active:
        for view in hooks.device_use.memory_views():
            print("\n".join(memory_lines(view)), file=sys.stderr)


class CompareProgress(JobListener):
    """`compare`'s progress on stderr: 'run 2 of 3: GPU:0', and where each run is saved."""

    def __init__(self, history: CliHistory):
        self._history = history
        self._round = -1

    def on_job_start(self, index: int, total: int, label: str) -> None:
        from core.compare.runner import progress_line

        print(progress_line(index, total, label), file=sys.stderr)

    def on_turn(self, index: int, round_index: int, rounds: int) -> None:
        if round_index > self._round:
            self._round = round_index
            print(f"round {round_index + 1} of {rounds}", file=sys.stderr)

    def on_job_end(self, index: int, recorded: RecordedRun) -> None:
        self._history.report(recorded)


def cmd_compare(args: argparse.Namespace) -> int:
    from core.compare.runner import run_comparison
    from core.compare.table import format_table
    from core.compare.targets import parse_targets

    targets = parse_targets(args.targets)
    if not 0 <= args.baseline < len(targets):
        raise ConfigError("baseline", args.baseline, f"a row index from 0 to {len(targets) - 1}")
    base = job_config(args)
    with stop_on_signals() as stop_event:
        configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False), [target.config_for(base) for target in targets])
        from core.diagnosis.ceilings import cached_peaks

        cached_peaks()  # each row's verdict and % of peak are judged against this machine's measured ceilings
        if stop_event.is_set():
            print(NOT_STARTED, file=sys.stderr)
            return EXIT_RUN_FAILED
        history = CliHistory(args.no_save)
        options = history.options(listener=CompareProgress(history))
        with stdout_to_stderr():
            comparison = run_interruptibly(
                lambda: run_comparison(base, targets, args.baseline, history.store, options, stop_event, args.rounds)
            )
    comparison = replace(comparison, target_loss=args.target_loss)
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


def run_config(args: argparse.Namespace) -> RunConfig:
    """The RunConfig of `run`'s options; ConfigError for options that do not go together."""
    if args.tpu and args.strategy != "tpu":
        raise ConfigError("--tpu", args.tpu, "only with --strategy tpu: add --strategy tpu to train on that TPU")
    devices = tuple(d for d in args.devices.split(",") if d.strip())
    hosts = tuple(h for h in args.cluster.split(",") if h.strip())
    return job_config(
        args,
        strategy=args.strategy,
        devices=devices,
        workers=len(hosts) if hosts else args.workers,
        cluster_hosts=hosts,
        tpu_address=args.tpu,
    )


def check_output_folder(option: str, folder: str) -> Path:
    """Create `folder` if needed and prove a file can be written there; ConfigError naming `option` otherwise.

    Done before TensorFlow loads, so a bad folder costs a second, not a run.
    """
    path = Path(folder).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(option, folder, f"a folder that can be created and written ({path}: {reason})") from exc
    return path


def announce_cluster(config: RunConfig) -> None:
    """Before a multi-worker run: refuse workers that cannot be isolated (unless allowed), and say what to know.

    Local workers, and a cluster whose every address is loopback, run in a private network
    (`core.cluster.isolation.private_workers`); any other cluster is told that its servers are reachable.
    """
    from core.cluster.isolation import check_worker_isolation, isolation_problem, private_workers
    from core.cluster.topology import GRPC_WARNING, oversubscription_warning, worker_commands

    check_worker_isolation(config)
    private = private_workers(config)
    problem = isolation_problem() if private and config.allow_network_workers else ""
    if problem:
        _warn(
            f"the {'local ' if not config.cluster_hosts else ''}workers cannot be isolated here ({problem}): "
            f"their servers will listen on every network interface. {GRPC_WARNING}"
        )
    elif not private:
        _warn(GRPC_WARNING)
    if config.cluster_hosts:
        if config.model_sha256:
            _warn(
                f"every host needs the model file {config.model} with the same content (sha256 {config.model_sha256[:12]}…); "
                "a worker whose file differs refuses to train."
            )
        commands = worker_commands(config)
        if commands:
            where = "on this machine for each other address" if private else "on each other host"
            print(f"Start one worker {where}:", file=sys.stderr)
            for command in commands:
                print(f"  {command}", file=sys.stderr)
    crowding = oversubscription_warning(config)
    if crowding:
        _warn(crowding)


class JoinProgress(ClusterHook):
    """Prints, on stderr, the workers starting and how long they have been joining, until the run starts."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self._waiting = False
        self._workers = 0

    def on_workers_started(self, workers: Sequence[WorkerInfo]) -> None:
        self._workers = len(workers)
        pids = ", ".join(str(w.pid) for w in workers if w.pid is not None)
        self._write(f"started {len(workers)} worker process(es) (pid {pids})\n")

    def on_cluster_waiting(self, elapsed_s: float, timeout_s: float) -> None:
        self._waiting = True
        who = f"the {self._workers} workers" if self._workers > 1 else "the workers"
        self._write(f"\rwaiting for {who} to join the cluster: {elapsed_s:.0f} s (at most {timeout_s:.0f} s)   ")

    def on_run_start(self, context: RunContext) -> None:
        self._end_line()

    def on_workers_ended(self, workers: Sequence[WorkerInfo]) -> None:
        self._end_line()

    def _end_line(self) -> None:
        if self._waiting:
            self._waiting = False
            self._write("\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr)
