"""The app's side of a cluster run: start the worker processes, relay the chief, end them all.

MultiWorkerMirrored collectives can wait forever for a peer that died, so the
supervisor never trusts the workers to end by themselves: it watches every
exit code and, once the outcome is known (done, stopped, failed, timed out),
kills whatever is left. Each worker runs in its own process group (session),
so a kill takes anything it started with it. Local workers share a private
network namespace (`core.cluster.isolation`) where the system allows one.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from core.child_process import Child, ChildEnd
from core.cluster.isolation import ISOLATED_NOTE, PrivateNetwork, exposed_note, open_worker_network, private_workers
from core.cluster.topology import (
    GRPC_WARNING,
    LOCALHOST,
    ClusterHook,
    WorkerInfo,
    local_gpu_shares,
    local_worker_argv,
    oversubscription_warning,
    worker_commands,
)
from core.config import RunConfig
from core.formatting import utc_now
from core.job_messages import CallBegun, Failed, Go, Result, Started, Steps, Turn, decode, tell
from core.ports import free_ports
from core.results import RunResult, RunStatus, StepRecord
from core.training.hooks import RunContext, RunHook, amended_result, end_run, granted_turn
from core.training.metrics import summarize
from core.training.parent_turns import TAKES_TURNS
from core.workloads.model_file import ModelFileError, check_model_path
from core.workloads.workload import is_model_file

STOP_GRACE_S = 5.0
FINISH_GRACE_S = 15.0
POLL_S = 0.1
MESSAGE_TAIL_LINES = 6


def run_local_cluster(
    config: RunConfig,
    stop_event: threading.Event | None = None,
    hooks: Sequence[RunHook] = (),
) -> RunResult:
    """Run `config` on a cluster of worker processes and return the chief's result.

    Local workers on free 127.0.0.1 ports, each with its share of the GPUs,
    in a private network of their own (`core.cluster.isolation`), or only the
    chief when `config.cluster_hosts` names the cluster (in the private network
    its workers share when every address is loopback). Raises ConfigError,
    before any worker starts, when such workers cannot be isolated here and
    `config.allow_network_workers` is False. Blocks
    the calling thread; `stop_event` ends every worker; a worker that dies
    fails the run. Hooks get the chief's events; `RunContext.model` is None
    (the model lives in the chief's process).
    """
    if config.cluster_hosts:
        cluster, local = list(config.cluster_hosts), [0]
    else:
        cluster = [f"{LOCALHOST}:{port}" for port in free_ports(config.workers)]
        local = list(range(config.workers))
    network, exposed_because = open_worker_network(config) if private_workers(config) else (None, "")
    supervisor = Supervisor(config, cluster, local, stop_event or threading.Event(), hooks, network, exposed_because)
    try:
        return supervisor.run()
    finally:
        if network is not None:
            network.close()


class _Worker:
    """A worker as the supervisor sees it: its process (None when on another host) and its outcome."""

    def __init__(self, index: int, address: str):
        self.index = index
        self.address = address
        self.process: Child | None = None
        self.result: RunResult | None = None
        self.error = ""
        self.ended = False

    @property
    def status(self) -> str | None:
        return self.result.status if self.result is not None else None

    def info(self) -> WorkerInfo:
        process = self.process
        return WorkerInfo(self.index, self.address, process.pid if process else None, process.returncode if process else None)


class Supervisor:
    """Runs one cluster run; `run()` blocks until every local worker process has ended."""

    def __init__(
        self,
        config: RunConfig,
        cluster: Sequence[str],
        local: Sequence[int],
        stop_event: threading.Event,
        hooks: Sequence[RunHook],
        network: PrivateNetwork | None = None,
        exposed_because: str = "",
    ):
        self._config = config
        self._network = network
        self._exposed_because = exposed_because
        self._crowding = oversubscription_warning(config)
        self._cluster = list(cluster)
        self._workers = [_Worker(i, address) for i, address in enumerate(cluster)]
        self._local = [self._workers[i] for i in local]
        self._stop_event = stop_event
        self._hooks = list(hooks)
        self._events: queue.Queue[tuple[int, dict[str, Any] | ChildEnd]] = queue.Queue()  # a worker's messages, then how it ended
        self._start_event: Started | None = None
        self._records: list[StepRecord] = []
        self._failure = ""
        self._stop_sent = False
        self._ending = False

    def run(self) -> RunResult:
        started_at = utc_now()
        start = time.monotonic()
        try:
            try:
                self._config = with_model_hash(self._config)
                self._launch()
                self._watch(start)
            finally:
                self._end_all()
            self._drain()
        except ModelFileError as exc:  # the model file is gone or unusable: no worker was started
            self._failure = str(exc)
        except Exception as exc:  # a hook that raised, or a process that could not start
            self._failure = self._failure or f"{type(exc).__name__}: {exc}"
        result = amended_result(self._result(started_at, time.monotonic() - start), self._hooks)
        workers = [w.info() for w in self._local]
        for cluster_hook in self._cluster_hooks():
            cluster_hook.on_workers_ended(workers)
        end_run(self._hooks, result)
        return result

    def _launch(self) -> None:
        shares = local_gpu_shares(_visible_gpu_ids(), len(self._local)) if len(self._local) > 1 else [None]
        turns = any(hook.takes_turns for hook in self._hooks)
        for worker, gpus in zip(self._local, shares, strict=True):
            argv = local_worker_argv(self._config, self._cluster, worker.index)
            env: dict[str, str | None] = {"TF_CONFIG": None} if gpus is None else {"TF_CONFIG": None, "CUDA_VISIBLE_DEVICES": gpus}
            if turns and worker.index == 0:
                env[TAKES_TURNS] = "1"
            worker.process = Child(
                self._network.wrap(argv) if self._network else argv,
                f"Worker {worker.index} ({'the chief, ' if worker.index == 0 else ''}{worker.address})",
                env=env,
                pass_fds=self._network.pass_fds if self._network else (),
                on_message=partial(self._post, worker.index),
                on_end=partial(self._post, worker.index),
            )
        workers = [w.info() for w in self._local]
        for hook in self._cluster_hooks():
            hook.on_workers_started(workers)

    def _post(self, index: int, event: dict[str, Any] | ChildEnd) -> None:
        self._events.put((index, event))

    def _watch(self, start: float) -> None:
        """Relay events until every local worker has ended or the outcome needs no more waiting."""
        join_deadline = start + self._config.cluster_timeout_s
        next_wait_report = start
        end_deadline: float | None = None
        while not self._failure and not all(w.ended for w in self._local):
            try:
                index, event = self._events.get(timeout=POLL_S)
            except queue.Empty:
                pass
            else:
                self._handle(self._workers[index], event)
            now = time.monotonic()
            if self._stop_event.is_set() and not self._stop_sent:
                self._send_stop()
                end_deadline = now + STOP_GRACE_S if end_deadline is None else min(end_deadline, now + STOP_GRACE_S)
            if end_deadline is None and self._workers[0].ended:
                end_deadline = now + (FINISH_GRACE_S if self._workers[0].status == RunStatus.COMPLETED else STOP_GRACE_S)
            if self._start_event is None and not self._failure and not self._workers[0].ended:
                if now >= join_deadline and not self._stop_sent:
                    self._failure = self._join_timeout_message()
                elif now >= next_wait_report:
                    next_wait_report = now + 1.0
                    for hook in self._cluster_hooks():
                        hook.on_cluster_waiting(now - start, float(self._config.cluster_timeout_s))
            if end_deadline is not None and now >= end_deadline:
                return

    def _drain(self) -> None:
        """Handle what the workers wrote before they ended (all readers have finished)."""
        while True:
            try:
                index, event = self._events.get_nowait()
            except queue.Empty:
                return
            self._handle(self._workers[index], event)

    def _handle(self, worker: _Worker, event: dict[str, Any] | ChildEnd) -> None:
        if isinstance(event, ChildEnd):  # its process has ended and its output is read
            worker.ended = True
            self._check_ended(worker)
            return
        message = decode(event)
        if isinstance(message, Result):
            worker.result = message.result
        elif isinstance(message, Failed):
            worker.error = message.message
        elif worker.index != 0:
            return
        elif isinstance(message, Started):
            self._start_event = message
            context = RunContext(self._config, message.total_steps, message.replicas, message.devices, None)
            for hook in self._hooks:
                hook.on_run_start(context)
        elif isinstance(message, Turn) and worker.process is not None:
            tell(worker.process, Go(**granted_turn(self._hooks, message.next_step)))
        elif isinstance(message, CallBegun):
            for hook in self._hooks:
                hook.on_call_begin(message.first_step, message.steps)
        elif isinstance(message, Steps):
            records = list(message.records)
            self._records.extend(records)
            for hook in self._hooks:
                hook.on_step_records(records)

    def _check_ended(self, worker: _Worker) -> None:
        """A worker that ends without a good outcome fails the run, unless the outcome is already known."""
        if self._failure or self._stop_sent or self._ending or worker.status == RunStatus.COMPLETED:
            return
        chief = self._workers[0]
        if worker is chief:
            if chief.result is None:
                self._failure = self._describe(chief)
        elif chief.result is None or (chief.status == RunStatus.FAILED and worker.result is None):
            self._failure = self._describe(worker)

    def _describe(self, worker: _Worker) -> str:
        """What went wrong with a local worker that ended: its own error, or how it died, and its last words."""
        process = worker.process
        assert process is not None
        if worker.error or worker.status == RunStatus.FAILED:
            what = f"{process.what} failed: {worker.error or (worker.result.message if worker.result is not None else '')}"
        else:
            what = f"{process.describe_end(last_words=False)} before the run ended."
        tail = process.last_words(MESSAGE_TAIL_LINES)
        others = " The other workers were ended." if len(self._local) > 1 else ""
        return f"{what}{others}" + (f" Its last output: {tail}" if tail else "")

    def _join_timeout_message(self) -> str:
        timeout = self._config.cluster_timeout_s
        remote = [w for w in self._workers if w not in self._local]
        if not remote:
            said = {w.index: w.process.last_words(MESSAGE_TAIL_LINES) for w in self._local if w.process is not None}
            tails = "; ".join(f"worker {index}: {words}" for index, words in said.items() if words)
            return f"The {len(self._local)} local workers did not form a cluster within {timeout} s." + (
                f" Their last output: {tails}" if tails else " The machine may be overloaded: try fewer workers."
            )
        missing = [w for w in remote if not self._answers(w.address)]
        if not missing:
            return (
                f"The cluster did not form within {timeout} s although every worker address answers: check that each "
                "worker was started with the same --cluster list and --config-json as shown by the app." + self._model_file_hint()
            )
        commands = worker_commands(self._config)
        return (
            " ".join(
                f"Worker {w.index} at {w.address} did not connect within {timeout} s (nothing accepts connections there): "
                f"start it on that host with `{commands[w.index - 1]}`, and check the address and that the port is open."
                for w in missing
            )
            + self._model_file_hint()
        )

    def _answers(self, address: str) -> bool:
        """Whether something accepts connections at `address`: in the workers' private network when they run in one."""
        chief = self._workers[0].process
        if self._network is not None and chief is not None:
            return _listens_in_network_of(chief.pid, int(address.rpartition(":")[2]))
        return _accepts_connections(address)

    def _model_file_hint(self) -> str:
        """For a run on a model file: each host needs that file, and a worker whose file differs refuses to start."""
        if not self._config.model_sha256:
            return ""
        return (
            f" Each host needs the model file {self._config.model} with the same content (sha256 {self._config.model_sha256[:12]}…): "
            "a worker whose file is missing or differs says so in its own output and does not join."
        )

    def _send_stop(self) -> None:
        """Ask the chief alone to stop (killed after STOP_GRACE_S if it has not).

        It leaves after the call in flight, which every worker has then finished
        too (collectives keep them in step), so its result is a clean "stopped".
        Told at once, the workers could stop one call apart and fail each other;
        instead the others lose the chief and end, or are killed after STOP_GRACE_S.
        """
        self._stop_sent = True
        chief = self._workers[0].process
        if chief is not None:
            chief.stop(STOP_GRACE_S)

    def _end_all(self) -> None:
        """Kill every local worker still running, then wait for their exit codes and output."""
        self._ending = True
        started = [w.process for w in self._local if w.process is not None]
        for process in started:
            process.kill()
        for process in started:
            process.wait()

    def _result(self, started_at: str, wall_s: float) -> RunResult:
        chief = self._workers[0]
        result = chief.result if chief.result is not None else self._streamed_result(started_at, wall_s)
        if self._failure:
            result = replace(result, status=RunStatus.FAILED, message=self._failure)
        environment = dict(
            result.environment, cluster=list(self._cluster), workers=len(self._cluster), workers_isolated=self._network is not None
        )
        # The chief may have lowered steps_per_call (too few steps to measure): keep what it really used.
        config = {**self._config.to_dict(), "steps_per_call": result.config.get("steps_per_call", self._config.steps_per_call)}
        return replace(result, config=config, environment=environment, warnings=(*result.warnings, *self._network_notes()))

    def _network_notes(self) -> tuple[str, ...]:
        """What the result says about who could reach the workers, and whether they crowded this machine."""
        crowding = (self._crowding,) if self._crowding else ()
        if self._network is not None:
            return (ISOLATED_NOTE, *crowding)
        if self._exposed_because:
            return (GRPC_WARNING, exposed_note(self._exposed_because), *crowding)
        return (GRPC_WARNING, *crowding)

    def _streamed_result(self, started_at: str, wall_s: float) -> RunResult:
        """The chief ended without a result (killed): the statistics of the steps it streamed."""
        start = self._start_event
        total = start.total_steps if start else 0
        done = len(self._records)
        times = [r.step_time_s for r in self._records]
        stats = summarize(times, sum(r.warmup for r in self._records), self._config.batch_size)
        status = RunStatus.COMPLETED if total and done >= total else RunStatus.STOPPED
        if status == RunStatus.COMPLETED:
            message = ""
        elif start:
            message = f"Stopped by the user after {done} of {total} steps."
        else:
            message = "Stopped by the user before the workers had formed a cluster."
        devices = start.devices if start else ()
        return RunResult(
            status=status,
            config=self._config.to_dict(),
            message=message,
            steps_done=done,
            replicas=start.replicas if start else self._config.workers,
            **stats.result_fields(),
            final_loss=self._records[-1].loss if self._records else None,
            wall_s=wall_s,
            started_at=started_at,
            environment=dict(start.environment) if start else {},
            losses=tuple(r.loss for r in self._records),
            step_times_s=tuple(times),
            warnings=tuple(self._config.warnings(has_accelerator=any(not d.startswith("CPU") for d in devices))),
        )

    def _cluster_hooks(self) -> list[ClusterHook]:
        return [hook for hook in self._hooks if isinstance(hook, ClusterHook)]


def with_model_hash(config: RunConfig) -> RunConfig:
    """A run on a model file with the file's sha256 recorded, so every worker checks it trains that same content.

    Raises ModelFileError when the file cannot be used (missing, corrupt, untrusted).
    """
    if not is_model_file(config.model) or config.model_sha256:
        return config
    return config.with_changes(model_sha256=check_model_path(config.model, config.trust).sha256)


def _accepts_connections(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=2.0):
            return True
    except OSError:
        return False


_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


def _listens_in_network_of(pid: int, port: int) -> bool:
    """Whether a TCP socket listens on `port` in the network namespace of process `pid` (its /proc/PID/net tables)."""
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == _LISTEN and int(fields[1].rpartition(":")[2], 16) == port:
                return True
    return False


def _visible_gpu_ids() -> list[str]:
    """The CUDA ids of the GPUs TensorFlow sees here, as CUDA_VISIBLE_DEVICES spells them."""
    import tensorflow as tf

    count = len(tf.config.list_physical_devices("GPU"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    return visible.split(",")[:count] if visible else [str(i) for i in range(count)]
