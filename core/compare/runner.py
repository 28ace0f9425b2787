"""Device comparison, headless: one job on several devices or strategies, side by side.

Every target trains the same model, data, global batch size, steps and seed,
one after another, so the rows differ only in where the job ran. Speed-ups are
relative to a baseline row the user picks and can change without re-running.
"""

from __future__ import annotations

import math
import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from core.config import MAX_WORKERS, ConfigError, RunConfig, normalize_device_name
from core.results import RunResult, RunStatus, StepRecord
from core.training.callbacks import RunCallback
from core.training.flops import FlopsCounter, achieved_flops, cpu_flags, peak_flops_for_devices

TARGET_FORMS = (
    "'CPU:0', 'GPU:1', 'one-device:GPU:0', 'mirrored' (all GPUs), 'mirrored:CPU:0,CPU:1', 'default', "
    "'multi-worker:2', 'tpu:local' or 'tpu:grpc://host:port'; separate targets with ';'"
)
DEVICE_KINDS = ("CPU", "GPU", "TPU")

SMALL_GPU_STEP_MS = 1.0
SMALL_MODEL_PARAMS = 1_000_000
SPREAD_LIMIT = 0.3
MIN_STEADY_TIMINGS = 20
JOB_KEYS = ("model", "dataset", "batch_size", "steps", "epochs", "precision", "xla", "steps_per_call", "optimizer", "learning_rate", "seed")

OnProgress = Callable[[int, int, str], None]
OnIndexedSteps = Callable[[int, Sequence[StepRecord]], None]
OnResult = Callable[[int, RunResult], None]


@dataclass(frozen=True)
class CompareTarget:
    """Where one row of a comparison runs: a strategy and its devices (plus workers or TPU address)."""

    label: str
    strategy: str
    devices: tuple[str, ...] = ()
    workers: int | None = None
    tpu_address: str = ""

    def config_for(self, base: RunConfig) -> RunConfig:
        """`base` moved to this target (raises ConfigError when the combination is invalid)."""
        changes: dict[str, Any] = {"strategy": self.strategy, "devices": self.devices}
        if self.workers is not None:
            changes["workers"] = self.workers
        if self.tpu_address:
            changes["tpu_address"] = self.tpu_address
        return base.with_changes(**changes)


def parse_targets(text: str) -> list[CompareTarget]:
    """'CPU:0;mirrored:CPU:0,CPU:1' -> targets; ConfigError names the bad part and the allowed forms."""
    parts = [part.strip() for part in re.split(r"[;\n]", text or "") if part.strip()]
    if not parts:
        raise ConfigError("targets", text, "one or more of " + TARGET_FORMS)
    return [parse_target(part) for part in parts]


def parse_target(text: str) -> CompareTarget:
    """One target such as 'GPU:0', 'mirrored:CPU:0,CPU:1', 'multi-worker:2' or 'tpu:local'."""
    spec = text.strip()
    word, _, rest = spec.partition(":")
    word, rest = word.strip().lower(), rest.strip()
    if word == "default" and not rest:
        return CompareTarget("default", "default")
    if word == "mirrored":
        devices = _device_list(rest, spec) if rest else ()
        return CompareTarget("mirrored:" + ",".join(devices) if devices else "mirrored", "mirrored", devices)
    if word == "one-device" and rest:
        devices = _device_list(rest, spec)
        if len(devices) == 1:
            return CompareTarget(devices[0], "one-device", devices)
    if word == "multi-worker":
        if not rest:
            return CompareTarget("multi-worker", "multi-worker")
        if rest.isdigit() and 1 <= int(rest) <= MAX_WORKERS:
            return CompareTarget(f"multi-worker:{int(rest)}", "multi-worker", workers=int(rest))
    if word == "tpu" and rest and not rest.isdigit():
        return CompareTarget(f"tpu:{rest}", "tpu", tpu_address=rest)
    if word.upper() in DEVICE_KINDS and rest.isdigit():
        device = normalize_device_name(spec)
        return CompareTarget(device, "one-device", (device,))
    raise ConfigError("targets", spec, TARGET_FORMS)


def _device_list(text: str, spec: str) -> tuple[str, ...]:
    names = [name.strip() for name in text.split(",")]
    if not all(re.fullmatch(r"[A-Za-z]+:\d+", name) and name.split(":")[0].upper() in DEVICE_KINDS for name in names):
        raise ConfigError("targets", spec, "device lists such as 'mirrored:CPU:0,CPU:1' or 'mirrored:GPU:0,GPU:1'")
    return tuple(normalize_device_name(name) for name in names)


def progress_line(index: int, total: int, label: str) -> str:
    """'run 2 of 3: GPU:0' for the 0-based `index`."""
    return f"run {index + 1} of {total}: {label}"


@dataclass(frozen=True)
class CompareRow:
    """One target's headline figures, with its speed-up against the comparison's baseline.

    speedup = samples/s of this row / samples/s of the baseline row.
    scaling_efficiency = speedup / (replicas / baseline replicas): 1.0 means
    N replicas ran N times as fast as the baseline's. It is given only when
    the row and the baseline ran on the same kind of device (CPU vs CPU, GPU
    vs GPU); across kinds it would not measure scaling. Both are None when
    either row has no steady-state speed. FLOP/s figures are None when the
    FLOPs per step or the device's peak are unknown.
    """

    label: str
    strategy: str
    devices: tuple[str, ...]
    replicas: int
    status: str
    warmup_s: float | None
    step_time_median_ms: float | None
    step_time_p95_ms: float | None
    spread: float | None
    samples_per_s: float | None
    speedup: float | None
    scaling_efficiency: float | None
    final_loss: float | None
    peak_memory_bytes: int | None
    achieved_flops: float | None
    peak_flops: float | None
    fraction_of_peak: float | None
    peak_flops_how: str
    result: RunResult = field(compare=False, repr=False)

    @property
    def device_kinds(self) -> frozenset[str]:
        return frozenset(d.split(":")[0] for d in self.devices)


@dataclass(frozen=True)
class Comparison:
    """Rows in target order, the baseline row's index, and fairness warnings in plain words."""

    rows: tuple[CompareRow, ...]
    baseline_index: int = 0
    warnings: tuple[str, ...] = ()
    flops_per_step: float | None = None
    flops_method: str = ""
    model_params: int | None = None

    @property
    def baseline(self) -> CompareRow | None:
        return self.rows[self.baseline_index] if self.rows else None

    def with_baseline(self, index: int) -> Comparison:
        """The same runs with speed-ups against row `index` (nothing is re-run)."""
        _check_baseline(index, len(self.rows))
        changed = replace(self, rows=_with_speedups(self.rows, index), baseline_index=index)
        return replace(changed, warnings=tuple(fairness_warnings(changed)))

    def to_rows_dict(self) -> list[dict[str, Any]]:
        """JSON-ready rows: the run's summary plus the comparison's own figures."""
        return [
            {
                **row.result.summary(),
                "label": row.label,
                "baseline": index == self.baseline_index,
                "speedup": row.speedup,
                "scaling_efficiency": row.scaling_efficiency,
                "flops_per_step": self.flops_per_step,
                "achieved_flops": row.achieved_flops,
                "peak_flops": row.peak_flops,
                "fraction_of_peak": row.fraction_of_peak,
            }
            for index, row in enumerate(self.rows)
        ]


def run_comparison(
    base: RunConfig,
    targets: Sequence[CompareTarget],
    baseline_index: int = 0,
    on_progress: OnProgress | None = None,
    on_steps: OnIndexedSteps | None = None,
    stop_event: threading.Event | None = None,
    on_result: OnResult | None = None,
    callbacks: Sequence[RunCallback] = (),
) -> Comparison:
    """Run `base` on each target in turn and put the results side by side.

    Callbacks get the target's 0-based index: on_progress(index, total,
    label) before a run, on_steps(index, records) while it trains,
    on_result(index, result) after every run that started (save it to the
    history there). Setting `stop_event` ends the current run and skips the
    rest (rows with status "skipped"). A target that cannot run here (an
    invalid config, a missing device) becomes a failed row with the reason,
    and the others still run.
    """
    targets = list(targets)
    if not targets:
        raise ConfigError("targets", [], "one or more of " + TARGET_FORMS)
    _check_baseline(baseline_index, len(targets))
    stop_event = stop_event or threading.Event()
    counter = FlopsCounter()
    entries: list[tuple[str, RunResult]] = []
    for index, target in enumerate(targets):
        if stop_event.is_set():
            entries.append((target.label, _unrun(base, target, RunStatus.SKIPPED, "Not run: the comparison was stopped first.")))
            continue
        if on_progress is not None:
            on_progress(index, len(targets), target.label)
        sink = None if on_steps is None else (lambda records, i=index: on_steps(i, records))
        try:
            result = _run_target(base, target, sink, stop_event, [counter, *callbacks])
        except Exception as exc:  # one target that cannot run must not lose the others' results
            from core.training.engine import explain_failure

            entries.append((target.label, _unrun(base, target, RunStatus.FAILED, explain_failure(exc))))
            continue
        entries.append((target.label, result))
        if on_result is not None:
            on_result(index, result)
    return compare_results(entries, baseline_index, counter.flops, counter.method, counter.params)


def _run_target(base, target, on_steps, stop_event, callbacks) -> RunResult:
    from core.runner import run_training

    return run_training(target.config_for(base), on_steps, stop_event, callbacks)


def sweep_targets(device_names: Sequence[str], counts: Sequence[int]) -> list[CompareTarget]:
    """One device alone (one-device strategy), then Mirrored over the first N for each N > 1."""
    targets = []
    for count in counts:
        devices = tuple(device_names[:count])
        if count == 1:
            targets.append(CompareTarget(devices[0], "one-device", devices))
        else:
            targets.append(CompareTarget(f"mirrored x{count}: " + ",".join(devices), "mirrored", devices))
    return targets


def scaling_sweep(
    base: RunConfig,
    device_kind: str = "CPU",
    counts: Sequence[int] | None = None,
    baseline_index: int = 0,
    on_progress: OnProgress | None = None,
    on_steps: OnIndexedSteps | None = None,
    stop_event: threading.Event | None = None,
    on_result: OnResult | None = None,
    callbacks: Sequence[RunCallback] = (),
) -> Comparison:
    """The same job on 1, 2, ..., N devices of one kind (strong scaling: the global batch stays fixed).

    The batch size must divide by every count; a count it does not divide
    becomes a failed row saying so.
    """
    kind = str(device_kind).upper()
    if kind not in ("CPU", "GPU"):
        raise ConfigError("device_kind", device_kind, "CPU or GPU")
    import tensorflow as tf

    names = [d.name.split("device:")[-1] for d in tf.config.list_logical_devices(kind)]
    if not names:
        raise ConfigError("device_kind", device_kind, "a kind TensorFlow sees here (no GPU found)")
    counts = list(range(1, len(names) + 1)) if counts is None else list(counts)
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= len(names):
            raise ConfigError("counts", count, f"whole numbers from 1 to {len(names)} (the {kind} devices here)")
    return run_comparison(base, sweep_targets(names, counts), baseline_index, on_progress, on_steps, stop_event, on_result, callbacks)


def compare_results(
    entries: Sequence[tuple[str, RunResult]],
    baseline_index: int = 0,
    flops_per_step: float | None = None,
    flops_method: str = "",
    model_params: int | None = None,
) -> Comparison:
    """A comparison of finished runs (labelled), e.g. picked from the history.

    Device peaks are looked up only for runs measured on this machine.
    """
    _check_baseline(baseline_index, len(entries))
    rows = tuple(_row(label, result, flops_per_step) for label, result in entries)
    comparison = Comparison(_with_speedups(rows, baseline_index), baseline_index, (), flops_per_step, flops_method, model_params)
    return replace(comparison, warnings=tuple(fairness_warnings(comparison)))


def _check_baseline(index: int, count: int) -> None:
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < max(count, 1):
        raise ConfigError("baseline", index, f"a row number from 0 to {max(count - 1, 0)}")


def _unrun(base: RunConfig, target: CompareTarget, status: str, message: str) -> RunResult:
    """The result of a target that never trained: its intended config and why it did not run."""
    config = base.to_dict()
    config.update(strategy=target.strategy, devices=list(target.devices))
    if target.workers is not None:
        config["workers"] = target.workers
    if target.tpu_address:
        config["tpu_address"] = target.tpu_address
    return RunResult(status=status, config=config, message=message)


def _row(label: str, result: RunResult, flops_per_step: float | None) -> CompareRow:
    devices = tuple(result.environment.get("devices") or result.config.get("devices") or ())
    achieved = achieved_flops(result, flops_per_step)
    peak, how = _peak(result, devices) if result.samples_per_s else (None, "no steady-state steps")
    return CompareRow(
        label=label,
        strategy=str(result.config.get("strategy", "")),
        devices=devices,
        replicas=result.replicas,
        status=result.status,
        warmup_s=result.warmup_s,
        step_time_median_ms=result.step_time_median_ms,
        step_time_p95_ms=result.step_time_p95_ms,
        spread=result.step_time_spread,
        samples_per_s=result.samples_per_s,
        speedup=None,
        scaling_efficiency=None,
        final_loss=result.final_loss,
        peak_memory_bytes=result.peak_memory_bytes,
        achieved_flops=achieved,
        peak_flops=peak,
        fraction_of_peak=achieved / peak if achieved is not None and peak else None,
        peak_flops_how=how,
        result=result,
    )


def _peak(result: RunResult, devices: tuple[str, ...]) -> tuple[float | None, str]:
    host = result.environment.get("host")
    if host and host != socket.gethostname():
        return None, f"measured on another machine ({host})"
    return peak_flops_for_devices(devices, str(result.config.get("precision", "off")))


def _with_speedups(rows: Sequence[CompareRow], baseline_index: int) -> tuple[CompareRow, ...]:
    base = rows[baseline_index] if rows else None
    updated = []
    for row in rows:
        speedup = efficiency = None
        if base is not None and row.samples_per_s and base.samples_per_s:
            speedup = row.samples_per_s / base.samples_per_s
            if row.device_kinds and row.device_kinds == base.device_kinds and row.replicas and base.replicas:
                efficiency = speedup / (row.replicas / base.replicas)
        updated.append(replace(row, speedup=speedup, scaling_efficiency=efficiency))
    return tuple(updated)


def fairness_warnings(comparison: Comparison) -> list[str]:
    """What makes this comparison less fair than it looks, in words the user can act on."""
    notes: list[str] = []
    for row in comparison.rows:
        notes.extend(_row_warnings(row, comparison.model_params))
    notes.extend(_mismatch_warnings(comparison.rows))
    base = comparison.baseline
    if base is not None and base.samples_per_s is None and len(comparison.rows) > 1:
        notes.append(f"The baseline {base.label} has no steady-state speed, so there are no speed-ups: pick another baseline.")
    return notes


def _row_warnings(row: CompareRow, model_params: int | None) -> list[str]:
    result, label = row.result, row.label
    config = result.config
    if row.status == RunStatus.SKIPPED:
        return [f"{label} was not run: the comparison was stopped first."]
    if row.status == RunStatus.FAILED:
        return [f"{label} failed: {result.message or 'no reason recorded'}"]
    notes = []
    if row.status == RunStatus.STOPPED:
        planned = f" of {config['steps']}" if config.get("epochs") is None and config.get("steps") else ""
        notes.append(f"{label} stopped early, after {result.steps_done}{planned} steps: its figures rest on fewer steps than the others'.")
    elif row.status != RunStatus.COMPLETED:
        notes.append(f"{label} ended with status {row.status!r}: {result.message}")
    precision = config.get("precision")
    if "CPU" in row.device_kinds and precision == "float16":
        notes.append(
            f"{label} runs float16 on a CPU, which has no fast float16 math: this row is far slower than float32 and says little about the device."
        )
    if "CPU" in row.device_kinds and precision == "bfloat16" and not cpu_flags() & {"avx512_bf16", "amx_bf16"}:
        notes.append(f"{label} runs bfloat16 on a CPU without AVX-512 BF16 or AMX: it is emulated, so this row understates the CPU.")
    if "GPU" in row.device_kinds and row.step_time_median_ms is not None:
        too_fast = row.step_time_median_ms < SMALL_GPU_STEP_MS
        too_small = model_params is not None and model_params < SMALL_MODEL_PARAMS
        if too_fast or too_small:
            size = f"{model_params:,} parameters, " if model_params is not None else ""
            notes.append(
                f"{label}: the {_model_title(config.get('model'))} is too small to load a GPU "
                f"({size}{row.step_time_median_ms:.2f} ms per step): per-step overhead dominates, so speed-ups "
                "understate the GPU. Try the ResNet or Transformer, or a larger batch."
            )
    if row.spread is not None and row.spread > SPREAD_LIMIT:
        notes.append(f"{label}: step times vary by {row.spread:.0%} (p10–p90 / median); re-run with more steps.")
    timings = _steady_timings(result)
    if row.samples_per_s is not None and timings < MIN_STEADY_TIMINGS:
        notes.append(
            f"{label}: only {timings} steady-state step timings after warm-up; use at least {MIN_STEADY_TIMINGS} "
            "(more steps, or fewer steps per call) for a stable median."
        )
    if row.strategy == "mirrored" and len(row.devices) > 1 and row.device_kinds == {"CPU"}:
        notes.append(
            f"{label}: its logical CPU devices share the same physical cores, so this row measures the strategy "
            "on one CPU, not more hardware: do not read its speed-up as multi-device scaling."
        )
    return notes


def _model_title(name: Any) -> str:
    from core.workloads.models import MODELS

    return MODELS[name].title if name in MODELS else str(name or "model")


def _steady_timings(result: RunResult) -> int:
    """Independent step-time measurements after warm-up (one per call of the training function)."""
    per_call = max(1, int(result.config.get("steps_per_call") or 1))
    return math.ceil(max(0, result.steps_done - result.warmup_steps) / per_call)


def _mismatch_warnings(rows: Sequence[CompareRow]) -> list[str]:
    ran = [row.result for row in rows if row.status != RunStatus.SKIPPED]
    if len(ran) < 2:
        return []
    differing = []
    for key in JOB_KEYS:
        values = list(dict.fromkeys(str(result.config.get(key)) for result in ran))
        if len(values) > 1:
            differing.append(f"{key} ({', '.join(values)})")
    notes = []
    if differing:
        notes.append(f"The runs differ in {', '.join(differing)}: they are different jobs, so speed-ups mix the device with the job.")
    hosts = list(dict.fromkeys(result.environment.get("host") for result in ran if result.environment.get("host")))
    if len(hosts) > 1:
        notes.append(f"The runs come from different machines ({', '.join(hosts)}).")
    return notes


COLUMNS = (
    "target",
    "replicas",
    "warm-up s",
    "median ms",
    "p95 ms",
    "samples/s",
    "speed-up",
    "efficiency",
    "final loss",
    "peak mem",
    "% of peak",
)


def format_table(comparison: Comparison) -> str:
    """A plain-text table for the CLI, the baseline marked with '*', then the FLOPs per step.

    Warnings are not part of the table: print `comparison.warnings` after it.
    """
    body = [_cells(row, index == comparison.baseline_index) for index, row in enumerate(comparison.rows)]
    widths = [max(len(line[i]) for line in [COLUMNS, *body]) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in enumerate(zip(line, widths, strict=True)))
        for line in [COLUMNS, *body]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines.append("* baseline for speed-ups")
    if comparison.flops_per_step is not None:
        lines.append(f"FLOPs per training step: {comparison.flops_per_step:.3g} ({comparison.flops_method})")
    return "\n".join(line.rstrip() for line in lines)


def _cells(row: CompareRow, is_baseline: bool) -> tuple[str, ...]:
    target = row.label + (" *" if is_baseline else "") + ("" if row.status == RunStatus.COMPLETED else f" [{row.status}]")
    return (
        target,
        str(row.replicas) if row.status not in (RunStatus.FAILED, RunStatus.SKIPPED) else "-",
        _fmt(row.warmup_s, "{:.2f}"),
        _fmt(row.step_time_median_ms, "{:.2f}"),
        _fmt(row.step_time_p95_ms, "{:.2f}"),
        _fmt(row.samples_per_s, "{:,.0f}"),
        _fmt(row.speedup, "{:.2f}x"),
        _fmt(row.scaling_efficiency, "{:.0%}"),
        _fmt(row.final_loss, "{:.4f}"),
        _format_bytes(row.peak_memory_bytes),
        _fmt(row.fraction_of_peak, "{:.1%}"),
    )


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def _format_bytes(count: int | None) -> str:
    if count is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"
