"""A backend job's peak memory: its GPUs' allocator peaks where it trained on them, else its host RSS peak.

The choice is a pure function of what the child reported; no GPU is here, so the device peaks are
the figures a JAX or PyTorch child on one would send. The child's own reading is checked by a real
JAX run on the CPU (`test_backend_gpu_memory`), where it must stay the host RSS peak.
"""

from __future__ import annotations

from core.backends.peak_memory import device_peaks, peak_memory

GIB = 2**30
RSS = 5_142_822_912  # what the JAX child on an H200 reported as its host RSS peak


def test_a_jax_run_on_a_gpu_reports_its_allocator_peak_not_the_host_rss():
    peak, source = peak_memory("jax", ("GPU:0",), {"GPU:0": 2 * GIB, "GPU:1": 5 * GIB}, RSS)
    assert (peak, source) == (2 * GIB, "JAX allocator peak on GPU:0 (device memory_stats)")


def test_a_pytorch_run_on_a_gpu_reports_torch_cuda_max_memory_allocated():
    assert peak_memory("torch", ("GPU:1",), {"GPU:0": 0, "GPU:1": GIB}, RSS) == (
        GIB,
        "PyTorch allocator peak on GPU:1 (torch.cuda.max_memory_allocated)",
    )


def test_a_run_over_several_gpus_sums_their_peaks_as_tensorflow_does():
    peak, source = peak_memory("jax", ("GPU:0", "GPU:1"), {"GPU:0": 2 * GIB, "GPU:1": 3 * GIB}, RSS)
    assert (peak, source) == (5 * GIB, "JAX allocator peaks on GPU:0, GPU:1, summed (device memory_stats)")


def test_a_cpu_run_or_a_gpu_without_a_figure_reports_the_host_rss_peak():
    host = (RSS, "host process RSS peak (JAX child)")
    assert peak_memory("jax", ("CPU:0",), {}, RSS) == host
    assert peak_memory("jax", ("CPU:0",), {"GPU:0": GIB}, RSS) == host, "a GPU the run did not train on is not its memory"
    assert peak_memory("jax", ("GPU:0", "GPU:1"), {"GPU:0": GIB}, RSS) == host, "half a sum is no figure"
    assert peak_memory("torch", (), {}, None) == (None, "")


def test_a_backend_without_an_accelerator_allocator_reads_no_device_peaks():
    assert device_peaks("tensorflow") == {} and device_peaks("") == {}
