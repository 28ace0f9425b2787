"""Ceilings a verdict may divide by: never a contended measurement, never an implausible figure (each with its reason)."""

from __future__ import annotations

from core.diagnosis.ceilings import IMPLAUSIBLE_SHARE_OF_ESTIMATE, implausible_figures
from core.machine.peaks import DevicePeaks, PeaksReport

ESTIMATE = {"float32": 80e9}
CONTENDED = {"contended": True, "reason": "other processes used 63% of the CPU", "other_cpu_share": 0.63}


def _cpu(float32: float, bfloat16: float) -> DevicePeaks:
    return DevicePeaks("CPU:0", "CPU", "A CPU", {"float32": float32, "bfloat16": bfloat16}, 20e9, estimate_flops=ESTIMATE)


def test_float32_far_under_the_estimate_is_implausible():
    low = implausible_figures(_cpu(7.35e9, 3e9), native_bfloat16=False)  # the 7.35 GFLOP/s against ~80
    assert set(low) == {"float32"} and "under 20% of the 80.0 GFLOP/s estimate" in low["float32"]
    assert implausible_figures(_cpu(IMPLAUSIBLE_SHARE_OF_ESTIMATE * 80e9 * 1.01, 3e9), native_bfloat16=False) == {}


def test_bfloat16_beating_float32_without_bfloat16_units_is_implausible_but_not_with_them():
    found = implausible_figures(_cpu(30e9, 40e9), native_bfloat16=False)
    assert set(found) == {"float32", "bfloat16"} and "without bfloat16 units" in found["bfloat16"]
    assert implausible_figures(_cpu(30e9, 40e9), native_bfloat16=True) == {}


def test_a_contended_or_implausible_measurement_is_never_a_ceiling():
    quiet = PeaksReport({"cpu": "A CPU"}, (_cpu(60e9, 30e9),))
    assert quiet.trusted and quiet.ceiling(["CPU:0"], "off") == (60e9, "measured float32 matmul on A CPU")
    busy = PeaksReport({"cpu": "A CPU"}, (_cpu(60e9, 30e9),), conditions=CONTENDED)
    assert busy.contended and not busy.trusted
    ceiling, why = busy.ceiling(["CPU:0"], "off")
    assert ceiling is None and CONTENDED["reason"] in why
    marked = DevicePeaks(**{**_cpu(7e9, 3e9).__dict__, "implausible": {"float32": "far under the estimate"}})
    odd = PeaksReport({"cpu": "A CPU"}, (marked,))
    assert odd.implausible and not odd.trusted
    ceiling, why = odd.ceiling(["CPU:0"], "off")
    assert ceiling is None and marked.implausible["float32"] in why
    assert odd.ceiling(["CPU:0"], "bfloat16")[0] == 3e9  # a plausible figure of the same device stays usable
    assert PeaksReport.from_dict(busy.to_dict()) == busy  # kept as measured when written and read back


def test_a_run_on_another_backend_says_its_ceiling_was_measured_with_tensorflow():
    from core.diagnosis.readout import peak_text
    from core.results import RunResult, RunStatus

    def judged(backend: str) -> str:
        result = RunResult(
            status=RunStatus.COMPLETED,
            config={"model": "mlp", "backend": backend},
            achieved_flops=1.5e9,
            pct_of_measured_peak=2.5,
        )
        return peak_text(result)

    assert judged("tensorflow").startswith("2.5% of the measured 60.00 GFLOP/s ceiling")
    assert judged("jax").startswith("2.5% of TensorFlow's measured 60.00 GFLOP/s ceiling")
