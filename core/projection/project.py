"""A projection: the model's step costs (`step_costs`) run through the calibrated step-time model (`model`) on one catalogue device.

Per batch (the run's, and x4, x16, x64 where they fit the device's memory): the projected step
time and samples/s as a low-high range, the regime and why, the memory fit, FLOPs and bytes per
step; with the measured points it rests on and a `caveats` list saying where the model is outside
what they cover. Never a measurement: it is labelled as a projection and never stored.
"""

from __future__ import annotations

import math
from typing import Any

from core.backends.job_data import batches_per_epoch
from core.config import MAX_BATCH_SIZE, RunConfig
from core.errors import ExplainedError
from core.formatting import format_bytes
from core.projection import calibration
from core.projection.catalogue import PRECISION_NAMES, Accelerator
from core.projection.catalogue import ceiling as device_ceiling
from core.projection.measured_here import MeasuredHere, latest_measured
from core.projection.model import EAGER_BACKENDS, KERNEL_S, KERNEL_SOURCE, Constants, Costs, Target, spread, step_parts
from core.projection.step_costs import BatchCosts, StepCosts

LABEL = "PROJECTION, not a measurement"
MULTIPLES = (1, 4, 16, 64)
"""The batches projected: the run's times these (larger ones left out where they do not fit)."""
JAX_MEMORY_FRACTION = 0.75
"""JAX preallocates 75% of a GPU's memory and allocates within it (JAX's "GPU memory allocation" docs: XLA_PYTHON_CLIENT_MEM_FRACTION)."""
DRIVER_RESERVED_BYTES = 503_316_480
"""Memory the driver holds before any job: 480 MiB on the H100 (benchmarks/records/...-h100-jax.json, inventory nvml_reserved_bytes)."""
COVERAGE_FACTOR = 2.0
"""A step's FLOPs, kernels, layers or scattered elements beyond this factor of the calibration points' span is outside what they cover (said)."""


class ProjectionRefused(ExplainedError, ValueError):
    """A projection that cannot be made for these settings (a precision the device lacks, PyTorch on a TPU); the message says why."""


def check_request(config: RunConfig, device: Accelerator) -> None:
    """ProjectionRefused for settings the device cannot run at all; cheap, before any step is counted."""
    if device.peak(config.precision) is None:
        computes = [PRECISION_NAMES[p] for p in PRECISION_NAMES if device.peak(p) is not None]
        raise ProjectionRefused(
            f"{device.name} cannot run --precision {config.precision}: {device.peak_how[config.precision]}; it computes {', '.join(computes)}"
        )
    if device.kind == "TPU" and config.backend in EAGER_BACKENDS:
        raise ProjectionRefused(f"Keras on {config.backend} does not train on TPUs; project --backend jax or tensorflow on {device.name}")


def projected_batches(batch: int) -> list[int]:
    """The run's batch and its multiples (`MULTIPLES`) up to the largest batch the app accepts."""
    return sorted({batch * multiple for multiple in MULTIPLES if batch * multiple <= MAX_BATCH_SIZE})


def usable_memory(device: Accelerator, backend: str) -> tuple[int, str]:
    """(bytes a job can allocate on the device, how): JAX's preallocated share on a GPU, the rest less the driver's reserve."""
    if device.kind == "TPU":
        return device.memory_bytes, f"the chip's {format_bytes(device.memory_bytes)} of HBM"
    if backend == "jax":
        usable = int(device.memory_bytes * JAX_MEMORY_FRACTION)
        return (
            usable,
            f"{JAX_MEMORY_FRACTION:.0%} of {format_bytes(device.memory_bytes)} (JAX preallocates that share and allocates within it)",
        )
    usable = device.memory_bytes - DRIVER_RESERVED_BYTES
    return usable, f"{format_bytes(device.memory_bytes)} less the driver's {format_bytes(DRIVER_RESERVED_BYTES)}"


def project(
    config: RunConfig,
    device: Accelerator,
    costs: StepCosts,
    model_title: str = "",
    samples_to_target: int | None = None,
    measured: MeasuredHere | None = None,
    samples_to_target_how: str = "",
) -> dict[str, Any]:
    """The projection of `config`'s job (its backend, precision, steps per call, batch) on `device`, as one JSON-ready document.

    `measured`: this machine's run of the job (`measured_here.latest_measured`), which the run's batch is set against
    (`speedup_vs_measured`: projected samples/s over its samples/s); `samples_to_target_how`: where `samples_to_target`
    came from, or why there are none."""
    check_request(config, device)
    backend = config.backend
    constants = calibration.constants(backend)
    flops_ceiling, ceiling_how = device_ceiling(device, config.precision)
    assert flops_ceiling is not None  # check_request refused a precision without units
    target = Target(flops_ceiling, device.bandwidth_bytes_s)
    band = spread(constants.residuals, constants.fitted)
    usable, usable_how = usable_memory(device, backend)
    rows: list[dict[str, Any]] = []
    left_out: list[str] = []
    for counted in sorted(costs.batches, key=lambda item: item.batch):
        fits = counted.memory_bytes <= usable
        if not fits and counted.batch != config.batch_size:
            left_out.append(
                f"batch {counted.batch:,}: needs {format_bytes(counted.memory_bytes)}, more than the {format_bytes(usable)} usable on {device.name}"
            )
            continue
        rows.append(_row(config, counted, costs, target, constants, band.factor, usable, samples_to_target, measured))
    points = calibration.points_for(backend)
    document: dict[str, Any] = {
        "projection": True,
        "label": f"{LABEL}: {model_title or config.model} on {device.title}, calibrated on {len(points)} measured points",
        "model": model_title or config.model,
        "backend": backend,
        "precision": config.precision,
        "steps_per_call": config.steps_per_call,
        "batch_size": config.batch_size,
        "device": {**device.to_dict(), "ceiling_flops": flops_ceiling, "ceiling_how": ceiling_how},
        "rows": rows,
        "left_out": left_out,
        "range": band.to_dict(),
        "memory": {"usable_bytes": usable, "usable_how": usable_how, "how": MEMORY_HOW},
        "samples_to_target": samples_to_target,
        "samples_to_target_how": samples_to_target_how,
        "measured_here": measured.to_dict() if measured else None,
        "calibration": {
            "backend": calibration.calibration_backend(backend),
            "points": [point.to_dict() for point in points],
            "constants": constants.to_dict(),
            "constants_how": CONSTANTS_HOW,
            "kernel_s_source": KERNEL_SOURCE,
            "costs_derived": calibration.COSTS_DERIVED,
        },
        "step_costs": {
            "method": costs.method,
            "layers": costs.layers,
            "params": costs.params,
            "examples": costs.examples,
            "memory_estimate": costs.memory_estimate,
            "versions": costs.versions,
            "notes": list(costs.notes),
        },
        "caveats": caveats(config, device, costs, rows, constants, band.text() if band.capped else ""),
    }
    return document


MEMORY_HOW = (
    "the compiled train step's buffers on this machine's CPU (arguments: state and batch; outputs not aliased to them; "
    "temporaries: activations, gradients): a GPU's own fusion and library workspaces differ"
)
CONSTANTS_HOW = (
    "host_s, efficiency, byte_share, epoch_s and scatter_s fitted (least squares on log step times) to the points named; PyTorch's "
    "host_s and per_layer_s to its points, its efficiency, byte_share and epoch_s the JAX fit's (no scatter_s: its own pooling and "
    "embedding gradients); kernel_s fixed (kernel_s_source)"
)


def epoch_batches(config: RunConfig, examples: int, batch: int) -> int | None:
    """The steps of an epoch of `config`'s job at `batch` (a Keras `fit` on JAX or PyTorch); None for the TensorFlow engine's endless data."""
    if config.backend == "tensorflow":
        return None
    return batches_per_epoch(examples, batch, config.steps_per_call)


def scatters_in_xla(config: RunConfig) -> bool:
    """Whether `config`'s step runs its scatters as XLA's atomic kernels (JAX; TensorFlow with XLA): the scatter term applies.

    TensorFlow without XLA and PyTorch run their own pooling and embedding gradient kernels.
    """
    return config.backend == "jax" or (config.backend == "tensorflow" and config.xla)


def _row(
    config: RunConfig,
    counted: BatchCosts,
    step_costs: StepCosts,
    target: Target,
    constants: Constants,
    factor: float,
    usable: int,
    samples_to_target: int | None,
    measured: MeasuredHere | None,
) -> dict[str, Any]:
    epoch = epoch_batches(config, step_costs.examples, counted.batch)
    scattered = counted.scattered if scatters_in_xla(config) else 0
    costs = Costs(counted.batch, counted.flops, counted.bytes, counted.kernels, counted.ops, step_costs.layers, epoch, scattered)
    parts = step_parts(config.backend, costs, target, constants, config.steps_per_call)
    mid = parts.step_s
    step = {"low": mid / factor, "mid": mid, "high": mid * factor}
    rate = {"low": counted.batch / step["high"], "mid": counted.batch / mid, "high": counted.batch / step["low"]}
    # the device alone, every FLOP at its ceiling
    bound = max(parts.launch_s, costs.flops / target.ceiling_flops, parts.memory_s, parts.scatter_s)
    row: dict[str, Any] = {
        "batch": counted.batch,
        "step_s": step,
        "samples_per_s": rate,
        "regime": parts.regime,
        "why": parts.why,
        "fits": {
            "fits": counted.memory_bytes <= usable,
            "need_bytes": counted.memory_bytes,
            "usable_bytes": usable,
            "share": counted.memory_bytes / usable,
        },
        "flops": counted.flops,
        "bytes": counted.bytes,
        "kernels": counted.kernels,
        "loop_kernels": counted.loop_kernels,
        "unknown_trip_loops": counted.unknown_trip_loops,
        "ops": counted.ops,
        "scattered": counted.scattered,
        "batches_per_epoch": epoch,
        "terms_s": {
            "host": parts.host_s,
            "epoch": parts.epoch_s,
            "launch": parts.launch_s,
            "compute": parts.compute_s,
            "memory": parts.memory_s,
            "scatter": parts.scatter_s,
        },
        "device_bound_samples_per_s": counted.batch / bound,
        "time_to_target_s": None,
        "speedup_vs_measured": None,
    }
    if counted.batch != config.batch_size:
        return row
    if samples_to_target is not None:
        row["time_to_target_s"] = {
            key: samples_to_target / rate[other] for key, other in (("low", "high"), ("mid", "mid"), ("high", "low"))
        }
    if measured is not None:
        row["speedup_vs_measured"] = {key: rate[key] / measured.samples_per_s for key in rate}
    return row


def caveats(
    config: RunConfig, device: Accelerator, costs: StepCosts, rows: list[dict[str, Any]], constants: Constants, capped: str
) -> list[str]:
    """Where this projection leans on more than its points show (`constants`' notes among them), each in a sentence (never widened silently)."""
    points = calibration.points_for(config.backend)
    said: list[str] = []
    if capped:
        said.append(f"range: {capped}")
    said += list(constants.notes)
    if config.backend == "tensorflow":
        said.append(
            "no TensorFlow job has run on a GPU here: the TensorFlow projection uses the JAX points' constants "
            "(its compiled step is dispatched the same way; its own per-step cost is unmeasured)"
        )
        if not scatters_in_xla(config) and any(row["scattered"] for row in rows):
            said[-1] += (
                "; without XLA its scatters (max pooling's or an embedding's gradient) are its own kernels, "
                "not XLA's atomic ones: no scatter term, their cost is unmeasured"
            )
    if config.backend in EAGER_BACKENDS:
        said.append(
            f"{config.backend}'s points are all host-bound and ran 16 batches an epoch or more: its efficiency and byte share on the "
            "device and its once-an-epoch cost are the JAX fit's"
        )
    calibrated = {point.device for point in points}
    if device.name not in calibrated:
        said.append(
            f"calibrated on {', '.join(sorted(calibrated))} only: on {device.name} the fitted efficiency is applied to its own ceiling, "
            "and the fixed per-step cost is their hosts'"
        )
    said += host_caveats(points)
    if device.kind == "TPU":
        said.append(
            "no TPU point: a TPU runs the compiled step without a host launch per kernel; the GPU-calibrated constants are applied as they are"
        )
    at_precision = sum(point.precision == config.precision for point in points)
    if at_precision * 2 < len(points):
        name = PRECISION_NAMES[config.precision]
        said.append(
            f"{at_precision} of the {len(points)} points ran in {name}, the others in float32: the device's {name} ceiling is used "
            "with an efficiency fitted mostly in float32"
        )
    if any(point.steps_per_call != config.steps_per_call for point in points):
        if config.backend in EAGER_BACKENDS:
            said.append(
                f"the points all ran 1 step per call: {config.backend} dispatches every step's operations one by one whatever the "
                f"steps per call, so the projection takes nothing off for {config.steps_per_call} steps a call (unmeasured)"
            )
        else:
            said.append(
                f"the points all ran 1 step per call: the host's per-call cost is taken as shared by the {config.steps_per_call} "
                "steps of a call"
            )
    said += batch_caveats(rows, points)
    said += coverage_caveats(config, rows, costs.layers, points)
    said += loop_caveats(config, rows)
    said += _epoch_caveats(rows, constants)
    said += input_pipeline_caveats(config, points, constants)
    if any(not row["fits"]["fits"] for row in rows):
        said.append(f"batch {config.batch_size:,} does not fit {device.name}'s memory by this estimate: a run there would fail")
    return said


def host_caveats(points: list[calibration.MeasuredPoint]) -> list[str]:
    """A caveat saying how far the points' own machines set the same job's step apart (`calibration.same_job_apart`)."""
    apart = calibration.same_job_apart(points)
    if apart is None:
        return []
    slow, fast = apart
    return [
        f"the host's fixed cost per step is the fit's, and hosts differ: the same job ({fast.backend} {fast.model}, batch {fast.batch}) "
        f"took {slow.step_s * 1e3:.3g} ms a step on the {slow.device}'s machine ({slow.date}) and {fast.step_s * 1e3:.3g} ms on the "
        f"{fast.device}'s ({fast.date}), {slow.step_s / fast.step_s:.2f}x; the machine driving the device may set a fixed-cost-bound step "
        "as far from this projection"
    ]


def batch_caveats(rows: list[dict[str, Any]], points: list[calibration.MeasuredPoint]) -> list[str]:
    """Where a projected batch lies above or below every point's batch: the efficiency, one fitted figure, is held there while a
    device's own rate rises with the batch, so the projection is likely low above the points and high below them."""
    batches = sorted({point.batch for point in points})
    ran = f"the points ran at batch {', '.join(f'{b:,}' for b in batches)}, and the efficiency is one figure fitted to them all"
    said = []
    above = [row["batch"] for row in rows if row["batch"] > batches[-1]]
    if above:
        said.append(
            f"{ran}: at batch {', '.join(f'{b:,}' for b in above)}, above theirs, a larger batch usually fills the device better, so "
            "the projection there is likely low (device_bound_samples_per_s is the most its launches, ceiling and bandwidth allow, "
            "the host aside)"
        )
    below = [row["batch"] for row in rows if row["batch"] < batches[0]]
    if below:
        said.append(
            f"{ran}: at batch {', '.join(f'{b:,}' for b in below)}, below theirs, a smaller batch fills the device less, so the projection there is likely high"
        )
    return said


def coverage_caveats(config: RunConfig, rows: list[dict[str, Any]], layers: int, points: list[calibration.MeasuredPoint]) -> list[str]:
    """Caveats for a step whose FLOPs, kernels (or layers, eager; or scattered elements, where `scatters_in_xla`) lie beyond
    `COVERAGE_FACTOR` of the points' span. A zero is an absent cost (a step that scatters nothing), not a small one: it takes
    no part, in the span or in the rows checked."""
    said = []
    measures = [("flops", "FLOPs", lambda row: row["flops"]), ("kernels", "kernels", lambda row: row["kernels"])]
    if config.backend in EAGER_BACKENDS:
        measures.append(("layers", "layers", lambda row: layers))
    if scatters_in_xla(config):
        measures.append(("scattered", "scattered elements", lambda row: row["scattered"]))
    for key, words, of in measures:
        span = [value for value in (calibration.cached_costs(point)[key] for point in points) if value] or [0]
        low, high = min(span), max(span)
        outside = [row["batch"] for row in rows if of(row) and not low / COVERAGE_FACTOR <= of(row) <= high * COVERAGE_FACTOR]
        if outside:
            said.append(
                f"{words} per step at batch {', '.join(f'{b:,}' for b in outside)} lie outside what the points cover "
                f"({_count(low)} to {_count(high)}, x/÷ {COVERAGE_FACTOR:g}): the projection there extrapolates"
            )
    return said


def loop_caveats(config: RunConfig, rows: list[dict[str, Any]]) -> list[str]:
    """Caveats for a step with loops (a recurrent layer's time steps), which no point ran: the kernels their trips would launch,
    counted as one launch each loop, and loops whose trips XLA cannot know (each waits for the host on a GPU)."""
    said = []
    looped = [row for row in rows if row["loop_kernels"]]
    if looped:
        by_count: dict[int, list[int]] = {}
        for row in looped:
            by_count.setdefault(row["loop_kernels"], []).append(row["batch"])
        counts = "; ".join(
            f"{count:,} kernels ({count * KERNEL_S * 1e3:.3g} ms at {KERNEL_S * 1e6:g} µs each) at batch {', '.join(f'{b:,}' for b in batches)}"
            for count, batches in by_count.items()
        )
        cudnn = "an LSTM" if config.backend == "jax" else "an LSTM or GRU"
        said.append(
            "the step runs loops (a recurrent layer's time steps), which no point ran, each counted as one kernel: on a GPU Keras "
            f"runs {cudnn} whose settings cuDNN takes (Keras's defaults: tanh and sigmoid, a bias, not unrolled, no mask) as cuDNN's own kernels "
            f"on {config.backend} (unmeasured here); any other loop launches its body's kernels every trip, {counts}, "
            "which this projection leaves out: such a step would take that much longer"
        )
    unknown = max((row["unknown_trip_loops"] for row in rows), default=0)
    if unknown:
        said.append(
            f"{unknown} loop(s) whose trip count is known only as the step runs (a `lax.while_loop`): on a GPU each trip also waits "
            "for the host to read the loop's condition (XLA's while loop copies it back), which the projection leaves out: it is "
            "likely high"
        )
    return said


EPOCH_WEIGHT = 0.25
"""A step whose share of the epoch's work is at least this share of it hears why (`_epoch_caveats`)."""


def _epoch_caveats(rows: list[dict[str, Any]], constants: Constants) -> list[str]:
    """A caveat for batches whose data holds so few of them that Keras's once-an-epoch work weighs on every step."""
    heavy = [row for row in rows if row["terms_s"]["epoch"] >= EPOCH_WEIGHT * row["step_s"]["mid"]]
    if not heavy:
        return []
    at = ", ".join(f"{row['batch']:,} ({row['batches_per_epoch']:,} per epoch)" for row in heavy)
    return [
        f"at batch {at} the data holds so few batches that fit's once-an-epoch work ({constants.epoch_s * 1e3:.2g} ms, fitted) "
        f"weighs {EPOCH_WEIGHT:.0%} or more of each step: more examples (a larger data set) would take most of it off"
    ]


def input_pipeline_caveats(config: RunConfig, points: list[calibration.MeasuredPoint], constants: Constants) -> list[str]:
    """A caveat for a job on real data: the model has no input-pipeline term, and how far the points on real data fell from it."""
    if config.dataset == "synthetic":
        return []
    real_data = {point.name for point in points if point.dataset != "synthetic"}
    off = {name: math.exp(-residual) for name, residual in zip(constants.points, constants.residuals, strict=True) if name in real_data}
    said = "the model has no per-batch term for the input pipeline (reading, shuffling and copying each batch on the host; fit's once-an-epoch work is one)"
    if not off:
        return [f"{said}, and no point ran on real data: on {config.dataset} it may take longer than projected"]
    worst = max(off, key=lambda name: abs(math.log(off[name])))
    return [
        f"{said}: the points on real data took {min(off.values()):.2g}-{max(off.values()):.2g}x their fitted step "
        f"({worst}: {off[worst]:.2g}x), so on {config.dataset} the step may be that far off"
    ]


def _count(value: float) -> str:
    for prefix, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:,.3g}{prefix}"
    return f"{value:,.0f}"


def projection_of(config: RunConfig, device_name: str, samples_to_target: int | None = None) -> dict[str, Any]:
    """The whole projection of `config`'s job on the catalogue device named: checked, its step's costs counted (a child
    process, seconds; reused for the same job within this process: `counted_step_costs`), projected and set against this
    machine's newest run of the job in the history, if any. Raises UnknownDevice, ProjectionRefused or CostsUnavailable
    with the reason."""
    from core.projection.catalogue import find_device
    from core.projection.step_costs import counted_step_costs
    from core.workloads.workload import model_title

    device = find_device(device_name)
    check_request(config, device)
    costs = counted_step_costs(config, projected_batches(config.batch_size))
    return project(config, device, costs, model_title(config.model), samples_to_target, latest_measured(config))
