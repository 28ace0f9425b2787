"""One worker process of a cluster run: `python main.py worker ARGS...`.

Sets TF_CONFIG from --cluster and --task-index before TensorFlow starts, then
runs the engine under MultiWorkerMirroredStrategy; a run on a model file first
checks that this host's file is the content the run was set up with (its
sha256), before TensorFlow starts. With --supervised (the app
started this process, `core.child_process.Child`) its events go to the
supervisor as messages of the one protocol (`send`), and stdin is the control
pipe (`listen_to_parent`): a stop line, or its end (the app went away), stops
the run, and an orphan exits after ORPHAN_EXIT_S; on Linux the kernel kills it
with the app at once (`end_with_parent`), even while TensorFlow holds the GIL.
In interleaved rounds the chief takes its turns from the app (`core.training.parent_turns`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from core.child_process import end_with_parent, listen_to_parent, send
from core.cluster.protocol import CALL, ERROR, RESULT, START, STEPS, encode_records
from core.cluster.topology import GRPC_WARNING, tf_config
from core.config import ConfigError, RunConfig, normalize_address
from core.results import RunResult, RunStatus, StepRecord
from core.training.callbacks import RunCallback, RunContext
from core.training.parent_turns import ParentTurns, takes_turns
from core.workloads.model_file import ModelFileError

ORPHAN_EXIT_S = 10.0


def main(args: list[str]) -> int:
    """Run one worker; 0 when it completed or was stopped, 1 when it failed, 2 for bad arguments."""
    try:
        options = _parser().parse_args(args)
    except SystemExit as exc:  # argparse has printed the usage or --help
        return exc.code if isinstance(exc.code, int) else 2
    try:
        cluster, config = _check(options)
    except (ConfigError, ValueError) as exc:
        print(f"worker: {exc}", file=sys.stderr)
        return 2
    os.environ["TF_CONFIG"] = tf_config(cluster, options.task_index)
    stop = threading.Event()
    hooks: list[RunCallback] = []
    if options.supervised:
        reporter: EventReporter | ConsoleReporter = EventReporter(options.task_index == 0, stop)
        end_with_parent()  # killed by the kernel with the app, even while TensorFlow's cluster set-up holds the GIL
        listen_to_parent(stop, ORPHAN_EXIT_S)
        if options.task_index == 0 and takes_turns():  # the chief's calls wait for their turns; the others wait for the chief's
            hooks.append(ParentTurns(send, stop))
    else:
        reporter = ConsoleReporter(options.task_index, cluster)
    return _train(config, stop, reporter, hooks)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="main.py worker", description="Run one worker of a multi-worker training run. " + GRPC_WARNING)
    parser.add_argument("--cluster", required=True, help="host:port of every worker, comma-separated, task 0 (the chief) first")
    parser.add_argument("--task-index", required=True, type=int, help="this worker's position in --cluster (0 is the chief)")
    parser.add_argument("--config-json", required=True, help="the run's RunConfig as JSON (the same for every worker)")
    parser.add_argument("--supervised", action="store_true", help="started by the app: JSON events on stdout, control on stdin")
    return parser


def _check(options: argparse.Namespace) -> tuple[list[str], RunConfig]:
    cluster = [normalize_address(address) for address in options.cluster.split(",")]
    if len(set(cluster)) != len(cluster):
        raise ConfigError("cluster", options.cluster, "each host:port once")
    if not 0 <= options.task_index < len(cluster):
        raise ConfigError("task_index", options.task_index, f"a whole number from 0 to {len(cluster) - 1}")
    data = json.loads(options.config_json)
    if not isinstance(data, dict):
        raise ConfigError("config_json", options.config_json, "a JSON object of run settings")
    config = RunConfig.from_dict(data)
    if config.strategy != "multi-worker":
        raise ConfigError("strategy", config.strategy, "'multi-worker' for a cluster worker")
    return cluster, config


def _train(config: RunConfig, stop: threading.Event, reporter: EventReporter | ConsoleReporter, hooks: Sequence[RunCallback] = ()) -> int:
    from core.machine.runtime import RuntimeSettings, configure_runtime
    from core.training.engine import train_in_this_process
    from core.workloads.workload import check_model_file

    try:
        # a missing or different model file: said before TensorFlow starts and the cluster forms
        check_model_file(config.model_ref)
    except ModelFileError as exc:
        reporter.report_error(str(exc))
        return 1
    configure_runtime(RuntimeSettings())  # memory growth: local workers may share a GPU
    try:
        result = train_in_this_process(config, None, stop, [reporter, *hooks])
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a config this machine cannot run (ConfigError from the engine)
        reporter.report_error(str(exc))
        return 1
    reporter.report_result(result)
    return 1 if result.status == RunStatus.FAILED else 0


class EventReporter(RunCallback):
    """Writes the run's events as JSON lines: all of them on the chief, only the outcome elsewhere."""

    def __init__(self, chief: bool, stop: threading.Event):
        self._chief = chief
        self._stop = stop

    def on_run_start(self, context: RunContext) -> None:
        if self._chief:
            from core.training.engine import environment

            devices = list(context.device_names)
            self._send(
                {
                    "event": START,
                    "replicas": context.replicas,
                    "total_steps": context.total_steps,
                    "devices": devices,
                    "environment": environment(devices, context.config.precision),
                }
            )

    def on_call_begin(self, first_step: int, steps: int) -> None:
        if self._chief:
            self._send({"event": CALL, "first_step": first_step, "steps": steps})

    def on_steps(self, records: Sequence[StepRecord]) -> None:
        if self._chief:
            self._send({"event": STEPS, "records": encode_records(records)})

    def report_result(self, result: RunResult) -> None:
        self._send({"event": RESULT, "result": result.to_dict()})

    def report_error(self, message: str) -> None:
        self._send({"event": ERROR, "message": message})

    def _send(self, event: dict[str, Any]) -> None:
        try:
            send(event)
        except OSError:  # the supervisor is gone: nobody wants the rest of this run
            self._stop.set()


class ConsoleReporter(RunCallback):
    """Progress in words for a worker a person started on another host."""

    def __init__(self, index: int, cluster: Sequence[str]):
        self._index = index
        print(
            f"Worker {index} of {len(cluster)} ({cluster[index]}): waiting for the other workers of {','.join(cluster)}. " + GRPC_WARNING,
            file=sys.stderr,
        )

    def on_run_start(self, context: RunContext) -> None:
        print(f"Worker {self._index}: cluster formed, {context.replicas} replicas, {context.total_steps} steps.", file=sys.stderr)

    def report_result(self, result: RunResult) -> None:
        print(f"Worker {self._index} {result.status} after {result.steps_done} steps. {result.message}".rstrip(), file=sys.stderr)

    def report_error(self, message: str) -> None:
        print(f"Worker {self._index} failed: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
