"""The ceilings' cache beside the history, and the datasheet/ISA estimates filled in beside the measurements."""

import os
from pathlib import Path

from core.diagnosis import ceilings
from core.machine import peaks
from core.machine.peak_estimates import cpu_peak_flops
from core.machine.peaks import DevicePeaks, PeaksReport


def test_the_cache_lives_beside_the_history():
    assert ceilings.peaks_path() == Path(os.environ["DEVICE_LAB_DATA_DIR"]) / "peaks.json"


def test_cpu_estimate_is_the_float32_isa_figure():
    found, how = ceilings.estimate(DevicePeaks("CPU:0", "CPU", "AMD EPYC"))
    expected, expected_how = cpu_peak_flops()
    assert found == {"float32": expected} and how == expected_how


def test_gpu_estimate_comes_from_the_datasheet_per_precision():
    # A GPU model name only: the datasheet table is looked up, no GPU is needed (there is none here).
    found, how = ceilings.estimate(DevicePeaks("GPU:0", "GPU", "NVIDIA H100 80GB HBM3"))
    assert found == {"float32": 494.7e12, "bfloat16": 989.4e12, "float16": 989.4e12}
    assert "TF32" in how and "datasheet" in how
    assert ceilings.estimate(DevicePeaks("GPU:0", "GPU", "Unknown Accelerator 9000")) == (
        {},
        "GPU model 'Unknown Accelerator 9000' is not in the peak table",
    )


def test_machine_peaks_reads_the_cache_and_adds_estimates():
    cached = PeaksReport(peaks.machine_key(), (DevicePeaks("CPU:0", "CPU", "AMD EPYC", {"float32": 75e9}, bandwidth_bytes_per_s=2.5e10),))
    peaks.save(ceilings.peaks_path(), cached)
    try:
        report = ceilings.machine_peaks()
        assert ceilings.known_peaks() is report  # what a comparison built later judges its rows against
        assert ceilings.cached_peaks().device("CPU:0").matmul_flops == {"float32": 75e9}
    finally:
        ceilings.peaks_path().unlink()
    assert ceilings.cached_peaks() is None and ceilings.known_peaks() is None  # nothing cached: nothing known
    assert report.cached
    cpu = report.device("CPU:0")
    assert cpu.matmul_flops == {"float32": 75e9} and cpu.bandwidth_bytes_per_s == 2.5e10
    assert cpu.estimate_flops == {"float32": cpu_peak_flops()[0]}
