"""Measured ceilings of this machine's devices: matrix-product FLOP/s per precision and memory bandwidth.

A datasheet or ISA estimate cannot know a CPU's clock under vector load or how
well TensorFlow's kernels use it, so every local device TensorFlow lists (the
CPU, each GPU; TPUs only if TensorFlow lists them without initialising one) is
measured: a chain of square matrix products in each precision the device has,
and an in-place streaming add. Timing is honest: tf.function, warmed up, each
call ended by reading a scalar back to the host, the median of repeats.

Anything may hang or take its process down (a driver, a GPU another process
holds), so the measurement runs in a child Python process (`python -m
core.machine.peaks_child`, run by `core.child_process.Child`) that sends one
message per figure and is killed with its process group when its time runs
out; what it measured by then is kept.

Results are cached in a JSON file per machine (CPU model, GPU names) and
TensorFlow version; the caller names the file (`core.diagnosis.ceilings` puts it
beside the history) and fills the datasheet estimates (`with_estimates`),
which this layer may not compute.

A ceiling is only as good as the quiet it was measured in. Each measurement
records its conditions (`core.machine.conditions`, over the whole measurement):
a contended one is shown but never cached, and gives no `ceiling` to divide by.
A figure the caller's checks find implausible (`DevicePeaks.implausible`: far
under the estimate, bfloat16 faster than float32 without bfloat16 units) is
shown with its reason, never cached and never used as a ceiling either.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from core.child_process import STOPPED, TIMEOUT, Child, exit_description
from core.files import write_atomically
from core.formatting import utc_now
from core.machine.conditions import ConditionsSampler
from core.tensorflow_import import installed_engine, tensorflow_installed

MATMUL_SIZE = {"CPU": 4096, "GPU": 8192, "TPU": 8192}
"""Side of the square matrices: 4096 on CPUs, the usual yardstick (Eigen on a 2-core EPYC runs 1024-2048 about
a third faster: the ceiling is the large-matrix rate); 8192 on accelerators, which need more work per kernel."""
CALIBRATION_SIZE = 1024
TARGET_CALL_S = 0.25
"""Matrix products are chained (each one's result feeds the next) until one call takes about this long."""
MAX_CALL_S = 30.0
"""A device so slow that one product at full size would take longer is measured at a smaller size (said in `method`)."""
LONG_CALL_S = 2.0
MAX_CHAIN = 64
STREAM_ELEMENTS = 32 * 2**20
"""float32 elements per array of the bandwidth test: 128 MiB each, 256 MiB in all, far beyond any cache."""
STREAM_BYTES_PER_ELEMENT = 12
"""`v += d` in place reads v and d and writes v: 3 x 4 bytes per element (STREAM "add" counting)."""
TIMEOUT_S = 300.0
"""Generous: on 2 cores shared with other work a full measurement has taken 2-3 minutes."""
PRECISIONS = {"CPU": ("float32", "bfloat16"), "GPU": ("float32", "bfloat16", "float16"), "TPU": ("float32", "bfloat16")}
_NO_CPU_FLOAT16 = "not measured: CPUs have no float16 matrix units (TensorFlow converts every element), so it is no setting for a CPU"
NOT_MEASURED = {"CPU": {"float16": _NO_CPU_FLOAT16}}
RUN_PRECISION_KEYS = {"off": "float32", "float16": "float16", "bfloat16": "bfloat16"}
CACHE_FILE = "peaks.json"
CACHE_VERSION = 1

Estimator = Callable[["DevicePeaks"], tuple[dict[str, float], str]]
Judge = Callable[["PeaksReport"], "PeaksReport"]


@dataclass(frozen=True)
class DevicePeaks:
    """One device's measured ceilings, and the datasheet/ISA estimate shown beside them (never instead)."""

    device: str  # TensorFlow's short name: "CPU:0", "GPU:1"
    kind: str  # "CPU" | "GPU" | "TPU"
    name: str  # the model: "AMD EPYC 7B13", "NVIDIA H100 80GB HBM3"
    matmul_flops: dict[str, float] = field(default_factory=dict)  # precision ("float32", ...) -> FLOP/s
    bandwidth_bytes_per_s: float | None = None
    not_measured: dict[str, str] = field(default_factory=dict)  # precision or "bandwidth" -> why not
    method: str = ""
    measured_at: str = ""
    estimate_flops: dict[str, float] = field(default_factory=dict)  # precision -> FLOP/s, filled by `with_estimates`
    estimate_method: str = ""
    implausible: dict[str, str] = field(default_factory=dict)  # precision -> why the figure can not be right (never a ceiling)


@dataclass(frozen=True)
class PeaksReport:
    """Every device's ceilings, the machine they were measured on, and what went wrong (if anything)."""

    machine: dict[str, Any]  # {"cpu": model, "tensorflow": version, "gpus": [names]}
    devices: tuple[DevicePeaks, ...] = ()
    measured_at: str = ""
    elapsed_s: float = 0.0
    error: str = ""  # the measurement as a whole: a time-out, a child that died
    cached: bool = False
    conditions: dict[str, Any] = field(default_factory=dict)  # core.machine.conditions.Conditions.to_dict() of the measurement

    @property
    def contended(self) -> bool:
        """True when other work on the machine made this measurement low: shown, never cached, never a ceiling."""
        return bool(self.conditions.get("contended"))

    @property
    def implausible(self) -> bool:
        """True when a figure of it can not be right (see `DevicePeaks.implausible`): shown, never cached."""
        return any(device.implausible for device in self.devices)

    @property
    def trusted(self) -> bool:
        """Measured something, uncontended, every figure plausible: fit to cache and to divide by."""
        return bool(self.devices) and not self.contended and not self.implausible

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PeaksReport:
        devices = tuple(
            DevicePeaks(**{k: v for k, v in d.items() if k in DevicePeaks.__dataclass_fields__}) for d in data.get("devices", ())
        )
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "devices"}
        return cls(**known, devices=devices)

    @property
    def measured(self) -> bool:
        """False for a report of estimates alone (`core.diagnosis.ceilings.cached_or_estimated` before any measurement)."""
        return any(device.matmul_flops or device.bandwidth_bytes_per_s is not None for device in self.devices)

    def device(self, name: str) -> DevicePeaks | None:
        return next((d for d in self.devices if d.device == name), None)

    def ceiling(self, device_names: Sequence[str], precision: str = "off") -> tuple[float | None, str]:
        """(measured matmul FLOP/s of the devices one run used, how), or (None, why not).

        `precision` is the run's ("off", "bfloat16", "float16"). GPUs add up;
        logical CPU devices ("CPU:0", "CPU:1") share the one physical CPU
        measured as CPU:0, so CPUs count once. A contended measurement or an
        implausible figure gives (None, why).
        """
        key = RUN_PRECISION_KEYS.get(precision, precision)
        if self.contended:
            return None, f"the ceilings were measured while {self.conditions.get('reason', 'the machine was busy')}: not a ceiling"
        kinds = {name.split(":")[0] for name in device_names}
        if len(kinds) != 1:
            return None, "no single device kind to look up"
        kind = kinds.pop()
        wanted = [f"{kind}:0"] if kind == "CPU" else list(device_names)
        total = 0.0
        for name in wanted:
            peaks = self.device(name)
            if peaks is None:
                return None, f"{name} was not measured"
            if key not in peaks.matmul_flops:
                return None, f"{name} {key}: {peaks.not_measured.get(key, 'not measured')}"
            if key in peaks.implausible:
                return None, f"{name} {key}: implausible ({peaks.implausible[key]})"
            total += peaks.matmul_flops[key]
        first = self.device(wanted[0])
        how = f"measured {key} matmul on {first.name if first else wanted[0]}"
        return total, how if len(wanted) == 1 else f"{len(wanted)} x {how}"


def run_precision_key(precision: str) -> str:
    """The ceiling key for a run's precision: "off" -> "float32"."""
    return RUN_PRECISION_KEYS.get(precision, precision)


def tensorflow_version() -> str:
    """The installed TensorFlow's version, without importing it when it is not imported yet."""
    if sys.modules.get("tensorflow") is not None:
        return str(sys.modules["tensorflow"].__version__)
    if not tensorflow_installed():
        return ""
    from importlib import metadata

    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tf-nightly"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return ""


def machine_key() -> dict[str, Any]:
    """What a cached measurement must match: the CPU model and the TensorFlow version ("" without it; GPUs are matched apart).

    `engine` says what measured it (TensorFlow, or JAX or PyTorch where TensorFlow is not installed).
    """
    from core.machine.cpu import cpu_info

    return {"cpu": cpu_info().get("Model", ""), "tensorflow": tensorflow_version(), "engine": installed_engine()}


def measure_peaks(
    timeout_s: float = TIMEOUT_S, stop_event: threading.Event | None = None, on_stage: Callable[[str], None] | None = None
) -> PeaksReport:
    """Measure every local device in a child process killed after `timeout_s` or when `stop_event` is set; never raises.

    `on_stage` hears what the child is doing ("measuring CPU:0 float32 matmul"),
    from the calling thread. A time-out, a stop or a child that dies keeps the
    devices measured until then and says what happened in `error`.
    """
    key, start = machine_key(), time.monotonic()
    engine = key["engine"]
    if not engine:
        return PeaksReport(key, error="Nothing to measure with: TensorFlow, JAX and PyTorch are all missing (pip install tensorflow).")
    try:
        child = Child.start("core.machine.peaks_child", [engine], what="measuring the ceilings", limit_s=timeout_s, stop_event=stop_event)
    except OSError as exc:
        return PeaksReport(key, error=f"Could not start the measuring process ({exc}).")
    messages: list[dict[str, Any]] = []
    said = ""
    with child:  # leaving early (Ctrl-C, a raising on_stage) kills it
        for message in child.messages():
            messages.append(message)
            if on_stage is not None and message.get("stage", said) != said:
                on_stage(message["stage"])
            said = message.get("stage", said)
    end = child.wait()
    devices, stage, done = _collect(messages)
    while_ = stage or f"importing {engine}"
    error = ""
    if end.how == TIMEOUT:
        error = f"The measurement did not finish within {timeout_s:g} s (stopped while {while_}); the devices measured by then are kept."
    elif end.how == STOPPED:
        error = f"The measurement was stopped while {while_}; the devices measured by then are kept."
    elif not done:
        last = child.last_words() or exit_description(end.returncode)
        error = f"The measuring process ended early ({exit_description(end.returncode)}, while {while_}): {last}"
    key["gpus"] = [d.name for d in devices if d.kind == "GPU"]
    return PeaksReport(key, tuple(devices), utc_now(), time.monotonic() - start, error)


def _collect(lines: Sequence[Mapping[str, Any]]) -> tuple[list[DevicePeaks], str, bool]:
    """The child's messages as DevicePeaks, the stage it was in last, and whether it finished."""
    devices: dict[str, DevicePeaks] = {}
    stage, done = "", False
    for line in lines:
        what, name = line.get("what"), line.get("device", "")
        stage = line.get("stage", stage)
        if what == "device":
            devices[name] = DevicePeaks(name, line["kind"], line["name"], method=line["method"], measured_at=utc_now())
        elif what in ("matmul", "bandwidth") and name in devices:
            devices[name] = _with_figure(devices[name], line)
        elif what == "done":
            done = True
    return list(devices.values()), stage, done


def _with_figure(peaks: DevicePeaks, line: Mapping[str, Any]) -> DevicePeaks:
    label = line.get("precision", "bandwidth")
    if line.get("error"):
        return replace(peaks, not_measured={**peaks.not_measured, label: line["error"]})
    method = f"{peaks.method}; {line['how']}"
    if line["what"] == "bandwidth":
        return replace(peaks, bandwidth_bytes_per_s=line["value"], method=method)
    return replace(peaks, matmul_flops={**peaks.matmul_flops, label: line["value"]}, method=method)


def load_cached(path: Path, gpu_names: Sequence[str] | None = None) -> PeaksReport | None:
    """The cached measurement for this machine and TensorFlow version, or None.

    `gpu_names` (the GPUs the device list shows now) must match the measured
    ones when given; without it, the CPU model and TensorFlow version decide.
    """
    key = machine_key()
    for entry in reversed(_read_cache(path)):
        machine = entry.get("machine", {})
        if machine.get("cpu") != key["cpu"] or machine.get("tensorflow") != key["tensorflow"]:
            continue
        if gpu_names is not None and [_norm(n) for n in machine.get("gpus", [])] != [_norm(n) for n in gpu_names]:
            continue
        return replace(PeaksReport.from_dict(entry), cached=True)
    return None


def save(path: Path, report: PeaksReport) -> None:
    """Keep `report` in the cache, replacing the entry for the same machine; other machines' entries stay."""
    entries = [e for e in _read_cache(path) if e.get("machine") != report.machine]
    data = replace(report, cached=False).to_dict()
    for device in data["devices"]:
        device["estimate_flops"], device["estimate_method"] = {}, ""  # estimates are recomputed, never cached
    entries.append(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda file: json.dump({"version": CACHE_VERSION, "entries": entries}, file, indent=1))


def _read_cache(path: Path) -> list[dict[str, Any]]:
    """The cache's entries; an unreadable file is moved aside (kept) and counts as empty."""
    if not os.path.exists(path):  # os.path: False, not OSError, for a path too long to look at (DEVICE_LAB_DATA_DIR)
        return []
    try:
        data = json.loads(path.read_text())
        entries = data["entries"] if data.get("version") == CACHE_VERSION else []
        return [e for e in entries if isinstance(e, dict)]
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        os.replace(path, path.with_name(f"{path.name}.unreadable-{int(time.time())}"))
        return []


def _norm(name: str) -> str:
    return " ".join(str(name).split()).casefold()


def with_estimates(report: PeaksReport, estimate: Estimator) -> PeaksReport:
    """The report with each device's datasheet/ISA estimate filled in by `estimate(device)`; a failing estimate says why."""
    devices = []
    for device in report.devices:
        try:
            flops, how = estimate(device)
        except Exception as exc:  # an estimate is a side note: it must never hide the measurement
            flops, how = {}, f"not estimated: {type(exc).__name__}: {exc}"
        devices.append(replace(device, estimate_flops=flops, estimate_method=how))
    return replace(report, devices=tuple(devices))


def peaks(
    path: Path,
    remeasure: bool = False,
    gpu_names: Sequence[str] | None = None,
    timeout_s: float = TIMEOUT_S,
    stop_event: threading.Event | None = None,
    on_stage: Callable[[str], None] | None = None,
    judge: Judge | None = None,
) -> PeaksReport:
    """The cached ceilings, or (none cached, or `remeasure`) a fresh measurement with its conditions.

    `judge` fills in estimates and marks implausible figures before the cache
    decision. A fresh measurement is cached when it is `trusted`; a contended
    or implausible one is returned to be shown, the cache left as it was.
    """
    if not remeasure:
        cached = load_cached(path, gpu_names)
        if cached is not None:
            return judge(cached) if judge is not None else cached
    sampler = ConditionsSampler()
    sampler.start()
    report = measure_peaks(timeout_s, stop_event, on_stage)
    sampler.stop()  # the child has been waited for: its CPU time counts as this measurement's own
    conditions = sampler.conditions()
    report = replace(report, conditions=conditions.to_dict() if conditions is not None else {})
    report = judge(report) if judge is not None else report
    if report.trusted:
        save(path, report)
    return report
