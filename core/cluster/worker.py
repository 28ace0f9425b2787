"""One worker process of a cluster run: `python main.py worker ARGS...`.

Sets TF_CONFIG from --cluster and --task-index before TensorFlow starts, then
runs the engine under MultiWorkerMirroredStrategy; a run on a model file first
checks that this host's file is the content the run was set up with (its
sha256), before TensorFlow starts. With --supervised (the app
started this process, `core.child_process.Child`) its events go to the
supervisor as messages of `core.job_messages` (`send`), and stdin is the control
pipe (`listen_to_parent`): a stop line, or its end (the app went away), stops
the run, and an orphan exits after ORPHAN_EXIT_S; on Linux the kernel kills it
with the app at once (`end_with_parent`), even while TensorFlow holds the GIL.
In interleaved rounds the chief takes its turns from the app (`core.training.parent_turns`).

A worker a person started (no --supervised) trains in such a supervised child
of its own (`attend`): TensorFlow's cluster set-up holds the GIL for as long as
the other workers take to join, and its coordination service takes SIGTERM
for itself, so a process that trains could neither hear Ctrl-C, SIGTERM or
SIGHUP nor stop. This one never loads TensorFlow: the first signal stops the
worker after the call in flight (ended after STOP_GRACE_S if it cannot stop
then, as while it waits for the cluster), a second ends it at once, as `run`
does (`core.cli.signals`). When every address of the cluster is loopback the
child runs in the private network the cluster's workers share
(`core.cluster.isolation`), refused where that cannot be made unless
--allow-network-workers.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

from core.child_process import Child, ChildEnd, end_with_parent, listen_to_parent
from core.cluster.isolation import CLUSTER_ISOLATED_NOTE, exposed_note, loopback_cluster, open_cluster_network
from core.cluster.topology import GRPC_WARNING, tf_config
from core.config import ConfigError, RunConfig, normalize_address
from core.job_messages import CallBegun, Failed, JobMessage, Result, Started, Steps, decode, send
from core.results import RunResult, RunStatus, StepRecord
from core.training.hooks import RunContext, RunHook
from core.training.parent_turns import TAKES_TURNS, ParentTurns, takes_turns
from core.workloads.model_file import ModelFileError

ORPHAN_EXIT_S = 10.0
STOP_GRACE_S = 5.0
"""How long a worker a person started has to stop after the first signal before it is ended (as the app's supervisor does)."""
POLL_S = 0.1
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
EXIT_OK, EXIT_NOT_COMPLETED, EXIT_BAD_INPUT = 0, 1, 2


def main(args: list[str]) -> int:
    """Run one worker. Supervised: 0 when it completed or was stopped, 1 when it failed. Started by a person:
    0 when it completed, 1 when it failed, was stopped or ended by a signal. 2 for bad arguments, or a loopback
    cluster that cannot be kept private here without --allow-network-workers."""
    try:
        options = _parser().parse_args(args)
    except SystemExit as exc:  # argparse has printed the usage or --help
        return exc.code if isinstance(exc.code, int) else 2
    try:
        cluster, config = _check(options)
    except (ConfigError, ValueError) as exc:
        print(f"worker: {exc}", file=sys.stderr)
        return 2
    if not options.supervised:
        return attend(cluster, options.task_index, options.config_json, options.allow_network_workers)
    os.environ["TF_CONFIG"] = tf_config(cluster, options.task_index)
    stop = threading.Event()
    hooks: list[RunHook] = []
    reporter = EventReporter(options.task_index == 0, stop)
    end_with_parent()  # killed by the kernel with the app, even while TensorFlow's cluster set-up holds the GIL
    listen_to_parent(stop, ORPHAN_EXIT_S)
    if options.task_index == 0 and takes_turns():  # the chief's calls wait for their turns; the others wait for the chief's
        hooks.append(ParentTurns(send, stop))
    return _train(config, stop, reporter, hooks)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="main.py worker", description="Run one worker of a multi-worker training run. " + GRPC_WARNING)
    parser.add_argument("--cluster", required=True, help="host:port of every worker, comma-separated, task 0 (the chief) first")
    parser.add_argument("--task-index", required=True, type=int, help="this worker's position in --cluster (0 is the chief)")
    parser.add_argument("--config-json", required=True, help="the run's RunConfig as JSON (the same for every worker)")
    parser.add_argument("--supervised", action="store_true", help="started by the app: JSON events on stdout, control on stdin")
    parser.add_argument(
        "--allow-network-workers",
        action="store_true",
        help="for a cluster whose every address is loopback: run even where its private network cannot be made here "
        "(the worker's server then listens on every network interface)",
    )
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


def attend(cluster: Sequence[str], index: int, config_json: str, allow_network_workers: bool = False) -> int:
    """A worker a person started: train in a supervised child, say its progress and outcome, stop it on a signal.

    The first Ctrl-C, SIGTERM or SIGHUP asks the child to stop after the call in flight and ends it after
    STOP_GRACE_S; a second ends it at once. Returns the exit code (`main`).
    """
    network, exposed_because = None, ""
    if loopback_cluster(cluster):
        try:
            network, exposed_because = open_cluster_network(cluster, allow_network_workers)
        except ConfigError as exc:
            print(f"worker: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if network is not None:
        note = CLUSTER_ISOLATED_NOTE
    else:
        note = " ".join(filter(None, (exposed_because and exposed_note(exposed_because), GRPC_WARNING)))
    console = ConsoleReporter(index, cluster, note)
    argv = [sys.executable, "-m", "core.cluster.worker", "--cluster", ",".join(cluster), "--task-index", str(index)]
    argv += ["--config-json", config_json, "--supervised"]
    events: queue.Queue[dict[str, Any] | ChildEnd] = queue.Queue()  # the child's messages, then how it ended
    try:
        with _StopSignals(f"worker {index}") as signals:
            worker = Child(
                network.wrap(argv) if network is not None else argv,
                f"Worker {index}",
                env={"TF_CONFIG": None, TAKES_TURNS: None},
                pass_fds=network.pass_fds if network is not None else (),
                on_message=events.put,
                on_end=events.put,
            )
            return _follow(worker, events, signals, console)
    finally:
        if network is not None:
            network.close()


def _follow(worker: Child, events: queue.Queue[dict[str, Any] | ChildEnd], signals: _StopSignals, console: ConsoleReporter) -> int:
    """Relay the child's messages to `console` until it has ended, stopping or ending it on a signal; the exit code."""
    result: RunResult | None = None
    error = ""
    end: ChildEnd | None = None
    asked = ended_at_once = False
    while end is None:
        try:
            event: dict[str, Any] | ChildEnd | None = events.get(timeout=POLL_S)
        except queue.Empty:
            event = None
        if isinstance(event, ChildEnd):
            end = event
        elif event is not None:
            message = decode(event)
            if isinstance(message, Started):
                console.cluster_formed(message.replicas, message.total_steps)
            elif isinstance(message, Result):
                result = message.result
            elif isinstance(message, Failed):
                error = message.message
        if signals.count >= 2 and not ended_at_once:
            ended_at_once = True
            worker.kill()
        elif signals.count == 1 and not asked:
            asked = True
            worker.stop(STOP_GRACE_S)
    if ended_at_once:
        console.say(f"Worker {console.index} was ended at once.")
        return EXIT_NOT_COMPLETED
    if error:
        console.report_error(error)
        return EXIT_NOT_COMPLETED
    if result is not None:
        console.report_result(result)
        return EXIT_OK if result.status == RunStatus.COMPLETED else EXIT_NOT_COMPLETED
    if asked:
        console.say(f"Worker {console.index} stopped before the cluster formed (it was ended after {STOP_GRACE_S:g} s).")
    else:
        console.say(worker.describe_end() + ".")  # it died without a word: how, and its last output
    return EXIT_NOT_COMPLETED


class _StopSignals:
    """Context manager: counts Ctrl-C, SIGTERM and SIGHUP (main thread only), saying what each does, as `run` does."""

    def __init__(self, what: str):
        self.what = what
        self.count = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        self.count += 1
        if self.count == 1:
            _say(f"{name}: stopping {self.what} after the current step call ({name} again to stop at once)")
        elif self.count == 2:
            _say(f"{name} again: stopping {self.what} now")

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed (a logged-out terminal): stopping matters more than saying so
        pass


def _train(config: RunConfig, stop: threading.Event, reporter: EventReporter, hooks: Sequence[RunHook] = ()) -> int:
    from core.hooks.conditions import ConditionsHook
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
        # the conditions the worker trained in travel with the chief's result (its run has no job service to add them)
        result = train_in_this_process(config, stop, [ConditionsHook(), reporter, *hooks])
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a config this machine cannot run (ConfigError from the engine)
        reporter.report_error(str(exc))
        return 1
    reporter.report_result(result)
    return 1 if result.status == RunStatus.FAILED else 0


class EventReporter(RunHook):
    """Sends the run's messages to the supervisor: all of them on the chief; elsewhere the start (its size only) and the outcome."""

    def __init__(self, chief: bool, stop: threading.Event):
        self._chief = chief
        self._stop = stop

    def on_run_start(self, context: RunContext) -> None:
        if not self._chief:
            self._send(Started(context.total_steps, context.replicas))
            return
        from core.training.engine import environment

        devices = context.device_names
        self._send(Started(context.total_steps, context.replicas, devices, environment(devices, context.config.precision)))

    def on_call_begin(self, first_step: int, steps: int) -> None:
        if self._chief:
            self._send(CallBegun(first_step, steps))

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        if self._chief:
            self._send(Steps(tuple(records)))

    def report_result(self, result: RunResult) -> None:
        self._send(Result(result))

    def report_error(self, message: str) -> None:
        self._send(Failed(message))

    def _send(self, message: JobMessage) -> None:
        try:
            send(message)
        except OSError:  # the supervisor is gone: nobody wants the rest of this run
            self._stop.set()


class ConsoleReporter:
    """Progress in words, on stderr, for a worker a person started (on another host, or this one for a loopback cluster)."""

    def __init__(self, index: int, cluster: Sequence[str], note: str = GRPC_WARNING):
        self.index = index
        self.say(
            f"Worker {index} of {len(cluster)} ({cluster[index]}): waiting for the other workers of {','.join(cluster)}. {note}".rstrip()
        )

    def cluster_formed(self, replicas: int, total_steps: int) -> None:
        self.say(f"Worker {self.index}: cluster formed, {replicas} replicas, {total_steps} steps.")

    def report_result(self, result: RunResult) -> None:
        self.say(f"Worker {self.index} {result.status} after {result.steps_done} steps. {result.message}".rstrip())

    def report_error(self, message: str) -> None:
        self.say(f"Worker {self.index} failed: {message}")

    @staticmethod
    def say(text: str) -> None:
        _say(text)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
