"""The measurements every projection rests on, their step costs, and the constants fitted from them (computed, never typed in).

The points: every GPU job the app has measured on a lent GPU (benchmarks/records/), one point per
distinct job: the sample models, one step per call, samples/s over each job's steady steps. One
NVIDIA H100 80GB HBM3 (SXM), 2026-11-27: the four models on synthetic data at batch 64, float32,
200 steps per job in a child process (`benchmarks/gpu_check.py` of that day). One NVIDIA H200,
2026-11-28: batches 64 to 4,096 (`main.py run` through `benchmarks/gpu_points.py`, 200 steps),
and the GPU check's own commands: the CNN's batch-64 run, PyTorch's compare, the MLP's sweep on
the digits at batches 64, 512 and 4,096, and its autotune search in float32 and float16. A test
checks each figure and setting against its record; a later GPU run adds its points here.

Their step costs (`CALIBRATION_COSTS`, per model, precision and batch) are what `core.projection.step_costs` counts for those jobs
on a CPU (XLA's cost analysis of the JAX train step: no GPU needed); they are kept here so that the
fit and the leave-one-out benchmark take no compiling, and `derive_calibration_costs()` counts them
again (a test compares them with the live count on the machine it runs on).

The fitted constants (`constants(backend)`): least squares on log step times (`model.fit`), JAX
from the JAX points (a scatter's cost per element from the CNN's max pooling and the
Transformer's embedding); PyTorch from the PyTorch points, with the JAX fit's efficiency, byte
share and epoch (its points are all host-bound, at 16 batches an epoch or more) and no scatter
term (its own pooling and embedding kernels); TensorFlow borrows the JAX
constants (no TensorFlow job has run on a GPU here). A point's step is its steady one
(`MeasuredPoint.step_s`: a JAX job's median step), and it carried its share of its epoch's work:
an epoch is the whole batches of the job's data (`MeasuredPoint.examples`: 4,096 synthetic
examples, the 1,797 digits), so the MLP at batch 4,096 paid all of it every step.
What the records say besides: NVML's GPU utilisation over the H100's JAX jobs' steady state was
0.6% (mlp), 4% (cnn), 16% (resnet) and 9% (transformer), the H200's 14-58%: the GPU was idle
most of every step at these batches, so the fitted efficiency and byte share are effective rates
of small steps, not the device's own at a large batch.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.backends.job_data import batches_per_epoch
from core.config import RunConfig
from core.projection.catalogue import ceiling as device_ceiling
from core.projection.catalogue import find_device
from core.projection.model import Constants, Costs, Observation, Target, fit
from core.workloads.data import SYNTHETIC_EXAMPLES

JAX_RECORD = "benchmarks/records/gpu_check-2026-11-27-h100-jax.json"
TORCH_RECORD = "benchmarks/records/gpu_check-2026-11-27-h100-torch.json"
H200_POINTS_RECORD = "benchmarks/records/gpu_points-2026-11-28-h200.json"
H200_CHECK = "benchmarks/records/gpu_check-2026-11-28-h200"
CALIBRATED_DEVICE = "H100-SXM"
CALIBRATED_PRECISION = "off"
H200_DATE = "2026-11-28"
DIGITS_EXAMPLES = 1_797
"""The shipped digits' examples (resources/digits.npz): a backend job's epoch on them."""


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured GPU job: backend, sample model, batch, steps per call, samples/s, the device and the record it is in.

    `examples`: the job's data, whose whole batches make its epoch (synthetic: SYNTHETIC_EXAMPLES).
    """

    backend: str
    model: str
    samples_per_s: float
    source: str
    device: str = CALIBRATED_DEVICE
    batch: int = 64
    steps_per_call: int = 1
    precision: str = CALIBRATED_PRECISION
    date: str = "2026-11-27"
    median_step_ms: float | None = None
    dataset: str = "synthetic"
    examples: int = SYNTHETIC_EXAMPLES

    @property
    def batches_per_epoch(self) -> int:
        """Steps the job's epoch had (`core.backends.job_data.batches_per_epoch`): the share of its once-an-epoch work each carried."""
        return batches_per_epoch(self.examples, self.batch, self.steps_per_call)

    @property
    def name(self) -> str:
        """ "jax mlp b64 H200", with the data set and the precision where they are not synthetic and float32."""
        return " ".join(
            [f"{self.backend} {self.model} b{self.batch} {self.device}"]
            + ([self.dataset] if self.dataset != "synthetic" else [])
            + ([self.precision] if self.precision != CALIBRATED_PRECISION else [])
        )

    @property
    def costs_key(self) -> str:
        """Its entry in CALIBRATION_COSTS: the model, and the precision where it is not float32 (the data set changes no shape)."""
        return self.model if self.precision == CALIBRATED_PRECISION else f"{self.model} {self.precision}"

    @property
    def step_s(self) -> float:
        """The steady step the model is fitted to: the median step where the record has one for a JAX job, else batch / samples/s.

        A JAX step blocks on its result, so each step's time is the whole step and the median
        resists a one-off stall: the 2026-11-27 version counted one warm-up step, and its JAX
        jobs' mean step was 1.3-2.1x their median (a second compile left in the steady window),
        where the H200's jobs, with the warm-up found from the step times, are within 0.98-1.13x.
        A PyTorch step returns once dispatched and the device catches up in bursts (the H200's
        median 0.15-0.32 ms against a mean of 5.6-37 ms): only the mean, samples/s, is its rate.
        """
        if self.median_step_ms is not None:
            return self.median_step_ms / 1e3
        return self.batch / self.samples_per_s

    @property
    def steady_samples_per_s(self) -> float:
        """The rate of the steady step (`step_s`): what a projection of this job is checked against."""
        return self.batch / self.step_s

    def to_dict(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "model": self.model,
            "device": self.device,
            "batch": self.batch,
            "steps_per_call": self.steps_per_call,
            "precision": self.precision,
            "dataset": self.dataset,
            "examples": self.examples,
            "batches_per_epoch": self.batches_per_epoch,
            "samples_per_s": self.samples_per_s,
            "median_step_ms": self.median_step_ms,
            "step_s": self.step_s,
            "steady_samples_per_s": self.steady_samples_per_s,
            "date": self.date,
            "source": self.source,
        }


POINTS: tuple[MeasuredPoint, ...] = (
    MeasuredPoint("jax", "mlp", 18_895.988994438885, f"{JAX_RECORD}: jobs.runs[0] (GPU:0)", median_step_ms=1.6230420000056256),
    MeasuredPoint("jax", "cnn", 14_934.947696109337, f"{JAX_RECORD}: jobs.runs[2] (GPU:0)", median_step_ms=2.7098670000214042),
    MeasuredPoint("jax", "resnet", 9_592.815350071874, f"{JAX_RECORD}: jobs.runs[4] (GPU:0)", median_step_ms=4.981180999948265),
    MeasuredPoint("jax", "transformer", 18_056.56645051726, f"{JAX_RECORD}: jobs.runs[6] (GPU:0)", median_step_ms=2.5134450000336983),
    MeasuredPoint("torch", "mlp", 8_833.459044358555, f"{TORCH_RECORD}: jobs.runs[8] (GPU:0)"),
    MeasuredPoint("torch", "cnn", 7_282.162442757373, f"{TORCH_RECORD}: jobs.runs[10] (GPU:0)"),
    MeasuredPoint("torch", "resnet", 1_809.0226562592684, f"{TORCH_RECORD}: jobs.runs[12] (GPU:0)"),
    MeasuredPoint("torch", "transformer", 3_098.320051846971, f"{TORCH_RECORD}: jobs.runs[14] (GPU:0)"),
    MeasuredPoint(
        "jax", "cnn", 39393.88122535368, f"{H200_CHECK}/run.json: json", "H200", date=H200_DATE, median_step_ms=1.591477468749769
    ),
    MeasuredPoint("torch", "cnn", 9772.017496781777, f"{H200_CHECK}/compare-torch.json: json[0]", "H200", date=H200_DATE),
    MeasuredPoint(
        "jax", "cnn", 159473.84693488257, f"{H200_POINTS_RECORD}: points[0]", "H200", 256, date=H200_DATE, median_step_ms=1.5724973749939863
    ),
    MeasuredPoint(
        "jax",
        "resnet",
        74608.42918879827,
        f"{H200_POINTS_RECORD}: points[1]",
        "H200",
        256,
        date=H200_DATE,
        median_step_ms=3.4356573125009504,
    ),
    MeasuredPoint(
        "jax",
        "transformer",
        114049.69773424577,
        f"{H200_POINTS_RECORD}: points[2]",
        "H200",
        256,
        date=H200_DATE,
        median_step_ms=2.1916377500019735,
    ),
    MeasuredPoint(
        "jax", "mlp", 185678.3440608759, f"{H200_POINTS_RECORD}: points[3]", "H200", 256, date=H200_DATE, median_step_ms=1.2227177499966047
    ),
    MeasuredPoint(
        "jax", "cnn", 356160.6103271505, f"{H200_POINTS_RECORD}: points[4]", "H200", 1024, date=H200_DATE, median_step_ms=2.8927473750002264
    ),
    MeasuredPoint(
        "jax",
        "resnet",
        124652.94277306853,
        f"{H200_POINTS_RECORD}: points[5]",
        "H200",
        1024,
        date=H200_DATE,
        median_step_ms=8.205302875005316,
    ),
    MeasuredPoint(
        "jax",
        "transformer",
        179777.29640684745,
        f"{H200_POINTS_RECORD}: points[6]",
        "H200",
        1024,
        date=H200_DATE,
        median_step_ms=5.763698000002648,
    ),
    MeasuredPoint(
        "jax", "mlp", 630538.2352638947, f"{H200_POINTS_RECORD}: points[7]", "H200", 1024, date=H200_DATE, median_step_ms=1.5652097499980755
    ),
    MeasuredPoint("torch", "cnn", 29521.926923074607, f"{H200_POINTS_RECORD}: points[8]", "H200", 256, date=H200_DATE),
    MeasuredPoint("torch", "mlp", 45878.146488839135, f"{H200_POINTS_RECORD}: points[9]", "H200", 256, date=H200_DATE),
    MeasuredPoint("torch", "resnet", 6905.035322886384, f"{H200_POINTS_RECORD}: points[10]", "H200", 256, date=H200_DATE),
    MeasuredPoint("torch", "transformer", 13615.959293957927, f"{H200_POINTS_RECORD}: points[11]", "H200", 256, date=H200_DATE),
    MeasuredPoint(
        "jax",
        "cnn",
        405383.20853415626,
        f"{H200_POINTS_RECORD}: points[12]",
        "H200",
        4096,
        date=H200_DATE,
        median_step_ms=10.095534999990718,
    ),
    MeasuredPoint(
        "jax",
        "mlp",
        57279.67680748545,
        f"{H200_CHECK}/autotune.json: json.points[0]",
        "H200",
        date=H200_DATE,
        median_step_ms=0.9739893749980411,
    ),
    MeasuredPoint(
        "jax",
        "mlp",
        51728.41533724613,
        f"{H200_CHECK}/autotune.json: json.points[1]",
        "H200",
        precision="float16",
        date=H200_DATE,
        median_step_ms=1.191090749998125,
    ),
    MeasuredPoint(
        "jax",
        "mlp",
        52207.56979780033,
        f"{H200_CHECK}/sweep.json: json.rows[0]",
        "H200",
        date=H200_DATE,
        median_step_ms=1.1131012500023019,
        dataset="digits",
        examples=DIGITS_EXAMPLES,
    ),
    MeasuredPoint(
        "jax",
        "mlp",
        250190.5409273549,
        f"{H200_CHECK}/sweep.json: json.rows[1]",
        "H200",
        512,
        date=H200_DATE,
        median_step_ms=2.013513624998353,
        dataset="digits",
        examples=DIGITS_EXAMPLES,
    ),
    MeasuredPoint(
        "jax",
        "mlp",
        1088720.879465647,
        f"{H200_CHECK}/sweep.json: json.rows[2]",
        "H200",
        4096,
        date=H200_DATE,
        median_step_ms=3.6456197499994403,
        dataset="digits",
        examples=DIGITS_EXAMPLES,
    ),
)
"""Every recorded GPU measurement of a distinct job (samples/s of the steady steps, as the records hold them).

One point per job (backend, model, data, batch, precision, steps per call, GPU): where the records
measured a job again, its first measurement in the check's order is the point (the CNN's batch-64
run before its compare row; autotune's search before its rounds), so that leaving a point out
leaves no second measurement of it in the fit.
"""

CALIBRATION_COSTS: dict[str, dict[str, Any]] = {
    "mlp": {
        "layers": 4,
        "params": 50_826,
        "batches": {
            64: {"flops": 17_960_132.0, "bytes": 10_726_649.0, "kernels": 47, "ops": 282, "scattered": 0},
            256: {"flops": 70_164_320.0, "bytes": 17_439_736.0, "kernels": 47, "ops": 282, "scattered": 0},
            512: {"flops": 139_770_016.0, "bytes": 26_390_520.0, "kernels": 47, "ops": 282, "scattered": 0},
            1024: {"flops": 278_981_120.0, "bytes": 44_292_084.0, "kernels": 47, "ops": 282, "scattered": 0},
            4096: {"flops": 1_114_248_704.0, "bytes": 151_701_600.0, "kernels": 45, "ops": 282, "scattered": 0},
        },
    },
    "mlp float16": {
        "layers": 4,
        "params": 50_826,
        "batches": {
            64: {"flops": 18_232_188.0, "bytes": 11_308_432.0, "kernels": 50, "ops": 340, "scattered": 0},
        },
    },
    "cnn": {
        "layers": 7,
        "params": 421_642,
        "batches": {
            64: {"flops": 1_488_950_656.0, "bytes": 288_178_176.0, "kernels": 84, "ops": 356, "scattered": 2_408_448},
            256: {"flops": 5_941_889_536.0, "bytes": 939_740_288.0, "kernels": 84, "ops": 356, "scattered": 9_633_792},
            1024: {"flops": 23_753_668_608.0, "bytes": 3_545_991_424.0, "kernels": 84, "ops": 356, "scattered": 38_535_168},
            4096: {"flops": 95_000_707_072.0, "bytes": 13_970_989_056.0, "kernels": 82, "ops": 356, "scattered": 154_140_672},
        },
    },
    "resnet": {
        "layers": 30,
        "params": 309_994,
        "batches": {
            64: {"flops": 17_583_112_192.0, "bytes": 2_967_417_088.0, "kernels": 286, "ops": 1503, "scattered": 0},
            256: {"flops": 70_322_176_000.0, "bytes": 11_706_221_568.0, "kernels": 286, "ops": 1503, "scattered": 0},
            1024: {"flops": 281_278_611_456.0, "bytes": 46_661_177_344.0, "kernels": 286, "ops": 1503, "scattered": 0},
        },
    },
    "transformer": {
        "layers": 14,
        "params": 1_355_266,
        "batches": {
            64: {"flops": 5_036_421_120.0, "bytes": 3_168_027_392.0, "kernels": 331, "ops": 1562, "scattered": 524_288},
            256: {"flops": 20_101_036_032.0, "bytes": 12_020_624_384.0, "kernels": 331, "ops": 1562, "scattered": 2_097_152},
            1024: {"flops": 80_359_292_928.0, "bytes": 47_430_389_760.0, "kernels": 325, "ops": 1562, "scattered": 8_388_608},
        },
    },
}
"""Step costs of the points' jobs at each batch they ran, as `derive_calibration_costs()` counted them (see COSTS_DERIVED)."""
COSTS_DERIVED = (
    "core.projection.step_costs on an x86-64 CPU (JAX 0.10.2, Keras 3.15.1): each sample model on synthetic data at each batch "
    "its points ran, adam, float32 (and the MLP in float16), XLA's cost analysis of the JAX train step; the MLP's digits have "
    "its synthetic data's shapes (8x8, 10 classes), so the same costs; derive_calibration_costs() counts them again"
)


def derive_calibration_costs(keys: Sequence[str] = tuple(CALIBRATION_COSTS), dataset: str = "synthetic") -> dict[str, dict[str, Any]]:
    """Count the points' step costs again, live (a child process per entry, seconds to a minute each): what CALIBRATION_COSTS holds.

    `keys` are CALIBRATION_COSTS's ("mlp", "mlp float16"); `dataset` the data the models are built for.
    """
    from core.projection.step_costs import measure_step_costs

    counted = {}
    for key in keys:
        model, _, precision = key.partition(" ")
        batches = sorted(CALIBRATION_COSTS[key]["batches"])
        config = RunConfig(model=model, backend="jax", batch_size=batches[0], dataset=dataset, precision=precision or CALIBRATED_PRECISION)
        costs = measure_step_costs(config, batches)
        at_batches = {}
        for batch in batches:
            at = costs.at(batch)
            at_batches[batch] = {"flops": at.flops, "bytes": at.bytes, "kernels": at.kernels, "ops": at.ops, "scattered": at.scattered}
        counted[key] = {"layers": costs.layers, "params": costs.params, "batches": at_batches}
    return counted


def cached_costs(point: MeasuredPoint) -> dict[str, float]:
    """The point's step costs as CALIBRATION_COSTS holds them (flops, bytes, kernels, ops, scattered at its batch; the model's layers)."""
    model = CALIBRATION_COSTS[point.costs_key]
    return {**model["batches"][point.batch], "layers": model["layers"]}


def point_costs(point: MeasuredPoint) -> Costs:
    cached = cached_costs(point)
    return Costs(
        point.batch,
        cached["flops"],
        cached["bytes"],
        int(cached["kernels"]),
        int(cached["ops"]),
        int(cached["layers"]),
        point.batches_per_epoch,
        int(cached["scattered"]),
    )


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
    """`backend`'s constants fitted to `points` (its own; for PyTorch, the efficiency, byte share and epoch of the JAX points among `points`)."""
    own = [observation(point) for point in points if point.backend == backend]
    if backend == "torch":
        jax = fit_points("jax", points)
        return fit(backend, own, efficiency=jax.efficiency, byte_share=jax.byte_share, epoch_s=jax.epoch_s)
    return fit(backend, own)


@functools.cache
def constants(backend: str) -> Constants:
    """The constants a projection on `backend` uses, fitted from every point (TensorFlow: the JAX ones)."""
    return fit_points(calibration_backend(backend), POINTS)


def same_job_apart(points: Sequence[MeasuredPoint]) -> tuple[MeasuredPoint, MeasuredPoint] | None:
    """The job measured on two devices whose steps differ most: (the slower point, the faster), or None where no job was.

    A job is the backend, model, batch, precision, data and steps per call; at the points' smallest
    batches the step is mostly the host's fixed cost, so this is how far two machines' hosts (and
    the versions that measured them) set the same step apart.
    """

    def job(point: MeasuredPoint) -> tuple[object, ...]:
        return (point.backend, point.model, point.batch, point.precision, point.dataset, point.steps_per_call)

    pairs = [(a, b) for a in points for b in points if job(a) == job(b) and a.device != b.device and a.step_s > b.step_s]
    return max(pairs, key=lambda pair: pair[0].step_s / pair[1].step_s, default=None)


def points_for(backend: str) -> list[MeasuredPoint]:
    """The points `backend`'s constants come from (PyTorch's efficiency comes from the JAX points besides)."""
    return [point for point in POINTS if point.backend == calibration_backend(backend)]
