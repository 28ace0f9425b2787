"""What `run` checks and says before TensorFlow loads: its config, output folders, the cluster's warnings and join progress."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from core.cli.job_options import job_config
from core.cluster.topology import ClusterCallback, WorkerInfo
from core.config import ConfigError, RunConfig
from core.training.callbacks import RunContext


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
    """Before a multi-worker run: refuse workers that cannot be isolated (unless allowed), and say what to know."""
    from core.cluster.isolation import check_worker_isolation, isolation_problem
    from core.cluster.topology import GRPC_WARNING, oversubscription_warning, worker_commands

    if config.cluster_hosts:
        _warn(GRPC_WARNING)
        if config.model_sha256:
            _warn(
                f"every host needs the model file {config.model} with the same content (sha256 {config.model_sha256[:12]}…); "
                "a worker whose file differs refuses to train."
            )
        commands = worker_commands(config)
        if commands:
            print("Start one worker on each other host:", file=sys.stderr)
            for command in commands:
                print(f"  {command}", file=sys.stderr)
    else:
        check_worker_isolation(config)
        problem = isolation_problem() if config.allow_network_workers else ""
        if problem:
            _warn(
                f"the local workers cannot be isolated here ({problem}): their servers will listen on every network interface. {GRPC_WARNING}"
            )
    crowding = oversubscription_warning(config)
    if crowding:
        _warn(crowding)


class JoinProgress(ClusterCallback):
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
