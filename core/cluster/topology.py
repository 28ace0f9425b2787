"""Multi-worker runs: TensorFlow's own cluster runtime, driven from the app.

The shape of a cluster: addresses, TF_CONFIG, each worker's command line
and GPU share. `core.cluster.supervisor.run_local_cluster` starts one process
per worker (`python -m core.cluster.worker ...`, the same as `python main.py
worker ...`), each running the engine under MultiWorkerMirroredStrategy with
its TF_CONFIG. With `config.cluster_hosts` set, only the chief runs here;
`worker_commands` gives the command for every other host.

TensorFlow's gRPC server listens on all interfaces (0.0.0.0:port is hard-coded
in its grpc_server_lib), even when every address in the cluster is 127.0.0.1:
local workers, and the workers of a cluster whose every address is loopback,
therefore run in a private network namespace where the system allows it
(`core.cluster.isolation`), and every other multi-worker result carries
`GRPC_WARNING`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

from core.cluster.isolation import loopback_cluster
from core.formatting import format_bytes
from core.training.hooks import RunHook

if TYPE_CHECKING:
    from core.config import RunConfig

GRPC_WARNING = "TensorFlow's gRPC channel between workers is unauthenticated and unencrypted: run multi-worker only on a trusted network."
LOCALHOST = "127.0.0.1"
USER_WORKER_COMMAND = ("python", "main.py", "worker")
SUPERVISOR_ONLY_FIELDS = ("cluster_hosts", "cluster_timeout_s", "allow_network_workers")
WORKER_MEMORY_BYTES = 256 << 20  # one worker's own memory (USS) training a small model on the CPU, measured


@dataclass(frozen=True)
class WorkerInfo:
    """One worker of a cluster run; `pid` is None for a worker on another host."""

    index: int
    address: str
    pid: int | None
    exit_code: int | None = None


class ClusterHook(RunHook):
    """A RunHook that also hears about the worker processes of a cluster run."""

    def on_workers_started(self, workers: Sequence[WorkerInfo]) -> None:
        """The processes started here are running; none has joined the cluster yet."""

    def on_cluster_waiting(self, elapsed_s: float, timeout_s: float) -> None:
        """About once a second until all workers have joined (or `timeout_s` passes)."""

    def on_workers_ended(self, workers: Sequence[WorkerInfo]) -> None:
        """Every process started here has exited; `exit_code` is negative for a signal."""


def worker_commands(config: RunConfig) -> list[str]:
    """The shell command for each other host of `config.cluster_hosts` (task 1, 2, ...).

    Run it in the Device Lab folder of that host (same version as here). For a cluster whose
    every address is loopback that host is this one, and the worker joins the private network
    the cluster's workers share (`core.cluster.isolation`); where they may run exposed
    (`allow_network_workers`) the command says so too.
    """
    if not config.cluster_hosts:
        return []
    exposed = ["--allow-network-workers"] if config.allow_network_workers and loopback_cluster(config.cluster_hosts) else []
    return [
        shlex.join([*USER_WORKER_COMMAND, *_worker_args(config, list(config.cluster_hosts), i), *exposed]) for i in range(1, config.workers)
    ]


def _worker_args(config: RunConfig, cluster: Sequence[str], index: int, supervised: bool = False) -> list[str]:
    """Arguments of `core.cluster.worker.main` for task `index` of `cluster`."""
    settings = {k: v for k, v in config.to_dict().items() if k not in SUPERVISOR_ONLY_FIELDS}
    config_json = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    args = ["--cluster", ",".join(cluster), "--task-index", str(index), "--config-json", config_json]
    return [*args, "--supervised"] if supervised else args


def local_worker_argv(config: RunConfig, cluster: Sequence[str], index: int) -> list[str]:
    """The command line of a worker process started by this app."""
    return [sys.executable, "-m", "core.cluster.worker", *_worker_args(config, cluster, index, supervised=True)]


def local_gpu_shares(gpu_ids: Sequence[str], workers: int) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES for each local worker: an even, disjoint share of the GPUs.

    Workers seeing the same GPUs would collide in NCCL, so each gets its own,
    the same number each (MultiWorkerMirrored wants equal workers). With fewer
    GPUs than workers they are shared round-robin, which NCCL may refuse: use
    at most one worker per GPU. None (environment left alone) without GPUs.
    """
    if not gpu_ids:
        return [None] * workers
    per_worker = len(gpu_ids) // workers
    if not per_worker:
        return [gpu_ids[i % len(gpu_ids)] for i in range(workers)]
    return [",".join(gpu_ids[i * per_worker : (i + 1) * per_worker]) for i in range(workers)]


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, where the OS tells)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def oversubscription_warning(config: RunConfig, cores: int | None = None, available_bytes: int | None = None) -> str:
    """Why `config`'s local workers would crowd this machine; "" when they fit.

    Every worker is a whole TensorFlow process with its own thread pools and
    about WORKER_MEMORY_BYTES of its own memory (more for a larger model):
    more workers than cores only slows each step, and too many run out of
    memory. `cores` and `available_bytes` default to this machine's.
    """
    if config.strategy != "multi-worker" or config.cluster_hosts or config.workers < 2:
        return ""
    cores = usable_cores() if cores is None else cores
    available = psutil.virtual_memory().available if available_bytes is None else available_bytes
    workers = config.workers
    memory = f"about {format_bytes(WORKER_MEMORY_BYTES)} each, {format_bytes(workers * WORKER_MEMORY_BYTES)} in all"
    if workers > cores:
        return (
            f"{workers} local workers share {cores} CPU core{'s' if cores != 1 else ''}: each is a full TensorFlow process "
            f"({memory}; {format_bytes(available)} available now), so they take long to join and every step is slower "
            f"than with fewer workers. Use at most {cores} here, or a cluster of several hosts."
        )
    if workers * WORKER_MEMORY_BYTES > available:
        return (
            f"{workers} local workers need {memory} (each a full TensorFlow process), more than the "
            f"{format_bytes(available)} available now: use fewer workers."
        )
    return ""


def tf_config(cluster: Sequence[str], index: int) -> str:
    """The TF_CONFIG of worker `index`: every task a "worker", task 0 the chief."""
    return json.dumps({"cluster": {"worker": list(cluster)}, "task": {"type": "worker", "index": index}})


def cluster_from_environment() -> list[str] | None:
    """Worker addresses from an existing TF_CONFIG or Slurm job step, or None outside one.

    Read through TensorFlow's cluster resolvers; a "chief" job, if any, comes
    first. Under Slurm, ports start at TensorFlow's default 8888 per node.
    """
    import tensorflow as tf

    resolvers = tf.distribute.cluster_resolver
    if os.environ.get("TF_CONFIG"):
        spec = resolvers.TFConfigClusterResolver().cluster_spec().as_dict()
    elif "SLURM_STEP_NUM_TASKS" in os.environ and "SLURM_PROCID" in os.environ:
        tasks = int(os.environ["SLURM_STEP_NUM_TASKS"])
        # One "GPU slot" per task, and no CUDA_VISIBLE_DEVICES: only the addresses are wanted here.
        spec = resolvers.SlurmClusterResolver(gpus_per_node=tasks, gpus_per_task=1, auto_set_gpu=False).cluster_spec().as_dict()
    else:
        return None
    return [address for job in ("chief", "worker") for address in _job_addresses(spec.get(job, []))]


def _job_addresses(tasks: list[str] | dict[int, str]) -> list[str]:
    return [tasks[i] for i in sorted(tasks)] if isinstance(tasks, dict) else list(tasks)
