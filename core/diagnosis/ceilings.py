"""This machine's measured device ceilings, cached beside the run history, with the datasheet/ISA estimates beside them.

`core.machine.peaks` measures and caches; this module names the cache file
(`peaks.json` in the history's folder) and fills in the estimates of
`core.machine.peak_estimates`.

The ceilings this process last loaded or measured are kept (`known_peaks`), so
a comparison built in the GUI thread can judge its rows against them without
reading a file or the hardware.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from core.history.store import default_path
from core.machine.peak_estimates import peak_flops
from core.machine.peaks import CACHE_FILE, TIMEOUT_S, DevicePeaks, PeaksReport, load_cached, peaks, with_estimates

ESTIMATED_PRECISIONS = {"CPU": ("float32",), "GPU": ("float32", "bfloat16", "float16")}
RUN_PRECISIONS = {"float32": "off", "bfloat16": "bfloat16", "float16": "float16"}


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


def machine_peaks(
    remeasure: bool = False,
    gpu_names: Sequence[str] | None = None,
    timeout_s: float = TIMEOUT_S,
    stop_event: threading.Event | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> PeaksReport:
    """The cached ceilings for this machine (measured now when none are cached, or on request), with estimates.

    Blocking (seconds to minutes when it measures): call it off the GUI thread.
    A measurement that measured nothing leaves the known ceilings as they were.
    """
    report = with_estimates(peaks(peaks_path(), remeasure, gpu_names, timeout_s, stop_event, on_stage), estimate)
    if report.devices:
        _known[0] = report
    return report


def cached_peaks(gpu_names: Sequence[str] | None = None) -> PeaksReport | None:
    """The cached ceilings with estimates, or None when this machine has none cached; never measures."""
    cached = load_cached(peaks_path(), gpu_names)
    report = with_estimates(cached, estimate) if cached is not None else None
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
