"""This machine's measured device ceilings, cached beside the run history, with the datasheet/ISA estimates beside them.

`core.machine.peaks` measures and caches; this module names the cache file
(`peaks.json` in the history's folder) and fills in the estimates of
`core.machine.peak_estimates`.

The ceilings this process last loaded or measured are kept (`known_peaks`), so
a comparison built in the GUI thread can judge its rows against them without
reading a file or the hardware. A contended measurement is shown to its caller
but never kept there (nor cached).

Plausibility (`judged`): a measured float32 ceiling under
`IMPLAUSIBLE_SHARE_OF_ESTIMATE` of the ISA/datasheet estimate, or bfloat16
faster than float32 on a CPU without bfloat16 units (emulated there, so
slower), can not be the device's ceiling: it is marked implausible with the
reason and never divided by.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from core.history.store import default_path
from core.machine.peak_estimates import BFLOAT16_FLAGS, cpu_flags, peak_flops
from core.machine.peaks import CACHE_FILE, TIMEOUT_S, DevicePeaks, PeaksReport, load_cached, peaks, with_estimates

ESTIMATED_PRECISIONS = {"CPU": ("float32",), "GPU": ("float32", "bfloat16", "float16")}
RUN_PRECISIONS = {"float32": "off", "bfloat16": "bfloat16", "float16": "float16"}
IMPLAUSIBLE_SHARE_OF_ESTIMATE = 0.20
"""A measured float32 matmul under this share of the estimate is implausible (a quiet EPYC measures ~30%+ of it)."""


def peaks_path() -> Path:
    """Where the measured ceilings are cached: beside the history ($DEVICE_LAB_DATA_DIR or the user data folder)."""
    return default_path().parent / CACHE_FILE


def estimate(device: DevicePeaks) -> tuple[dict[str, float], str]:
    """The datasheet (GPU) or cores x clock x vector width (CPU) estimate per precision, and how it was found.

    The CPU estimate is for float32 only: it knows nothing of bfloat16 units.
    """
    found: dict[str, float] = {}
    hows: list[str] = []
    for precision in ESTIMATED_PRECISIONS.get(device.kind, ()):
        flops, how = peak_flops({"kind": device.kind, "name": device.name}, RUN_PRECISIONS[precision])
        if flops is not None:
            found[precision] = flops
        if how not in hows:
            hows.append(how)
    return found, "; ".join(hows) or f"no estimate for {device.kind} devices"


def implausible_figures(device: DevicePeaks, native_bfloat16: bool) -> dict[str, str]:
    """Precision -> why the measured figure can not be this device's ceiling (empty when every figure is plausible)."""
    found = {}
    measured, estimated = device.matmul_flops.get("float32"), device.estimate_flops.get("float32")
    if measured is not None and estimated and measured < IMPLAUSIBLE_SHARE_OF_ESTIMATE * estimated:
        found["float32"] = (
            f"{measured / 1e9:.2f} GFLOP/s is under {IMPLAUSIBLE_SHARE_OF_ESTIMATE:.0%} of the {estimated / 1e9:.1f} GFLOP/s "
            "estimate: the device was likely busy; measure again on a quiet machine"
        )
    bf16 = device.matmul_flops.get("bfloat16")
    if device.kind == "CPU" and not native_bfloat16 and measured is not None and bf16 is not None and bf16 > measured:
        found["bfloat16"] = (
            f"{bf16 / 1e9:.2f} GFLOP/s beats float32's {measured / 1e9:.2f} on a CPU without bfloat16 units "
            "(emulated, so slower): the float32 measurement was likely disturbed; measure again on a quiet machine"
        )
        found.setdefault("float32", "below the emulated bfloat16 figure measured with it: likely disturbed")
    return found


def judged(report: PeaksReport) -> PeaksReport:
    """The report with each device's estimate filled in and its implausible figures marked."""
    report = with_estimates(report, estimate)
    native = bool(BFLOAT16_FLAGS & cpu_flags())
    devices = tuple(replace(d, implausible=implausible_figures(d, native)) for d in report.devices)
    return replace(report, devices=devices)


def machine_peaks(
    remeasure: bool = False,
    gpu_names: Sequence[str] | None = None,
    timeout_s: float = TIMEOUT_S,
    stop_event: threading.Event | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> PeaksReport:
    """The cached ceilings for this machine (measured now when none are cached, or on request), with estimates.

    Blocking (seconds to minutes when it measures): call it off the GUI thread.
    A measurement that measured nothing, a contended or an implausible one
    leaves the known ceilings as they were (it is returned, to be shown).
    """
    report = peaks(peaks_path(), remeasure, gpu_names, timeout_s, stop_event, on_stage, judge=judged)
    if report.trusted:
        _known[0] = report
    return report


def cached_peaks(gpu_names: Sequence[str] | None = None) -> PeaksReport | None:
    """The cached ceilings with estimates, or None when this machine has none cached; never measures."""
    cached = load_cached(peaks_path(), gpu_names)
    report = judged(cached) if cached is not None else None
    _known[0] = report
    return report


def cached_or_estimated(devices: Sequence[tuple[str, str, str]]) -> PeaksReport:
    """The cached ceilings with estimates; before any measurement, the listed devices' estimates alone (not `measured`).

    `devices` are (TensorFlow short name, kind, model name) of the listed devices. Never measures.
    """
    cached = cached_peaks()
    if cached is not None:
        return cached
    listed = tuple(DevicePeaks(name, kind, model) for name, kind, model in devices if name)
    return with_estimates(PeaksReport(machine={}, devices=listed), estimate)


def known_peaks() -> PeaksReport | None:
    """The ceilings this process last loaded (`cached_peaks`) or measured (`machine_peaks`); reads nothing."""
    return _known[0]


_known: list[PeaksReport | None] = [None]
