"""The measurements every projection rests on, their step costs, and the constants fitted from them (computed, never typed in).

The points: every GPU job the app has measured on a lent GPU (benchmarks/records/, `main.py`'s own
jobs through `benchmarks/gpu_check.py`): one NVIDIA H100 80GB HBM3 (SXM), 2026-11-27, the four
sample models on synthetic data, batch 64, one step per call, float32, each job 200 steps in a
child process, samples/s over its steady steps. A test checks each figure against its record;
a later GPU run adds its points here.

Their step costs (`CALIBRATION_COSTS`) are what `core.projection.step_costs` counts for those jobs
on a CPU (XLA's cost analysis of the JAX train step: no GPU needed); they are kept here so that the
fit and the leave-one-out benchmark take no compiling, and `derive_calibration_costs()` counts them
again (a test compares them with the live count on the machine it runs on).

The fitted constants (`constants(backend)`): least squares on log step times (`model.fit`), JAX
from the JAX points; PyTorch from the PyTorch points, with the JAX fit's efficiency (its points are
all host-bound); TensorFlow borrows the JAX constants (no TensorFlow job has run on a GPU here).
What the records say besides: NVML's GPU utilisation over the JAX jobs' steady state was 0.6%
(mlp), 4% (cnn), 16% (resnet) and 9% (transformer): the GPU was idle most of every step, so the
fitted "efficiency" is an effective rate that also carries host time growing with the step's work,
not the device's own efficiency at this batch.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from core.config import RunConfig
from core.projection.catalogue import ceiling as device_ceiling
from core.projection.catalogue import find_device
from core.projection.model import Constants, Costs, Observation, Target, fit

JAX_RECORD = "benchmarks/records/gpu_check-2026-11-27-h100-jax.json"
TORCH_RECORD = "benchmarks/records/gpu_check-2026-11-27-h100-torch.json"
CALIBRATED_DEVICE = "H100-SXM"
CALIBRATED_PRECISION = "off"


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured GPU job: backend, sample model, batch, steps per call, samples/s, the device and the record it is in."""

    backend: str
    model: str
    samples_per_s: float
    source: str
    device: str = CALIBRATED_DEVICE
    batch: int = 64
    steps_per_call: int = 1
    precision: str = CALIBRATED_PRECISION
    date: str = "2026-11-27"

    @property
    def name(self) -> str:
        return f"{self.backend} {self.model} b{self.batch}"

    @property
    def step_s(self) -> float:
        return self.batch / self.samples_per_s

    def to_dict(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "model": self.model,
            "device": self.device,
            "batch": self.batch,
            "steps_per_call": self.steps_per_call,
            "precision": self.precision,
            "samples_per_s": self.samples_per_s,
            "date": self.date,
            "source": self.source,
        }


POINTS: tuple[MeasuredPoint, ...] = (
    MeasuredPoint("jax", "mlp", 18_895.988994438885, f"{JAX_RECORD}: jobs.runs[0] (GPU:0)"),
    MeasuredPoint("jax", "cnn", 14_934.947696109337, f"{JAX_RECORD}: jobs.runs[2] (GPU:0)"),
    MeasuredPoint("jax", "resnet", 9_592.815350071874, f"{JAX_RECORD}: jobs.runs[4] (GPU:0)"),
    MeasuredPoint("jax", "transformer", 18_056.56645051726, f"{JAX_RECORD}: jobs.runs[6] (GPU:0)"),
    MeasuredPoint("torch", "mlp", 8_833.459044358555, f"{TORCH_RECORD}: jobs.runs[8] (GPU:0)"),
    MeasuredPoint("torch", "cnn", 7_282.162442757373, f"{TORCH_RECORD}: jobs.runs[10] (GPU:0)"),
    MeasuredPoint("torch", "resnet", 1_809.0226562592684, f"{TORCH_RECORD}: jobs.runs[12] (GPU:0)"),
    MeasuredPoint("torch", "transformer", 3_098.320051846971, f"{TORCH_RECORD}: jobs.runs[14] (GPU:0)"),
)
"""Every recorded GPU measurement (samples/s of the steady steps, as the records hold them)."""

CALIBRATION_COSTS: dict[str, dict[str, float]] = {
    "mlp": {"flops": 17_960_132.0, "bytes": 10_726_649.0, "kernels": 47, "ops": 282, "layers": 4, "params": 50_826},
    "cnn": {"flops": 1_488_950_656.0, "bytes": 288_178_176.0, "kernels": 84, "ops": 356, "layers": 7, "params": 421_642},
    "resnet": {"flops": 17_583_112_192.0, "bytes": 2_967_417_088.0, "kernels": 286, "ops": 1503, "layers": 30, "params": 309_994},
    "transformer": {"flops": 5_036_421_120.0, "bytes": 3_168_027_392.0, "kernels": 331, "ops": 1562, "layers": 14, "params": 1_355_266},
}
"""Step costs of the points' jobs at batch 64, as `derive_calibration_costs()` counted them (see COSTS_DERIVED)."""
COSTS_DERIVED = (
    "core.projection.step_costs on an x86-64 CPU (JAX 0.10.2, Keras 3.15.1): each sample model on synthetic data, batch 64, "
    "adam, float32, XLA's cost analysis of the JAX train step; derive_calibration_costs() counts them again"
)
CALIBRATION_BATCH = 64


def derive_calibration_costs(models: Sequence[str] = tuple(CALIBRATION_COSTS)) -> dict[str, dict[str, float]]:
    """Count the points' step costs again, live (a child process per model, a few seconds each): what CALIBRATION_COSTS holds."""
    from core.projection.step_costs import measure_step_costs

    counted = {}
    for model in models:
        costs = measure_step_costs(RunConfig(model=model, backend="jax", batch_size=CALIBRATION_BATCH), [CALIBRATION_BATCH])
        at = costs.at(CALIBRATION_BATCH)
        counted[model] = {
            "flops": at.flops,
            "bytes": at.bytes,
            "kernels": at.kernels,
            "ops": at.ops,
            "layers": costs.layers,
            "params": costs.params,
        }
    return counted


def point_costs(point: MeasuredPoint) -> Costs:
    cached = CALIBRATION_COSTS[point.model]
    return Costs(point.batch, cached["flops"], cached["bytes"], int(cached["kernels"]), int(cached["ops"]), int(cached["layers"]))


def point_target(point: MeasuredPoint) -> Target:
    device = find_device(point.device)
    flops, _ = device_ceiling(device, point.precision)
    assert flops is not None  # every point's device computes its precision
    return Target(flops, device.bandwidth_bytes_s)


def observation(point: MeasuredPoint) -> Observation:
    return Observation(point.name, point_costs(point), point_target(point), point.steps_per_call, point.step_s)


def calibration_backend(backend: str) -> str:
    """Whose points calibrate `backend`: its own, or JAX's for TensorFlow (no TensorFlow GPU point yet)."""
    return backend if any(point.backend == backend for point in POINTS) else "jax"


def fit_points(backend: str, points: Sequence[MeasuredPoint]) -> Constants:
    """`backend`'s constants fitted to `points` (its own; for PyTorch, the efficiency of the JAX points among `points`)."""
    own = [observation(point) for point in points if point.backend == backend]
    if backend == "torch":
        return fit(backend, own, efficiency=fit_points("jax", points).efficiency)
    return fit(backend, own)


@functools.cache
def constants(backend: str) -> Constants:
    """The constants a projection on `backend` uses, fitted from every point (TensorFlow: the JAX ones)."""
    return fit_points(calibration_backend(backend), POINTS)


def points_for(backend: str) -> list[MeasuredPoint]:
    """The points `backend`'s constants come from (PyTorch's efficiency comes from the JAX points besides)."""
    return [point for point in POINTS if point.backend == calibration_backend(backend)]
