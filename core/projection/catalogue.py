"""Accelerators a projection can target: datasheet peaks per precision, memory, bandwidth, each with its source.

A GPU's dense peaks come from the one GPU table of the app (`core.machine.peak_estimates.GPU_PEAKS`,
vendor datasheets, the "with sparsity" figures halved): float32 is the TF32 tensor-core peak where
the card has TF32 (TensorFlow and JAX run float32 matrix products in TF32 there by default), else
plain FP32; float16 and bfloat16 are the tensor-core dense peaks with FP32 accumulation (as Keras
mixed precision computes), none where the card lacks that type. Memory and bandwidth are the
same datasheets'. TPUs are Google Cloud's published per-chip figures: their matrix units compute
bfloat16, and a float32 matrix product runs as bfloat16 passes at JAX's and TensorFlow's default
precision, so float32 gets the bfloat16 peak; they have no float16 units.

A measured ceiling (`MEASURED_CEILINGS`: the best matmul FLOP/s `main.py peaks`' kernels reached on
that card) replaces the datasheet peak times the efficiency a projection uses; a card without one
is taken at its datasheet peak times the measured card's fraction of its own datasheet (said so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.errors import ExplainedError
from core.machine.peak_estimates import gpu_peak

GB = 10**9
GIB = 2**30
PRECISION_NAMES = {"off": "float32", "float16": "float16", "bfloat16": "bfloat16"}


@dataclass(frozen=True)
class MeasuredCeiling:
    """The matmul FLOP/s measured on one card at one precision, and where it was measured."""

    flops: float
    datasheet_flops: float
    source: str

    @property
    def fraction(self) -> float:
        return self.flops / self.datasheet_flops


@dataclass(frozen=True)
class Accelerator:
    """One catalogue entry: dense peak FLOP/s per run precision ("off", "float16", "bfloat16"; None: no such units)."""

    name: str
    kind: str  # "GPU" or "TPU"
    title: str
    memory_bytes: int
    bandwidth_bytes_s: float
    peaks: dict[str, float | None]
    peak_how: dict[str, str]
    source: str
    aliases: tuple[str, ...] = ()
    ceilings: dict[str, MeasuredCeiling] = field(default_factory=dict)

    def peak(self, precision: str) -> float | None:
        return self.peaks.get(precision)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "title": self.title,
            "memory_bytes": self.memory_bytes,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_s,
            "peak_flops": dict(self.peaks),
            "peak_how": dict(self.peak_how),
            "measured_ceilings": {
                precision: {"flops": ceiling.flops, "fraction_of_datasheet": round(ceiling.fraction, 4), "source": ceiling.source}
                for precision, ceiling in self.ceilings.items()
            },
            "source": self.source,
        }


H100_RECORD = "benchmarks/records/gpu_check-2026-11-27-h100-jax.json"
MEASURED_CEILINGS: dict[str, dict[str, MeasuredCeiling]] = {
    "H100-SXM": {
        "off": MeasuredCeiling(369_837_509_564_151.7, 494.7e12, f'{H100_RECORD}: ceilings "float32 default" (JAX, TF32), 2026-11-27'),
        "bfloat16": MeasuredCeiling(719_811_855_004_801.8, 989.4e12, f'{H100_RECORD}: ceilings "bfloat16 default" (JAX), 2026-11-27'),
    }
}
"""Matmul ceilings measured by this app on a lent GPU (the records under benchmarks/records/; a test checks them)."""


def _gpu(
    name: str, table_name: str, title: str, memory_bytes: int, bandwidth: float, source: str, aliases: tuple[str, ...] = ()
) -> Accelerator:
    """A GPU entry whose peaks are the app's GPU table's (`peak_estimates`) for `table_name`."""
    table = gpu_peak(table_name)
    if table is None:  # a name the table does not match is a bug of this file, caught by the tests
        raise ValueError(f"{table_name!r} is not in core.machine.peak_estimates.GPU_PEAKS")
    datasheet = f"{table.name} vendor datasheet, dense"
    float32 = (table.tf32, f"TF32 tensor-core peak ({datasheet}): float32 matrix products run in TF32 by default")
    if table.tf32 is None:
        float32 = (table.fp32, f"FP32 peak ({datasheet}): no TF32 units")
    half = f"tensor-core peak with FP32 accumulation ({datasheet})"
    peaks: dict[str, float | None] = {
        "off": float32[0] * 1e12 if float32[0] else None,
        "float16": table.half * 1e12 if table.half else None,
        "bfloat16": table.half * 1e12 if table.half and table.bf16 else None,
    }
    how = {
        "off": float32[1],
        "float16": f"float16 {half}",
        "bfloat16": f"bfloat16 {half}" if table.bf16 else f"{table.name} has no bfloat16 units",
    }
    return Accelerator(name, "GPU", title, memory_bytes, bandwidth, peaks, how, source, aliases, MEASURED_CEILINGS.get(name, {}))


def _tpu(
    name: str, title: str, bf16_tflops: float, memory_bytes: int, bandwidth: float, source: str, aliases: tuple[str, ...] = ()
) -> Accelerator:
    how = f"{bf16_tflops:g} TFLOP/s bfloat16 per chip ({source})"
    return Accelerator(
        name,
        "TPU",
        title,
        memory_bytes,
        bandwidth,
        {"off": bf16_tflops * 1e12, "float16": None, "bfloat16": bf16_tflops * 1e12},
        {
            "off": f"{how}: float32 matrix products run as bfloat16 passes at the default precision",
            "float16": "TPUs have no float16 units (use bfloat16)",
            "bfloat16": how,
        },
        source,
        aliases,
    )


NVIDIA_H100 = "NVIDIA H100 Tensor Core GPU datasheet"
NVIDIA_A100 = "NVIDIA A100 Tensor Core GPU datasheet"
TPU_DOCS = "Google Cloud TPU documentation, system architecture"
CATALOGUE: tuple[Accelerator, ...] = (
    _gpu(
        "H100-SXM", "H100 SXM", "NVIDIA H100 SXM5 80GB", 80 * GB, 3.35e12, NVIDIA_H100, ("H100", "H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    ),
    _gpu("H100-PCIe", "H100 PCIe", "NVIDIA H100 PCIe 80GB", 80 * GB, 2.0e12, NVIDIA_H100),
    _gpu("H200", "H200", "NVIDIA H200 SXM 141GB", 141 * GB, 4.8e12, "NVIDIA H200 Tensor Core GPU datasheet", ("H200-SXM",)),
    _gpu("A100-80GB", "A100", "NVIDIA A100 SXM 80GB", 80 * GB, 2.039e12, NVIDIA_A100, ("A100 80GB",)),
    _gpu("A100-40GB", "A100", "NVIDIA A100 40GB", 40 * GB, 1.555e12, NVIDIA_A100, ("A100 40GB",)),
    _gpu("L40S", "L40S", "NVIDIA L40S 48GB", 48 * GB, 864e9, "NVIDIA L40S datasheet"),
    _gpu("L4", "L4", "NVIDIA L4 24GB", 24 * GB, 300e9, "NVIDIA L4 Tensor Core GPU datasheet"),
    _gpu("A10", "A10", "NVIDIA A10 24GB", 24 * GB, 600e9, "NVIDIA A10 Tensor Core GPU datasheet"),
    _gpu("T4", "T4", "NVIDIA T4 16GB", 16 * GB, 320e9, "NVIDIA T4 Tensor Core GPU datasheet"),
    _gpu("V100", "V100 SXM2", "NVIDIA V100 SXM2 32GB", 32 * GB, 900e9, "NVIDIA V100 Tensor Core GPU datasheet", ("V100-SXM2",)),
    _gpu(
        "RTX-4090",
        "RTX 4090",
        "NVIDIA GeForce RTX 4090 24GB",
        24 * GB,
        1008e9,
        "NVIDIA Ada Lovelace GPU architecture whitepaper",
        ("4090",),
    ),
    _gpu(
        "RTX-3090", "RTX 3090", "NVIDIA GeForce RTX 3090 24GB", 24 * GB, 936e9, "NVIDIA Ampere GA102 GPU architecture whitepaper", ("3090",)
    ),
    _tpu("TPU-v4", "Google Cloud TPU v4 (one chip)", 275, 32 * GIB, 1200e9, f"{TPU_DOCS}: TPU v4", ("v4",)),
    _tpu("TPU-v5e", "Google Cloud TPU v5e (one chip)", 197, 16 * GIB, 819e9, f"{TPU_DOCS}: TPU v5e", ("v5e", "v5litepod")),
    _tpu("TPU-v5p", "Google Cloud TPU v5p (one chip)", 459, 95 * GIB, 2765e9, f"{TPU_DOCS}: TPU v5p", ("v5p",)),
)
"""Every device `main.py project --device` knows, by name (aliases and case, spaces, dashes aside)."""


class UnknownDevice(ExplainedError, ValueError):
    """A device name the catalogue does not hold; `hint` names the cards it could mean ("A100": two) and lists every name."""

    def __init__(self, given: str):
        self.given = given
        self.candidates = _names_starting(given)
        *first, last = self.candidates or [""]
        which = f"it names {', '.join(first)} and {last}: say which; " if first else ""
        self.hint = f"{which}known devices: {', '.join(device_names())}"
        super().__init__(f"unknown device {given!r}; {self.hint}")


def _names_starting(given: str) -> list[str]:
    """The catalogue names whose name or alias begins with `given` (case, spaces and dashes aside)."""
    wanted = _key(given)
    return [device.name for device in CATALOGUE if wanted and any(_key(name).startswith(wanted) for name in (device.name, *device.aliases))]


def device_names() -> list[str]:
    return [device.name for device in CATALOGUE]


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower().removeprefix("nvidia").removeprefix("google"))


def find_device(name: str) -> Accelerator:
    """The catalogue entry named `name` or one of its aliases (case, spaces and dashes aside); UnknownDevice otherwise."""
    wanted = _key(name)
    for device in CATALOGUE:
        if wanted and wanted in {_key(device.name), *(_key(alias) for alias in device.aliases)}:
            return device
    raise UnknownDevice(name)


def ceiling(device: Accelerator, precision: str) -> tuple[float | None, str]:
    """(matmul FLOP/s the device reaches at `precision`, how it was found): measured where the app has a measurement,
    else the datasheet peak x the measured card's fraction of its datasheet at that precision; None without such units."""
    peak = device.peak(precision)
    if peak is None:
        return None, device.peak_how[precision]
    measured = device.ceilings.get(precision)
    if measured is not None:
        return measured.flops, f"measured: {measured.source}"
    reference_name, reference = _reference_fraction(precision)
    return peak * reference, (
        f"datasheet {peak / 1e12:,.1f} TFLOP/s ({device.peak_how[precision]}) x {reference:.2f}, "
        f"the fraction of its datasheet the {reference_name} reached when measured (no measurement of this card)"
    )


def _reference_fraction(precision: str) -> tuple[str, float]:
    """The measured card and its measured fraction of its datasheet at `precision` (bfloat16's for float16: not measured)."""
    name, ceilings = next(iter(MEASURED_CEILINGS.items()))
    measured = ceilings.get(precision) or ceilings["bfloat16" if precision == "float16" else "off"]
    return name, measured.fraction
