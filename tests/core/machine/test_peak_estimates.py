"""Peak estimates without measuring: the CPU's from its ISA, GPUs' from the datasheet table."""

from types import SimpleNamespace

import pytest

from core.machine.peak_estimates import cpu_peak_flops, gpu_peak, peak_flops


def test_cpu_peak_estimate_is_positive_and_explained():
    flops, how = cpu_peak_flops()
    assert flops is not None and flops > 1e9
    assert "cores" in how and "FLOPs/cycle" in how
    assert peak_flops({"kind": "CPU", "name": "this CPU"}) == (flops, how)


@pytest.mark.parametrize(
    "name, precision, tf32, tflops",
    [
        ("NVIDIA H100 80GB HBM3", "off", True, 494.7),
        ("NVIDIA H100 80GB HBM3", "off", False, 67.0),
        ("NVIDIA H100 80GB HBM3", "bfloat16", True, 989.4),
        ("NVIDIA H100 PCIe", "float16", True, 756.0),
        ("NVIDIA H200", "bfloat16", True, 989.4),
        ("NVIDIA A100-SXM4-80GB", "off", True, 156.0),
        ("Tesla V100-SXM2-16GB", "off", True, 15.7),
        ("Tesla T4", "float16", True, 65.0),
        ("NVIDIA L4", "bfloat16", True, 121.0),
        ("NVIDIA GeForce RTX 4090", "float16", True, 165.2),
    ],
)
def test_gpu_peaks_come_from_the_datasheet_table(name, precision, tf32, tflops):
    # A DeviceInfo-shaped object: the table needs only kind and name (no GPU here).
    flops, how = peak_flops(SimpleNamespace(kind="GPU", name=name), precision, tf32)
    assert flops == pytest.approx(tflops * 1e12)
    assert "datasheet" in how


def test_gpu_peak_unknowns_say_why():
    assert peak_flops({"kind": "GPU", "name": "Tesla T4"}, "bfloat16") == (None, "T4 has no bfloat16 tensor cores")
    assert peak_flops({"kind": "GPU", "name": "NVIDIA A10G"})[0] is None
    assert gpu_peak("NVIDIA A10") is not None and gpu_peak("NVIDIA A10G") is None
    assert peak_flops({"kind": "TPU", "name": "TPU v4"})[0] is None
