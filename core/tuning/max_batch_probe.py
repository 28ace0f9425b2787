"""One probe of the largest-batch search: a few training steps at one batch, in a child process.

`run_probe(config, batch, limits, stop_event)` starts `python -m
core.tuning.max_batch_probe`, a fresh Python that trains PROBE_STEPS steps of
the job at that batch and writes a JSON answer. Whatever happens there (an
out-of-memory error, the kernel's OOM killer, a crash in native code) ends the
child, never the caller.

The host memory budget is enforced on the child in two ways, measured here
(TensorFlow 2.21, Linux): the parent reads the child's peak resident memory
(VmHWM in /proc, the kernel's own high-water mark, so a brief peak between
two reads still counts) every POLL_S and kills its process group once the peak
passes the budget; and the child sets RLIMIT_DATA to the budget, so one huge
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
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.child_process import child_env, exit_description, kill_process_group, last_line, read_answer
from core.config import RunConfig

PROBE_STEPS = 3
"""Steps per probe, one per call: the warm-up call (tracing, first allocations) and two steady ones (Lightning's default)."""
POLL_S = 0.02
PROBE_TIMEOUT_S = 300.0
"""A probe still training after this long is stopped and counted as not fitting: a batch that slow is of no use."""
OOM_MARKERS = ("Out of memory", "MemoryError", "RESOURCE_EXHAUSTED", "OOM when allocating", "bad_alloc")
STDERR_TAIL_CHARS = 400
ORPHAN_POLL_S = 0.5


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
    with tempfile.TemporaryDirectory(prefix="device-lab-max-batch-") as folder:
        answer_file, log_file = Path(folder) / "answer.json", Path(folder) / "stderr.txt"
        command = [sys.executable, "-m", "core.tuning.max_batch_probe", "--out", str(answer_file), "--host-limit", str(limits.host_bytes)]
        command += ["--device-limit", str(limits.device_bytes)] if limits.device_bytes else []
        command += ["--config", json.dumps(job.to_dict())]
        started = time.monotonic()
        with open(log_file, "wb") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=_child_env(job),
                start_new_session=os.name == "posix",
            )
            try:
                ended, watched_peak = _watch(process, limits.host_bytes, stop_event, timeout_s)
            except BaseException:  # Ctrl-C in the caller's thread: the child must not outlive the search
                kill_process_group(process)
                process.wait()
                raise
        seconds = time.monotonic() - started
        answer = read_answer(answer_file)
        stderr_tail = _tail(log_file)
    return _verdict(batch, ended, answer, watched_peak, seconds, process.returncode, stderr_tail, limits, timeout_s)


def _watch(process: subprocess.Popen, host_bytes: int, stop_event: threading.Event | None, timeout_s: float) -> tuple[str, int]:
    """Wait for the child, killing its group on the budget, Stop or the time limit; ("exited"|"budget"|"stopped"|"timeout", peak RSS)."""
    deadline = time.monotonic() + timeout_s
    peak = 0
    while process.poll() is None:
        peak = max(peak, peak_resident_bytes(process.pid))
        reason = "budget" if peak > host_bytes else "stopped" if stop_event is not None and stop_event.is_set() else ""
        reason = reason or ("timeout" if time.monotonic() > deadline else "")
        if reason:
            kill_process_group(process)
            process.wait()
            return reason, peak
        time.sleep(POLL_S)
    return "exited", peak


def peak_resident_bytes(pid: int) -> int:
    """The process's peak resident memory so far (Linux VmHWM), else its current resident memory; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.Error:
        return 0


def _verdict(
    batch: int,
    ended: str,
    answer: dict | None,
    watched_peak: int,
    seconds: float,
    returncode: int,
    stderr_tail: str,
    limits: ProbeLimits,
    timeout_s: float,
) -> Probe:
    """The probe's row from how the child ended and what it wrote."""
    if ended == "stopped":
        return Probe(batch, False, watched_peak or None, "stopped", seconds, stopped=True)
    if ended == "budget":
        return Probe(
            batch, False, watched_peak, f"over the memory budget: the process passed {limits.host_bytes:,} bytes and was stopped", seconds
        )
    if ended == "timeout":
        return Probe(batch, False, watched_peak or None, f"still training after {timeout_s:g} s: stopped (too slow to be of use)", seconds)
    if answer is None:
        return Probe(
            batch,
            False,
            watched_peak or None,
            f"the probe process died ({exit_description(returncode)}), most likely out of memory",
            seconds,
        )
    on_accelerator = bool(answer.get("on_accelerator"))
    host_peak = max(watched_peak, int(answer.get("max_rss") or 0))
    peak = answer.get("device_peak") if on_accelerator else host_peak
    probe = functools.partial(Probe, seconds=seconds, on_accelerator=on_accelerator, replicas=int(answer.get("replicas") or 1))
    message = str(answer.get("message") or "")
    if answer.get("status") == "completed":
        if host_peak > limits.host_bytes:
            return probe(batch, False, peak, f"over the memory budget: peak {host_peak:,} bytes")
        return probe(batch, True, peak)
    if any(marker in message for marker in OOM_MARKERS):
        return probe(batch, False, peak, message.split(". ")[0][:200] or "out of memory")
    return probe(batch, False, peak, "failed", error=message or stderr_tail or "the probe failed without a message")


def _child_env(config: RunConfig) -> dict[str, str]:
    """The child's environment (`child_process.child_env`): no GPU for a job on CPUs, which must not take GPU memory."""
    return child_env(hide_gpus=bool(config.devices) and all(device.startswith("CPU") for device in config.devices))


def _tail(path: Path) -> str:
    try:
        return last_line(path.read_text(encoding="utf-8", errors="replace"), STDERR_TAIL_CHARS)
    except OSError:
        return ""


def _logical_cpus(config: RunConfig) -> int:
    """Logical CPU devices the job names (CPU:1 needs two); 0: no split."""
    indexes = [int(device.split(":")[1]) for device in config.devices if device.startswith("CPU")]
    return max(indexes) + 1 if indexes and max(indexes) > 0 else 0


def _train(config: RunConfig, limits: ProbeLimits) -> dict[str, Any]:
    """In the child: set TensorFlow up, cap the data segment on a CPU job, train the probe, and say how it went."""
    import tensorflow as tf

    from core.machine.runtime import RuntimeSettings, configure_runtime
    from core.runner import run_training

    limit_mb = max(1, limits.device_bytes // 2**20) if limits.device_bytes else 0
    configure_runtime(RuntimeSettings(logical_cpus=_logical_cpus(config), gpu_memory_limit_mb=limit_mb))
    cpu_job = bool(config.devices) and all(device.startswith("CPU") for device in config.devices)
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


def _end_with_parent() -> None:
    """A daemon thread that ends this child once its parent is gone (the app killed): a probe never outlives its search."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL_S)
        os._exit(3)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """The child: train the probe and write {"status", "message", "max_rss", ...} to --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--host-limit", type=int, required=True)
    parser.add_argument("--device-limit", type=int, default=None)
    args = parser.parse_args(argv)
    if os.name == "posix":
        _end_with_parent()
    try:
        answer = _train(RunConfig.from_dict(json.loads(args.config)), ProbeLimits(args.host_limit, args.device_limit))
    except MemoryError as exc:
        answer = {"status": "failed", "message": f"MemoryError: {exc}"}
    except Exception as exc:  # a config this machine refuses: reported, not raised
        answer = {"status": "failed", "message": f"{type(exc).__name__}: {exc}"}
    if os.name == "posix":
        import resource

        answer["max_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    Path(args.out).write_text(json.dumps(answer), encoding="utf-8")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # the answer is written: skip TensorFlow's teardown at exit (about a second per probe)
