"""A ceilings cache written as a measurement on this machine would leave it, for tests that need a judged run.

The float32 ceiling is half this CPU's ISA estimate: a fixed figure is not
plausible everywhere (60 GFLOP/s is under 20% of a 2-core AVX-512 Xeon's
estimate, so the verdict would rightly set it aside as a disturbed measurement).
"""

from __future__ import annotations

from pathlib import Path

from core.diagnosis.ceilings import estimate
from core.machine import peaks
from core.machine.peaks import DevicePeaks, PeaksReport

ESTIMATE = estimate(DevicePeaks("CPU:0", "CPU", peaks.machine_key()["cpu"]))[0].get("float32") or 120e9
FLOAT32 = round(ESTIMATE / 2, -9)  # plausible: half the ISA estimate (under 20% of it would be marked implausible)
BFLOAT16 = FLOAT32 / 2  # emulated on a CPU without bfloat16 units, so slower (judged plausible either way)
BANDWIDTH = 20e9
MEASURED_AT = "2026-01-01T00:00:00+00:00"


def write_ceilings_cache(path: Path, float32: float = FLOAT32, bfloat16: float | None = BFLOAT16) -> PeaksReport:
    """Write this machine's CPU:0 ceilings (FLOP/s by precision, BANDWIDTH bytes/s) to the cache file `path`."""
    key = peaks.machine_key()
    flops = {"float32": float32} if bfloat16 is None else {"float32": float32, "bfloat16": bfloat16}
    device = DevicePeaks("CPU:0", "CPU", key["cpu"], flops, BANDWIDTH, method="written by the test", measured_at=MEASURED_AT)
    report = PeaksReport({**key, "gpus": []}, (device,), MEASURED_AT)
    peaks.save(path, report)
    return report
