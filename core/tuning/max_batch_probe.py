"""One probe of the largest-batch search: a few training steps at one batch, in a child process.

`run_probe(config, batch, limits, stop_event)` starts `python -m
core.tuning.max_batch_probe` through the one runner (`core.child_process`), a
fresh Python that trains PROBE_STEPS steps of the job at that batch and replies
with how it went. Whatever happens there (an
out-of-memory error, the kernel's OOM killer, a crash in native code) ends the
child, never the caller.

The host memory budget is enforced on the child in two ways, measured here
(TensorFlow 2.21, Linux): the parent reads the child's peak resident memory
(VmHWM in /proc, the kernel's own high-water mark, so a brief peak between
two reads still counts) every POLL_S (`MemoryWatch`, the runner's poll) and
kills its process group once the peak passes the budget; and the child sets RLIMIT_DATA to the budget, so one huge
allocation fails at once inside TensorFlow (a clean "out of memory") instead
of pushing the machine into swap before the next read (set on CPU jobs only,
after TensorFlow has started, not under CUDA's own mappings). RLIMIT_AS cannot be
used: TensorFlow reserves ~2.2 GB of address space at import (600 MB
resident), and the import itself aborts under a 1.5 GB RLIMIT_AS. RLIMIT_DATA
counts private writable mappings only (370 MB after the import), so it never
fires before the resident-memory check would. A cgroup would be exact, but
needs root or a delegated hierarchy: the app does not assume one.

On a GPU the device's memory is the limit: TensorFlow's allocator raises an
out-of-memory error, optionally under a cap (`device_limit`, a logical device
of that size); the host budget still guards the machine.

A job on JAX or PyTorch trains in the probe's process itself, not in a child of
its own as a run does (`core.tuning.backend_probe`): so the watch reads the
backend's memory, not TensorFlow's, and a kill ends the training. There a
device cap is checked against the allocator's peak once the probe has trained.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

from core.backends.job_setup import peak_rss_bytes, process_memory
from core.child_process import STOPPED, TIMEOUT, Child, ChildEnd, exit_description, listen_to_parent, reply
from core.config import RunConfig
from core.tuning.backend_probe import train_on_backend

PROBE_STEPS = 3
"""Steps per probe, one per call: the warm-up call (tracing, first allocations) and two steady ones (Lightning's default)."""
POLL_S = 0.02
PROBE_TIMEOUT_S = 300.0
"""A probe still training after this long is stopped and counted as not fitting: a batch that slow is of no use."""
OVER_BUDGET = "over the memory budget"
OOM_MARKERS = ("Out of memory", "MemoryError", "RESOURCE_EXHAUSTED", "OOM when allocating", "bad_alloc")
STDERR_TAIL_CHARS = 400


@dataclass(frozen=True)
class ProbeLimits:
    """What a probe may use: host memory (bytes; watched and RLIMIT_DATA), and optionally a cap on each GPU's memory."""

    host_bytes: int
    device_bytes: int | None = None


@dataclass(frozen=True)
class Probe:
    """One batch tried: whether it fit, its peak memory (bytes; None when unknown) and why it did not fit.

    `peak_bytes` is the device allocator's peak on an accelerator, else the
    process's peak resident memory; `on_accelerator` says which.
    """

    batch: int
    fits: bool
    peak_bytes: int | None
    reason: str = ""
    seconds: float = 0.0
    on_accelerator: bool = False
    replicas: int = 1
    error: str = ""
    stopped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "fits": self.fits,
            "peak_bytes": self.peak_bytes,
            "reason": self.reason,
            "seconds": round(self.seconds, 2),
        }


def probe_config(config: RunConfig, batch: int) -> RunConfig:
    """The job a probe trains: `config` at `batch`, PROBE_STEPS steps, one step per call."""
    return config.with_changes(batch_size=batch, steps=PROBE_STEPS, epochs=None, steps_per_call=1)


def run_probe(
    config: RunConfig, batch: int, limits: ProbeLimits, stop_event: threading.Event | None = None, timeout_s: float = PROBE_TIMEOUT_S
) -> Probe:
    """Train `config` at `batch` in a child process under `limits`; never raises for what happens in the child."""
    job = probe_config(config, batch)
    args = ["--host-limit", str(limits.host_bytes)]
    args += ["--device-limit", str(limits.device_bytes)] if limits.device_bytes else []
    args += ["--config", json.dumps(job.to_dict())]
    watch = MemoryWatch(limits.host_bytes)
    child = Child.start(
        "core.tuning.max_batch_probe",
        args,
        what=f"the probe at batch {batch}",
        hide_gpus=_cpu_job(job),  # a job on CPUs must not take GPU memory
        limit_s=timeout_s,
        stop_event=stop_event,
        poll=watch,
        poll_s=POLL_S,
    )
    end = child.wait()  # Ctrl-C in the caller's thread kills the child: it never outlives the search
    answer = child.result if isinstance(child.result, dict) else None
    return _verdict(batch, end, answer, watch.peak, child.last_words(chars=STDERR_TAIL_CHARS), limits, timeout_s)


class MemoryWatch:
    """The runner's poll for a probe: the child's peak resident memory so far; past `host_bytes` it ends the child."""

    def __init__(self, host_bytes: int):
        self.host_bytes = host_bytes
        self.peak = 0

    def __call__(self, child: Child) -> str:
        self.peak = max(self.peak, peak_resident_bytes(child.pid))
        return OVER_BUDGET if self.peak > self.host_bytes else ""


def peak_resident_bytes(pid: int) -> int:
    """The process's peak resident memory so far (Linux VmHWM), else its current resident memory; 0 once it is gone."""
    peak = process_memory(pid).get("VmHWM")
    if peak is not None:
        return peak
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.Error:
        return 0


def _verdict(
    batch: int, end: ChildEnd, answer: dict | None, watched_peak: int, stderr_tail: str, limits: ProbeLimits, timeout_s: float
) -> Probe:
    """The probe's row from how the child ended and what it replied."""
    seconds = end.seconds
    if end.how == STOPPED:
        return Probe(batch, False, watched_peak or None, "stopped", seconds, stopped=True)
    if end.how == OVER_BUDGET:
        return Probe(
            batch, False, watched_peak, f"over the memory budget: the process passed {limits.host_bytes:,} bytes and was stopped", seconds
        )
    if end.how == TIMEOUT:
        return Probe(batch, False, watched_peak or None, f"still training after {timeout_s:g} s: stopped (too slow to be of use)", seconds)
    if answer is None:
        return Probe(
            batch,
            False,
            watched_peak or None,
            f"the probe process died ({exit_description(end.returncode)}), most likely out of memory",
            seconds,
        )
    on_accelerator = bool(answer.get("on_accelerator"))
    host_peak = max(watched_peak, int(answer.get("max_rss") or 0))
    peak = answer.get("device_peak") if on_accelerator else host_peak
    common: dict[str, Any] = {"seconds": seconds, "on_accelerator": on_accelerator, "replicas": int(answer.get("replicas") or 1)}
    message = str(answer.get("message") or "")
    if answer.get("status") == "completed":
        if host_peak > limits.host_bytes:
            return Probe(batch, False, peak, f"over the memory budget: peak {host_peak:,} bytes", **common)
        if on_accelerator and limits.device_bytes and peak and peak > limits.device_bytes:
            return Probe(batch, False, peak, f"over the device memory cap: peak {peak:,} bytes", **common)
        return Probe(batch, True, peak, **common)
    if any(marker in message for marker in OOM_MARKERS):
        return Probe(batch, False, peak, message.split(". ")[0][:200] or "out of memory", **common)
    return Probe(batch, False, peak, "failed", error=message or stderr_tail or "the probe failed without a message", **common)


def _cpu_job(config: RunConfig) -> bool:
    """The job names only CPUs."""
    return bool(config.devices) and all(device.startswith("CPU") for device in config.devices)


def _logical_cpus(config: RunConfig) -> int:
    """Logical CPU devices the job names (CPU:1 needs two); 0: no split."""
    indexes = [int(device.split(":")[1]) for device in config.devices if device.startswith("CPU")]
    return max(indexes) + 1 if indexes and max(indexes) > 0 else 0


def _train(config: RunConfig, limits: ProbeLimits) -> dict[str, Any]:
    """In the child: set TensorFlow up, cap the data segment on a CPU job, train the probe, and say how it went.

    A job on another backend trains here too, without TensorFlow (`backend_probe`).
    """
    if config.backend != "tensorflow":
        return train_on_backend(config, limits.host_bytes)
    import tensorflow as tf

    from core.machine.runtime import RuntimeSettings, configure_runtime
    from core.runner import run_training

    limit_mb = max(1, limits.device_bytes // 2**20) if limits.device_bytes else 0
    configure_runtime(RuntimeSettings(logical_cpus=_logical_cpus(config), gpu_memory_limit_mb=limit_mb))
    cpu_job = _cpu_job(config)
    on_accelerator = config.strategy == "tpu" or (not cpu_job and bool(tf.config.list_logical_devices("GPU")))
    if os.name == "posix" and not on_accelerator:  # not under CUDA, whose driver maps memory of its own
        import resource

        resource.setrlimit(resource.RLIMIT_DATA, (limits.host_bytes, limits.host_bytes))
    result = run_training(config)
    device_peak = result.peak_memory_bytes if result.peak_memory_source == "device allocator peak" else None
    return {
        "status": result.status.value,
        "message": result.message,
        "on_accelerator": on_accelerator,
        "device_peak": device_peak,
        "replicas": result.replicas,
    }


def main(argv: list[str] | None = None) -> int:
    """The child: train the probe and reply {"status", "message", "max_rss", ...}."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--host-limit", type=int, required=True)
    parser.add_argument("--device-limit", type=int, default=None)
    args = parser.parse_args(argv)
    listen_to_parent()  # the search's process gone (the app killed): end at once, a probe never outlives it
    try:
        answer = _train(RunConfig.from_dict(json.loads(args.config)), ProbeLimits(args.host_limit, args.device_limit))
    except MemoryError as exc:
        answer = {"status": "failed", "message": f"MemoryError: {exc}"}
    except Exception as exc:  # a config this machine refuses: reported, not raised
        answer = {"status": "failed", "message": f"{type(exc).__name__}: {exc}"}
    answer["max_rss"] = peak_rss_bytes()  # VmHWM: not the size of the app it was forked from
    reply(answer)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # the answer is written: skip TensorFlow's teardown at exit (about a second per probe)
