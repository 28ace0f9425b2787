"""A backend job's peak memory: its accelerators' allocator peaks where it trained on them, else its host RSS peak.

In the child, `device_peaks` reads each accelerator's allocator peak (JAX's
`memory_stats()["peak_bytes_in_use"]`, PyTorch's `torch.cuda.max_memory_allocated`),
sent with its steps and its reply. In the parent, `peak_memory` picks the run's
figure: on GPUs (or TPUs) the sum of its devices' peaks, named by
`allocator_peak_source`; on the CPU, or where a device kept none, the child's
host RSS peak (the whole process: Python, the framework, the data).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from core.config import backend_title


def device_peaks(backend: str) -> dict[str, int]:
    """This process's allocator peak on each accelerator by short name ("GPU:0"); {} on the CPU or where none is kept."""
    try:
        if backend == "jax":
            return _jax_peaks()
        if backend == "torch":
            return _torch_peaks()
    except Exception:  # a figure is a nicety: never the reason a run fails
        return {}
    return {}


def peak_memory(backend: str, devices: Sequence[str], peaks: Mapping[str, int], host_rss: int | None) -> tuple[int | None, str]:
    """(bytes, where they come from): the run's accelerators' peaks summed where each has one, else the host RSS peak."""
    from core.machine.gpu_sampler import allocator_peak_source  # the parent's: the child need not load NVML's helpers

    accelerators = [device for device in devices if not device.startswith("CPU")]
    if accelerators and all(device in peaks for device in accelerators):
        return sum(peaks[device] for device in accelerators), allocator_peak_source(backend, accelerators)
    return host_rss, f"host process RSS peak ({backend_title(backend)} child)" if host_rss else ""


def _jax_peaks() -> dict[str, int]:
    import jax

    peaks = {}
    for device in jax.devices():
        stats = device.memory_stats() if device.platform != "cpu" else None
        if stats and "peak_bytes_in_use" in stats:
            peaks[f"{device.platform.upper()}:{device.id}"] = int(stats["peak_bytes_in_use"])
    return peaks


def _torch_peaks() -> dict[str, int]:
    torch = sys.modules.get("torch")  # imported by Keras's backend; never imported here for a figure
    if torch is None or not torch.cuda.is_initialized():
        return {}
    return {f"GPU:{index}": int(torch.cuda.max_memory_allocated(index)) for index in range(torch.cuda.device_count())}
