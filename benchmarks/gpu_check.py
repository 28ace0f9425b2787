"""gpu_check: the app's GPU code run on a real GPU, in one short script that writes one JSON file.

    python benchmarks/gpu_check.py --out gpu_check.json          # a machine with an NVIDIA GPU (sized for 8 minutes on one H100: 408 s of parts there)
    python benchmarks/gpu_check.py --cpu-only --out dry.json     # anywhere: every part that needs no GPU (the CI dry run)

The GPU machine this is written for has JAX and PyTorch with CUDA, nvidia-ml-py,
psutil and py-cpuinfo, but no TensorFlow, no Qt and no Keras (`gpu_wheels.sh`
fetches Keras and its two missing dependencies). So everything here goes
through the app's TensorFlow-free paths: JAX and PyTorch jobs in child
processes (`core.jobs.run_job` with a RunConfig whose backend is "jax" or
"torch"), NVML through `core.machine.gpu`, and this process never imports
TensorFlow, Qt, JAX or PyTorch. The JSON holds one object per part, in this order:

- inventory: the app's NVML reader beside `nvidia-smi --query-gpu=...`, and whether they agree;
- backend_devices: JAX's and PyTorch's devices as the app lists them (`core.backends.devices`);
- jobs: each sample model as a job on the GPU and on the CPU per backend: samples/s, warm-up,
  and the speed-up GPU over CPU with its 95% interval (`core.training.noise.runs_ratio`);
- sampler: the app's GPU sampler (`GpuSampler`, ~10 Hz) during each job: utilisation and memory,
  with power and SM clock read beside it by this script (the sampler reads neither);
- conditions: each job's conditions record (other processes on the GPU, clocks, throttle reasons)
  and one reading taken by this script during the job's first steady call;
- max_batch: the app's largest-batch search on the GPU (JAX probes, under a cap on GPU memory)
  checked by two probes of its own: the answer fits, twice the answer does not;
- ceilings: bf16 and f32 matmuls timed with JAX (block_until_ready) beside the app's datasheet peak.

A part holds its figures, or {"skipped": why} / {"error": what}. Each part runs
in a thread of its own under a time limit; one that raises or overruns is
recorded and the others go on. The whole run keeps to `--budget-s` (480 s), a
part cut off at its limit given STOP_GRACE_S more; when time runs short, later
jobs and max_batch say they were skipped for it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness  # noqa: E402
from core.training.callbacks import RunCallback, RunContext  # noqa: E402

NAME = "gpu_check"
PARTS = ("inventory", "backend_devices", "jobs", "sampler", "conditions", "max_batch", "ceilings")
MODELS = ("mlp", "cnn", "resnet", "transformer")
BACKENDS = ("jax", "torch")
GPU, CPU = "GPU:0", "CPU:0"
MIB = 2**20
GIB = 2**30

BUDGET_S = 480.0
"""The whole run, all parts: the GPU machine's command may run 10 minutes, and a part past its limit gets STOP_GRACE_S more.

On an H100 (2026-11-27) the parts took 408 s: ceilings 29, JAX jobs 112, max_batch 114, PyTorch jobs 141.
"""
PART_LIMITS_S = {"inventory": 60.0, "backend_devices": 150.0, "ceilings": 150.0}
STOP_GRACE_S = 75.0
"""After its limit a part is asked to stop; a job ends after its call in flight, or its child is killed 60 s later."""
SUMMARY_LIMIT_S = 30.0
"""The sampler and conditions parts only summarise what the jobs read: no waiting in them."""
JOB_LIMIT_S = 150.0
MIN_JOB_S = 20.0
"""A job is not started with less than this left: it would be cut off before its steady state."""
MAX_BATCH_S = 90.0
"""The largest-batch search's own time budget (`find_max_batch(budget_s=...)`); its two reference probes come after it."""
REFERENCE_S = 45.0
"""Kept for max_batch's two reference probes (a fresh JAX process each) after the search."""
MAX_BATCH_SHARE_S = MAX_BATCH_S + REFERENCE_S + 15.0
"""Kept free for max_batch while the first backend's jobs run."""
LATER_BACKENDS_SHARE_S = 150.0
"""Kept free for the later backends' jobs (PyTorch's, 141 s on an H100) while the first backend's jobs and max_batch run."""
MEMORY_LIMIT_GIB = {"gpu": 4.0, "cpu": 1.0}
"""max_batch's limit: a cap on GPU memory (the JAX allocator's peak), or the host budget on the CPU."""
NVIDIA_SMI_FIELDS = ("name", "memory.total", "memory.used", "memory.free", "utilization.gpu", "temperature.gpu", "power.draw", "clocks.sm")
NVIDIA_SMI_TIMEOUT_S = 30.0
SMI_ROUNDING_MIB = 1
"""nvidia-smi prints whole MiB: its figure may differ from the bytes NVML gave by up to 1 MiB through rounding alone."""
CEILINGS_CHILD = "_ceilings"
GPU_MATMULS = (("bfloat16", "default", 8192), ("bfloat16", "default", 16384), ("float32", "default", 8192), ("float32", "default", 16384))
GPU_MATMULS_HIGHEST = (("float32", "highest", 8192),)
CPU_MATMULS = (("float32", "default", 1024), ("float32", "default", 2048))
MATMUL_REPEATS = 7
GPU_MATMUL_INNER = 10
CPU_MATMUL_INNER = 2


@dataclass
class Options:
    """What to run: the command line's choices."""

    cpu_only: bool = False
    models: tuple[str, ...] = MODELS
    backends: tuple[str, ...] = BACKENDS
    steps: int = 30
    gpu_steps: int = 200
    batch_size: int = 64
    budget_s: float = BUDGET_S
    max_batch_model: str = "cnn"
    max_batch_s: float | None = None  # None: MAX_BATCH_S on a GPU, skipped with --cpu-only
    memory_limit_gib: float | None = None  # None: MEMORY_LIMIT_GIB for the device

    @property
    def max_batch_budget_s(self) -> float:
        if self.max_batch_s is not None:
            return self.max_batch_s
        return 0.0 if self.cpu_only else MAX_BATCH_S


@dataclass
class Shared:
    """What the jobs part measured for the sampler and conditions parts, and the deadline every part keeps."""

    deadline: float
    sampled: list[dict[str, Any]] = field(default_factory=list)
    conditions: list[dict[str, Any]] = field(default_factory=list)

    def left(self) -> float:
        return self.deadline - time.monotonic()


# --- running the parts ----------------------------------------------------------------------------------


def run_part(name: str, work: Callable[[threading.Event], dict[str, Any]], limit_s: float) -> dict[str, Any]:
    """`work(stop)` in a thread of its own: its dict, or {"error": ...} when it raised or ran past `limit_s` (then `stop` is set)."""
    if limit_s < 1:
        return {"skipped": "no time left in the script's budget (--budget-s)"}
    stop = threading.Event()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work(stop)
        except BaseException as exc:  # every failure is the part's record, never the end of the script
            box["error"] = f"{type(exc).__name__}: {exc}"
            box["traceback"] = traceback.format_exc(limit=-6)[-3000:]

    started = time.monotonic()
    thread = threading.Thread(target=target, name=f"{NAME}-{name}", daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive():
        stop.set()
        thread.join(STOP_GRACE_S)
    seconds = round(time.monotonic() - started, 1)
    if thread.is_alive():
        return {"error": f"no answer within {limit_s:.0f} s, nor {STOP_GRACE_S:.0f} s after being asked to stop", "seconds": seconds}
    if "error" in box:
        return {"error": box["error"], "traceback": box["traceback"], "seconds": seconds}
    value = dict(box["value"])
    if stop.is_set():
        value.setdefault("stopped", f"asked to stop at its limit of {limit_s:.0f} s: figures up to then")
    value["seconds"] = seconds
    return value


def check(options: Options) -> dict[str, dict[str, Any]]:
    """Every part, in the order that keeps the most figures when time runs short; keyed in PARTS order.

    The sampler and conditions parts summarise what the jobs part read during its jobs.
    """
    from core.backends.available import is_installed
    from core.machine.gpu import load_nvml

    shared = Shared(time.monotonic() + options.budget_s)
    done: dict[str, dict[str, Any]] = {}

    def limit(name: str) -> float:
        return min(PART_LIMITS_S.get(name, math.inf), shared.left())

    done["inventory"] = run_part("inventory", lambda stop: inventory(), limit("inventory"))
    done["backend_devices"] = run_part("backend_devices", lambda stop: backend_devices(options), limit("backend_devices"))
    ceilings_s = limit("ceilings")
    done["ceilings"] = run_part("ceilings", lambda stop: ceilings(options, ceilings_s), ceilings_s)
    first, later = options.backends[:1], options.backends[1:]
    later_share = LATER_BACKENDS_SHARE_S if any(is_installed(backend) for backend in later) else 0.0
    max_batch_share = MAX_BATCH_SHARE_S if options.max_batch_budget_s > 0 else 0.0
    until = shared.deadline - max_batch_share - later_share
    done["jobs"] = run_part("jobs", lambda stop: jobs(options, first, shared, stop, until), until - time.monotonic())
    until = shared.deadline - later_share
    done["max_batch"] = run_part("max_batch", lambda stop: max_batch(options, stop, until), until - time.monotonic())
    if later:
        more = run_part("jobs", lambda stop: jobs(options, later, shared, stop, shared.deadline), shared.left())
        done["jobs"] = merged_jobs(done["jobs"], more, first, later)
    problem = load_nvml()[1]
    done["sampler"] = run_part("sampler", lambda stop: sampler_part(options, shared, done["jobs"], problem), SUMMARY_LIMIT_S)
    done["conditions"] = run_part("conditions", lambda stop: conditions_part(options, shared, done["jobs"]), SUMMARY_LIMIT_S)
    return {name: done[name] for name in PARTS}


def merged_jobs(
    first: dict[str, Any], later: dict[str, Any], first_backends: Sequence[str], later_backends: Sequence[str]
) -> dict[str, Any]:
    """The jobs part of the first backend and that of the later ones as one; a side that has no runs says why in a row per backend."""

    def rows(part: dict[str, Any], backends: Sequence[str]) -> list[dict[str, Any]]:
        if "runs" in part:
            return list(part["runs"])
        return [{"backend": backend, **{key: part[key] for key in ("error", "skipped") if key in part}} for backend in backends]

    if "runs" not in first and "runs" not in later:
        return first
    merged = dict(first if "runs" in first else later)
    merged["runs"] = [*rows(first, first_backends), *rows(later, later_backends)]
    speedups = [entry for part in (first, later) if isinstance(part.get("speedups"), list) for entry in part["speedups"]]
    merged["speedups"] = speedups if isinstance(merged.get("speedups"), list) else merged.get("speedups")
    merged["seconds"] = round(sum(part.get("seconds", 0) for part in (first, later)), 1)
    return merged


# --- inventory -----------------------------------------------------------------------------------------


def inventory() -> dict[str, Any]:
    """The app's NVML reading (`read_driver_gpus`) beside nvidia-smi's, GPU by GPU, with a verdict."""
    from core.machine.gpu import NO_DRIVER, load_nvml, read_driver_gpus

    nvml, problem = load_nvml()
    smi_path = shutil.which("nvidia-smi")
    host = _host()
    if nvml is None:
        smi = _nvidia_smi() if smi_path else None
        if problem == NO_DRIVER or (smi_path is None and not _nvml_library_present()):
            return {"skipped": NO_DRIVER, "nvml": problem or NO_DRIVER, "nvidia_smi": "not found", "host": host}
        return {"skipped": problem, "nvidia_smi": smi if smi is not None else "not found", "host": host}
    before = read_driver_gpus(nvml)
    smi = _nvidia_smi() if smi_path else None
    after = read_driver_gpus(nvml)
    reserved = [_reserved_bytes(nvml, index) for index in range(len(before))]
    gpus = []
    for index, gpu in enumerate(before):
        row = smi[index] if isinstance(smi, list) and index < len(smi) else None
        later = after[index] if index < len(after) else gpu
        gpus.append(_compare_gpu(index, gpu, later, row, reserved[index]))
    verdicts = [gpu["agree"]["all"] for gpu in gpus]
    return {
        "nvml": "ok",
        "driver_version": _read(lambda: _text(nvml.nvmlSystemGetDriverVersion())),
        "gpu_count": len(before),
        "nvidia_smi": "ok" if isinstance(smi, list) else (smi or "not found"),
        "agree": bool(verdicts) and all(verdicts) and isinstance(smi, list) and len(smi) == len(before),
        "tolerance": (
            "names equal; totals equal once NVML's bytes are whole MiB (nvidia-smi's unit; truncated or rounded); "
            f"used and free: nvidia-smi's MiB within {SMI_ROUNDING_MIB} MiB (its rounding) of the range the app's reader "
            "gave just before and just after nvidia-smi ran (what the memory did meanwhile)"
        ),
        "matched_by": "index: nvidia-smi lists GPUs in NVML's index order",
        "gpus": gpus,
        "host": host,
    }


def _compare_gpu(index: int, gpu: Any, later: Any, row: dict[str, Any] | None, reserved: int | None) -> dict[str, Any]:
    """One GPU: the app's reading, nvidia-smi's, and whether they agree within the stated tolerance."""
    total, used, free = gpu.memory
    app = {
        "name": gpu.name,
        "bus_id": gpu.bus_id,
        "compute_capability": gpu.compute_capability,
        "memory_total_bytes": total,
        "memory_used_bytes": used,
        "memory_free_bytes": free,
        "memory_used_bytes_after": later.memory[1],
        "memory_free_bytes_after": later.memory[2],
        "usage": dict(gpu.usage),
    }
    entry: dict[str, Any] = {"index": index, "app": app, "nvidia_smi": row, "nvml_reserved_bytes": reserved}
    if row is None:
        entry["agree"] = {"all": False, "why": "nvidia-smi gave no row for this GPU"}
        return entry
    agree = {
        "name": row["name"] == gpu.name,
        "total": total is not None and row["memory_total_mib"] in (total // MIB, round(total / MIB)),
        "used": _within(row["memory_used_mib"], used, later.memory[1]),
        "free": _within(row["memory_free_mib"], free, later.memory[2]),
    }
    agree["all"] = all(agree.values())
    why = []
    if not agree["used"] and reserved and used is not None and row["memory_used_mib"] is not None:
        gap = used / MIB - row["memory_used_mib"]
        why.append(
            f"the app's used exceeds nvidia-smi's by {gap:,.0f} MiB; NVML's v2 memory info reserves {reserved / MIB:,.0f} MiB for the driver"
        )
    agree["why"] = "; ".join(why)
    entry["agree"] = agree
    return entry


def _within(smi_mib: float | None, first: int | None, second: int | None) -> bool:
    """nvidia-smi's MiB within SMI_ROUNDING_MIB of the range [first, second] (bytes) the app read around it."""
    if smi_mib is None or first is None or second is None:
        return False
    low, high = sorted((first / MIB, second / MIB))
    return low - SMI_ROUNDING_MIB <= smi_mib <= high + SMI_ROUNDING_MIB


def _nvidia_smi() -> list[dict[str, Any]] | str:
    """nvidia-smi's row per GPU (numbers parsed, "[N/A]" as None), or why there is none."""
    command = ["nvidia-smi", f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed: {type(exc).__name__}: {exc}"
    if done.returncode != 0:
        return f"nvidia-smi exited {done.returncode}: {(done.stderr or done.stdout).strip()[:300]}"
    return [parse_smi_row(line) for line in done.stdout.splitlines() if line.strip()]


def parse_smi_row(line: str) -> dict[str, Any]:
    """One line of `nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits` as named numbers."""
    cells = [cell.strip() for cell in line.split(",")]
    keys = (
        "memory_total_mib",
        "memory_used_mib",
        "memory_free_mib",
        "utilization_gpu_pct",
        "temperature_c",
        "power_draw_w",
        "clocks_sm_mhz",
    )
    name, numbers = ", ".join(cells[: len(cells) - len(keys)]), cells[len(cells) - len(keys) :]
    return {"name": name, **{key: _number(cell) for key, cell in zip(keys, numbers, strict=True)}}


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None
    return value if math.isfinite(value) else None


def _reserved_bytes(nvml: Any, index: int) -> int | None:
    """Memory the driver reserves (NVML's v2 memory info), where this nvidia-ml-py and driver give it."""

    def read() -> int:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        return int(nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2).reserved)

    return _read(read)


def _nvml_library_present() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def _host() -> dict[str, Any]:
    info = harness.machine_info()
    keys = ("cpu", "cores_logical", "cores_physical", "memory_gib", "python", "platform", "date", "load_average")
    return {key: info[key] for key in keys} | {
        "versions": {name: _version(name) for name in ("jax", "jaxlib", "torch", "keras", "nvidia-ml-py")}
    }


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


# --- backend devices -------------------------------------------------------------------------------------


def backend_devices(options: Options) -> dict[str, Any]:
    """JAX's and PyTorch's devices, each listed by the app in a child of its own (`list_backend_devices`)."""
    from core.backends.devices import list_backend_devices

    listed = [entry for entry in list_backend_devices() if entry["backend"] in options.backends]
    gpus = {entry["backend"]: [d for d in entry["devices"] if d.get("kind") == "GPU"] for entry in listed}
    return {"backends": listed, "gpus_seen": {backend: len(found) for backend, found in gpus.items()}}


# --- jobs, with the sampler and the conditions read during them --------------------------------------------


class JobWatch(RunCallback):
    """When the job's calls end (perf_counter, the sampler's clock), and NVML's GPU conditions during its first steady call."""

    def __init__(self, nvml: Any, handles: Sequence[tuple[str, Any]]) -> None:
        self.nvml = nvml
        self.handles = list(handles)
        self.started_at: float | None = None
        self.steady_at: float | None = None  # the end of the warm-up call
        self.last_at: float | None = None
        self.steps = 0
        self.during: list[dict[str, Any]] | None = None

    def on_run_start(self, context: RunContext) -> None:
        self.started_at = time.perf_counter()

    def on_steps(self, records: Sequence[Any]) -> None:
        now = time.perf_counter()
        self.steps += len(records)
        self.last_at = now
        if records and records[0].warmup:
            self.steady_at = now
        elif self.during is None and self.handles:
            from core.machine.conditions import gpu_conditions, own_pids

            try:
                self.during = gpu_conditions(self.nvml, self.handles, own_pids())
            except Exception as exc:  # a hook that raises fails the run: this reading must not
                self.during = [{"error": repr(exc)}]


class PowerClock:
    """Power draw (W) and SM clock (MHz) of one GPU every `interval_s`, in a thread: what `GpuSampler` does not read."""

    def __init__(self, nvml: Any, handle: Any, interval_s: float) -> None:
        self.nvml, self.handle, self.interval_s = nvml, handle, interval_s
        self.readings: list[tuple[float, float | None, float | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="power-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def _loop(self) -> None:
        sm = getattr(self.nvml, "NVML_CLOCK_SM", 1)
        while True:
            now = time.perf_counter()
            power = _read(lambda: self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0)
            clock = _read(lambda: float(self.nvml.nvmlDeviceGetClockInfo(self.handle, sm)))
            self.readings.append((now, power, clock))
            if self._stop.wait(max(0.0, now + self.interval_s - time.perf_counter())):
                return


def jobs(options: Options, backends_now: Sequence[str], shared: Shared, stop: threading.Event, deadline: float) -> dict[str, Any]:
    """Each model as a job on the GPU and the CPU, per backend (JAX first), through `run_job`; the speed-up with its interval."""
    from core.backends.available import backends
    from core.machine.gpu import load_nvml, run_gpu_handles

    nvml, _ = load_nvml()
    handles = run_gpu_handles(nvml, [GPU]) if nvml is not None else []
    devices = (CPU,) if options.cpu_only else (GPU, CPU)
    installed = {info.name: info for info in backends()}
    runs: list[dict[str, Any]] = []
    speedups: list[dict[str, Any]] = []
    for backend in backends_now:
        info = installed[backend]
        if not info.installed:
            runs.append({"backend": backend, "skipped": info.note})
            continue
        for model in options.models:
            results = {}
            for device in devices:
                left = deadline - time.monotonic()
                if stop.is_set() or left < MIN_JOB_S:
                    why = "the part was asked to stop" if stop.is_set() else f"{left:.0f} s left in the jobs' share of --budget-s"
                    runs.append({"backend": backend, "model": model, "device": device, "skipped": why})
                    continue
                steps = options.gpu_steps if device == GPU else options.steps
                result, row = run_one_job(options, backend, model, device, steps, nvml, handles, shared, stop, min(JOB_LIMIT_S, left))
                runs.append(row)
                results[device] = result
            if GPU in results and CPU in results:
                speedups.append(speedup(backend, model, results[CPU], results[GPU]))
    return {
        "settings": {
            "batch_size": options.batch_size,
            "cpu_steps": options.steps,
            "gpu_steps": None if options.cpu_only else options.gpu_steps,
            "steps_per_call": 1,
            "dataset": "synthetic",
            "strategy": "one-device",
            "how": "core.jobs.run_job (a child process per job, TensorFlow refused there), not recorded",
        },
        "runs": runs,
        "speedups": speedups if not options.cpu_only else "none: --cpu-only",
    }


def run_one_job(
    options: Options,
    backend: str,
    model: str,
    device: str,
    steps: int,
    nvml: Any,
    handles: Sequence[tuple[str, Any]],
    shared: Shared,
    stop: threading.Event,
    limit_s: float,
) -> tuple[Any, dict[str, Any]]:
    """One job through the app's runner, with the GPU sampled while it runs (when NVML is here); (its RunResult, its row)."""
    from core.config import RunConfig
    from core.jobs import JobOptions, run_job
    from core.machine.gpu_sampler import SAMPLE_INTERVAL_S, GpuSampler

    config = RunConfig(model=model, backend=backend, strategy="one-device", devices=(device,), steps=steps, batch_size=options.batch_size)
    watch = JobWatch(nvml, handles if device == GPU else ())
    sampler = GpuSampler(nvml, [handle for _, handle in handles]) if handles else None
    power = PowerClock(nvml, handles[0][1], SAMPLE_INTERVAL_S) if handles else None
    done = threading.Event()
    job_stop = _stop_after(stop, limit_s, done)
    for reader in (sampler, power):
        if reader is not None:
            reader.start()
    began = time.monotonic()
    try:
        result = run_job(config, None, JobOptions(hooks=(watch,)), job_stop).result
    finally:
        done.set()
        for reader in (sampler, power):
            if reader is not None:
                reader.stop()
    row = {
        "backend": backend,
        "model": model,
        "device": device,
        "status": str(result.status.value),
        "message": result.message,
        "samples_per_s": result.samples_per_s,
        "warmup_s": result.warmup_s,
        "steps_done": result.steps_done,
        "warmup_steps": result.warmup_steps,
        "step_time_median_ms": result.step_time_median_ms,
        "step_time_spread": result.step_time_spread,
        "peak_memory_bytes": result.peak_memory_bytes,
        "peak_memory_source": result.peak_memory_source,
        "flops_per_step": result.flops_per_step,
        "devices_reported": result.environment.get("devices"),
        "backend_version": result.environment.get(backend),
        "keras": result.environment.get("keras"),
        "tensorflow_imported": result.environment.get("tensorflow_imported"),
        "warnings": list(result.warnings),
        "wall_s": round(time.monotonic() - began, 1),
    }
    if job_stop.is_set() and not stop.is_set():
        row["stopped_at_limit_s"] = round(limit_s)
    if sampler is not None:
        try:
            shared.sampled.append(sampled_figures(row, watch, sampler, power))
        except Exception as exc:  # the sampler's summary must not cost the jobs part its other jobs
            shared.sampled.append({"backend": backend, "model": model, "device": device, "status": row["status"], "error": repr(exc)})
    if device == GPU or options.cpu_only:
        shared.conditions.append(
            {
                "backend": backend,
                "model": model,
                "device": device,
                "run_record": result.conditions,
                "during_first_steady_call": watch.during if device == GPU else None,
            }
        )
    return result, row


def _stop_after(stop: threading.Event, limit_s: float, done: threading.Event) -> threading.Event:
    """A job's own stop: an event set when `stop` is, or `limit_s` from now, unless `done` is set first."""
    job_stop = threading.Event()
    deadline = time.monotonic() + limit_s

    def watch() -> None:
        while not done.wait(0.2):
            if stop.is_set() or time.monotonic() >= deadline:
                job_stop.set()
                return

    threading.Thread(target=watch, name="job-limit", daemon=True).start()
    return job_stop


def speedup(backend: str, model: str, cpu: Any, gpu: Any) -> dict[str, Any]:
    """GPU samples/s over CPU samples/s with its 95% block-bootstrap interval over each run's steady calls (`runs_ratio`)."""
    from core.training.noise import runs_ratio

    entry: dict[str, Any] = {"backend": backend, "model": model}
    if not (cpu.ok and gpu.ok):
        entry["skipped"] = f"both jobs must complete (GPU {gpu.status.value}, CPU {cpu.status.value})"
        return entry
    interval = runs_ratio(cpu, gpu)
    if interval is None:
        entry["skipped"] = "too few steady calls in one of the runs for an interval"
        entry["gpu_over_cpu"] = gpu.samples_per_s / cpu.samples_per_s if cpu.samples_per_s and gpu.samples_per_s else None
        return entry
    entry.update(
        gpu_over_cpu=interval.ratio,
        interval_95=interval.to_list(),
        steady_calls=list(interval.calls),
        text=interval.text(),
        note="the interval resamples each run's steady calls; the two runs ran one after another",
    )
    return entry


def sampled_figures(row: dict[str, Any], watch: JobWatch, sampler: Any, power: PowerClock | None) -> dict[str, Any]:
    """The sampler's readings during one job: from the run's set-up to its last call ("run"), and its steady state."""
    readings = sampler.readings()
    start, steady, end = watch.started_at, watch.steady_at, watch.last_at
    in_run = [r for r in readings if start is not None and end is not None and start <= r.time_s <= end]
    in_steady = [r for r in in_run if steady is not None and r.time_s >= steady]
    power_in_run = [p for p in (power.readings if power else []) if start is not None and end is not None and start <= p[0] <= end]
    util_run = _values(r.utilization[0] for r in in_run)
    util_steady = _values(r.utilization[0] for r in in_steady)
    return {
        "backend": row["backend"],
        "model": row["model"],
        "device": row["device"],
        "status": row["status"],
        "job_steps": row["steps_done"],
        "interval_s": sampler.interval_s,
        "samples": len(readings),
        "samples_in_run": len(in_run),
        "samples_in_steady_state": len(in_steady),
        "run_s": round(end - start, 3) if start is not None and end is not None else None,
        "utilisation_max": max(util_run) if util_run else None,
        "utilisation_mean_steady": statistics.fmean(util_steady) if util_steady else None,
        "utilisation_max_whole_sampling": max(_values(r.utilization[0] for r in readings), default=None),
        "memory_total_bytes": sampler.memory_total[0],
        "memory_used_max_bytes": max(_values(r.memory_used[0] for r in in_run), default=None),
        "process_memory_max_bytes": max(_values(r.process_memory[0] for r in readings), default=None),
        "power_w_max": max(_values(p[1] for p in power_in_run), default=None),
        "power_w_mean": _mean(p[1] for p in power_in_run),
        "sm_clock_mhz_max": max(_values(p[2] for p in power_in_run), default=None),
        "sm_clock_mhz_mean": _mean(p[2] for p in power_in_run),
        "power_clock_samples": len(power_in_run),
    }


def sampler_part(options: Options, shared: Shared, jobs_part: dict[str, Any], nvml_problem: str) -> dict[str, Any]:
    """The GPU sampler's figures per job, and the check: utilisation above 0 during every GPU job that completed."""
    from core.machine.gpu_sampler import SAMPLE_INTERVAL_S

    if options.cpu_only:
        return {"skipped": "--cpu-only: no GPU job to sample"}
    if nvml_problem:
        return {"skipped": f"the sampler reads NVML: {nvml_problem}"}
    if not shared.sampled:
        return {"skipped": f"no job was sampled (jobs: {_part_state(jobs_part)})"}
    gpu_jobs = [s for s in shared.sampled if s["device"] == GPU and s["status"] == "completed"]
    cpu_jobs = [s for s in shared.sampled if s["device"] == CPU]
    busy_cpu_jobs = [f"{s['backend']} {s['model']}" for s in cpu_jobs if (s.get("utilisation_max") or 0) > 0]
    return {
        "interval_s": SAMPLE_INTERVAL_S,
        "power_and_clock": "read by this script at the sampler's interval: the app's GpuSampler reads utilisation and memory only",
        "utilisation_max": max((s.get("utilisation_max") or 0 for s in gpu_jobs), default=None),
        "check": {
            "rule": "utilisation_max > 0 during every completed GPU job (from its set-up to its last call)",
            "passed": bool(gpu_jobs) and all((s.get("utilisation_max") or 0) > 0 for s in gpu_jobs),
            "gpu_jobs": len(gpu_jobs),
        },
        "gpu_busy_during_cpu_jobs": busy_cpu_jobs,
        "jobs": shared.sampled,
    }


def conditions_part(options: Options, shared: Shared, jobs_part: dict[str, Any]) -> dict[str, Any]:
    """Each GPU job's conditions record (its ConditionsHook) and this script's reading during it; CPU jobs' with --cpu-only."""
    if not shared.conditions:
        return {"skipped": f"no job ran (jobs: {_part_state(jobs_part)})"}
    gpus = [gpu for entry in shared.conditions for gpu in (entry["run_record"] or {}).get("gpus", [])]
    gpus += [gpu for entry in shared.conditions for gpu in entry["during_first_steady_call"] or []]
    figures: dict[str, Any] = {
        "other_processes_on_gpu": sorted({pid for gpu in gpus for pid in gpu.get("other_processes") or []}),
        "throttle_reasons": sorted({reason for gpu in gpus for reason in gpu.get("throttle_reasons") or []}),
        "contended_jobs": [
            f"{e['backend']} {e['model']} {e['device']}" for e in shared.conditions if (e["run_record"] or {}).get("contended")
        ],
        "jobs": shared.conditions,
    }
    if options.cpu_only:
        figures["note"] = "--cpu-only: the CPU jobs' records (no GPU in them)"
    elif not gpus:
        figures["note"] = "no GPU in any record: the app found no NVML handle for the jobs' GPU"
    return figures


def _part_state(part: dict[str, Any]) -> str:
    return str(part.get("error") or part.get("skipped") or "ran")


# --- max batch ---------------------------------------------------------------------------------------------


def max_batch(options: Options, stop: threading.Event, until: float) -> dict[str, Any]:
    """The app's largest-batch search (JAX probes) and a reference: a probe at the answer fits, one at twice the answer does not."""
    from core.config import RunConfig
    from core.tuning.max_batch import default_memory_limit, find_max_batch
    from core.tuning.max_batch_probe import ProbeLimits, run_probe

    budget_s = options.max_batch_budget_s
    if budget_s <= 0:
        if not options.cpu_only:
            return {"skipped": "--max-batch-s 0"}
        return {
            "skipped": "--cpu-only: each probe is a fresh JAX process (about 10 s here), so the search is left to the GPU run; "
            "--max-batch-s N runs it on the CPU under --memory-limit-gib (host budget)"
        }
    device = CPU if options.cpu_only else GPU
    limit_gib = options.memory_limit_gib or MEMORY_LIMIT_GIB["cpu" if options.cpu_only else "gpu"]
    limit = int(limit_gib * GIB)
    config = RunConfig(model=options.max_batch_model, backend="jax", strategy="one-device", devices=(device,))
    budget_s = min(budget_s, max(1.0, until - time.monotonic() - REFERENCE_S))
    found = find_max_batch(config, limit, stop_event=stop, budget_s=budget_s)
    figures: dict[str, Any] = {
        "model": options.max_batch_model,
        "backend": "jax",
        "device": device,
        "limit": f"{limit_gib:g} GiB " + ("host memory budget" if options.cpu_only else "cap on GPU memory (the JAX allocator's peak)"),
        "search_budget_s": round(budget_s),
        "found": found.max_batch,
        "largest_fitting": found.largest_fitting,
        "smallest_failing": found.smallest_failing,
        "stopped_at_budget": found.stopped,
        "probes": len(found.probes),
        "search": found.to_dict(),
    }
    if found.error or found.max_batch < 1:
        figures["reference"] = {"skipped": f"the search gave no answer: {found.error or '; '.join(found.notes) or 'no batch fit'}"}
        return figures
    limits = ProbeLimits(default_memory_limit(), limit) if not options.cpu_only else ProbeLimits(limit)
    reference: dict[str, Any] = {}
    for name, batch in (("at_found", found.max_batch), ("at_twice_found", 2 * found.max_batch)):
        if stop.is_set() or until - time.monotonic() < 15:
            reference[name] = {"batch": batch, "skipped": "no time left"}
            continue
        probe = run_probe(config, batch, limits, stop)
        reference[name] = probe.to_dict() | {"error": probe.error}
    fits, over = reference["at_found"].get("fits"), reference["at_twice_found"].get("fits")
    reference["agrees"] = fits is True and over is False
    reference["rule"] = "the probe at the search's answer fits and the probe at twice it does not (same probe, same limit)"
    figures["reference"] = reference
    return figures


# --- ceilings ------------------------------------------------------------------------------------------------


def ceilings(options: Options, limit_s: float) -> dict[str, Any]:
    """Matmul FLOP/s measured with JAX in a child process, beside the app's estimate for the device."""
    from core.machine.peak_estimates import cpu_peak_flops, peak_flops

    platform = "cpu" if options.cpu_only else "gpu"
    env = harness.child_env(**({"JAX_PLATFORMS": "cpu"} if options.cpu_only else {}))
    measured = harness.run_child(NAME, [CEILINGS_CHILD, platform], timeout_s=max(1.0, limit_s - 5), env=env)
    modes: dict[str, dict[str, Any]] = {}
    for case in measured["cases"]:
        mode = f"{case['dtype']} {case['precision']}"
        best = modes.get(mode)
        if best is None or case["median_flops"] > best["ceiling_flops"]:
            modes[mode] = {"ceiling_flops": case["median_flops"], "at_n": case["n"]}
    if options.cpu_only:
        estimate, how = cpu_peak_flops()
        datasheet = {"float32 default": (estimate, how)}
    else:
        name = _gpu_name() or measured.get("device_kind") or ""
        device = {"kind": "GPU", "name": name}
        datasheet = {
            "bfloat16 default": peak_flops(device, "bfloat16"),
            "float32 default": peak_flops(device, "off", tf32=True),
            "float32 highest": peak_flops(device, "off", tf32=False),
        }
    for mode, figures in modes.items():
        peak, how = datasheet.get(mode, (None, "no estimate for this mode"))
        figures["estimate_flops"] = peak
        figures["estimate_how"] = how
        figures["fraction_of_estimate"] = figures["ceiling_flops"] / peak if peak else None
    return {
        "platform": measured["platform"],
        "device_kind": measured.get("device_kind"),
        "jax": measured.get("jax"),
        "how": (
            f"each case: {measured['repeats']} repeats of {measured['inner']} back-to-back jitted matmuls, block_until_ready on the last; "
            "the figure is the median repeat, the ceiling the highest median over the sizes; 'default' is JAX's default matmul "
            "precision (TF32 may be used for float32 on a GPU), 'highest' forces full float32"
        ),
        "ceilings": modes,
        "cases": measured["cases"],
    }


def _gpu_name() -> str:
    from core.machine.gpu import load_nvml, read_driver_gpus

    nvml, _ = load_nvml()
    gpus = read_driver_gpus(nvml) if nvml is not None else []
    return gpus[0].name if gpus else ""


def _ceilings_child(argv: list[str]) -> dict[str, Any]:
    """In a child: time the matmuls of `argv[1]` ("gpu" or "cpu") with JAX; FLOP/s = 2 n^3 / seconds per matmul."""
    import jax
    import jax.numpy as jnp

    platform = argv[1]
    device = jax.devices(platform)[0]
    cases = (*GPU_MATMULS, *GPU_MATMULS_HIGHEST) if platform == "gpu" else CPU_MATMULS
    inner = GPU_MATMUL_INNER if platform == "gpu" else CPU_MATMUL_INNER
    precisions = {"default": None, "highest": jax.lax.Precision.HIGHEST}
    timed = []
    for dtype, precision, n in cases:
        keys = jax.random.split(jax.random.PRNGKey(0))
        a, b = (jax.device_put(jax.random.normal(key, (n, n), dtype=jnp.float32).astype(dtype), device) for key in keys)
        product = jax.jit(lambda x, y, p=precisions[precision]: jnp.matmul(x, y, precision=p))
        product(a, b).block_until_ready()  # compile and first run
        times = []
        for _ in range(MATMUL_REPEATS):
            start = time.perf_counter()
            for _ in range(inner):
                out = product(a, b)
            out.block_until_ready()
            times.append((time.perf_counter() - start) / inner)
        flops = 2.0 * n**3
        median_s, best_s = statistics.median(times), min(times)
        timed.append(
            {
                "dtype": dtype,
                "precision": precision,
                "n": n,
                "median_s": median_s,
                "best_s": best_s,
                "median_flops": flops / median_s,
                "best_flops": flops / best_s,
            }
        )
        del a, b, out
    return {
        "platform": platform,
        "device_kind": str(getattr(device, "device_kind", platform)),
        "jax": jax.__version__,
        "repeats": MATMUL_REPEATS,
        "inner": inner,
        "cases": timed,
    }


# --- output --------------------------------------------------------------------------------------------------


def summary(parts: dict[str, dict[str, Any]]) -> list[str]:
    """A few lines per part: its main figures, or why it has none."""
    lines = []
    for name in PARTS:
        part = parts[name]
        state = part.get("error") or part.get("skipped")
        if state:
            text = str(state).strip().splitlines() or [""]
            shown = text[0] if len(text) == 1 else f"{text[0]} ... {text[-1]}"
            lines.append(f"{name}: {'ERROR ' if 'error' in part else 'skipped: '}{shown}")
            continue
        lines.extend(f"{name}: {line}" for line in _part_lines(name, part))
    return lines


def _part_lines(name: str, part: dict[str, Any]) -> list[str]:
    if name == "inventory":
        return [f"{len(part['gpus'])} GPU(s), NVML and nvidia-smi agree: {part['agree']}"] + [
            f"  GPU {g['index']} {g['app']['name']}: {g['agree']}" for g in part["gpus"]
        ]
    if name == "backend_devices":
        return [
            f"{e['backend']}: " + (", ".join(f"{d['name']} ({d['description']})" for d in e["devices"]) or e["error"])
            for e in part["backends"]
        ]
    if name == "jobs":
        lines = []
        for run in part["runs"]:
            where = f"{run['backend']} {run.get('model', '')} {run.get('device', '')}".strip()
            if "skipped" in run:
                lines.append(f"  {where}: skipped: {run['skipped']}")
            else:
                rate = run["samples_per_s"]
                warmup = f", warm-up {run['warmup_s']:.1f} s" if run["warmup_s"] is not None else ""
                figure = f"{rate:,.0f} samples/s{warmup}" if rate else run["message"][:200]
                lines.append(f"  {where}: {run['status']}, {figure} ({run['steps_done']} steps, {run['wall_s']:.0f} s)")
        for entry in part["speedups"] if isinstance(part["speedups"], list) else []:
            lines.append(f"  speed-up {entry['backend']} {entry['model']} GPU/CPU: {entry.get('text') or entry.get('skipped')}")
        return lines
    if name == "sampler":
        return [
            f"utilisation_max {part['utilisation_max']}, check passed: {part['check']['passed']} ({part['check']['gpu_jobs']} GPU jobs)"
        ]
    if name == "conditions":
        return [
            f"{len(part['jobs'])} record(s); other processes on the GPU: {part['other_processes_on_gpu'] or 'none'}; "
            f"throttle reasons: {part['throttle_reasons'] or 'none'}; contended: {part['contended_jobs'] or 'none'}"
        ]
    if name == "max_batch":
        reference = part["reference"]
        agrees = reference.get("agrees", reference.get("skipped"))
        return [
            f"{part['model']} on {part['device']} under {part['limit']}: {part['found']:,} ({part['probes']} probes); reference agrees: {agrees}"
        ]
    if name == "ceilings":
        return [
            f"{mode}: {c['ceiling_flops'] / 1e12:,.3f} TFLOP/s measured (n={c['at_n']}) vs estimate "
            + (f"{c['estimate_flops'] / 1e12:,.3f} TFLOP/s ({c['fraction_of_estimate']:.0%})" if c["estimate_flops"] else c["estimate_how"])
            for mode, c in part["ceilings"].items()
        ]
    return []


def json_ready(value: Any) -> Any:
    """`value` with NaN and infinities as None and tuples as lists: strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _read(query: Callable[[], Any]) -> Any:
    try:
        return query()
    except Exception:  # a query this GPU, driver or nvidia-ml-py does not support
        return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _values(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values if v is not None]


def _mean(values: Iterable[Any]) -> float | None:
    known = _values(values)
    return statistics.fmean(known) if known else None


def _names(text: str, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{what}: {', '.join(unknown) or 'none given'}; choose from {', '.join(allowed)}")
    return names


def parse_options(argv: Sequence[str] | None = None) -> tuple[Options, Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="the JSON file to write")
    parser.add_argument("--cpu-only", action="store_true", help="only what needs no GPU: CPU jobs, CPU matmuls (a dry run)")
    parser.add_argument("--models", default=",".join(MODELS), type=lambda t: _names(t, MODELS, "models"), help="comma-separated")
    parser.add_argument("--backends", default=",".join(BACKENDS), type=lambda t: _names(t, BACKENDS, "backends"), help="comma-separated")
    parser.add_argument("--steps", type=int, default=Options.steps, help="steps of each CPU job (default %(default)s)")
    parser.add_argument("--gpu-steps", type=int, default=Options.gpu_steps, help="steps of each GPU job (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=Options.batch_size)
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="the whole run's time limit (default %(default)s s)")
    parser.add_argument("--max-batch-model", default="cnn", choices=MODELS)
    parser.add_argument(
        "--max-batch-s", type=float, default=None, help=f"the search's time budget (default {MAX_BATCH_S:g} s; 0 with --cpu-only)"
    )
    parser.add_argument(
        "--memory-limit-gib", type=float, default=None, help="max_batch's cap on GPU memory (default 4) or host budget (CPU, 1)"
    )
    args = parser.parse_args(argv)
    options = Options(
        cpu_only=args.cpu_only,
        models=args.models,
        backends=args.backends,
        steps=args.steps,
        gpu_steps=args.gpu_steps,
        batch_size=args.batch_size,
        budget_s=args.budget_s,
        max_batch_model=args.max_batch_model,
        max_batch_s=args.max_batch_s,
        memory_limit_gib=args.memory_limit_gib,
    )
    return options, args.out


def main(argv: Sequence[str] | None = None) -> int:
    """Run every part, write the JSON, print the summary; exit code 1 when a part ended in an error."""
    options, out = parse_options(argv)
    began = time.monotonic()
    parts = json_ready(check(options))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(parts, indent=1, allow_nan=False) + "\n")
    try:
        lines = summary(parts)
    except Exception as exc:  # the JSON is written: a summary that cannot be made must not hide it
        lines = [f"(no summary: {exc!r}; {out} holds every part)"]
    for line in lines:
        print(line)
    print(f"wrote {out} in {time.monotonic() - began:.0f} s" + (" (--cpu-only)" if options.cpu_only else ""), flush=True)
    code = 1 if any("error" in part for part in parts.values()) else 0
    if any(thread.name.startswith(f"{NAME}-") and thread.is_alive() for thread in threading.enumerate()):
        os._exit(code)  # a part still hangs past its limit: its children end with this process (their control pipe closes)
    return code


if __name__ == "__main__":
    if sys.argv[1:2] == [CEILINGS_CHILD]:
        harness.child_main(_ceilings_child)
    else:
        sys.exit(main())
