"""`python -m core.backends.devices_child BACKEND`: the devices JAX or PyTorch sees, as its reply; imports no TensorFlow."""

from __future__ import annotations

import sys
from typing import Any

from core import child_process


def jax_devices() -> list[dict[str, Any]]:
    """Every device JAX has: its default platform's (GPUs where JAX has CUDA) and then its CPUs.

    `jax.devices()` alone lists only the default platform, so on a GPU machine it hid the CPU
    that a `jax:CPU:0` target trains on (seen on an H100, 2026-11-27). An accelerator's
    memory is JAX's allocator limit (`bytes_limit`, by default 75% of the card), said as such.
    """
    import jax

    devices = list(jax.devices())
    if devices and devices[0].platform != "cpu":
        devices += jax.devices("cpu")
    listed = []
    for device in devices:
        limit = _memory_stats(device).get("bytes_limit")
        listed.append(
            {
                "name": f"{device.platform.upper()}:{device.id}",
                "kind": device.platform.upper(),
                "description": str(getattr(device, "device_kind", device.platform)),
                "memory_total_bytes": limit,
                "memory_source": "JAX's allocator limit (XLA_PYTHON_CLIENT_MEM_FRACTION)" if limit else None,
            }
        )
    return listed


def torch_devices() -> list[dict[str, Any]]:
    """The CPU, and each CUDA device PyTorch sees with its total memory."""
    import torch

    listed: list[dict[str, Any]] = [{"name": "CPU:0", "kind": "CPU", "description": "cpu", "memory_total_bytes": None}]
    for index in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
        properties = torch.cuda.get_device_properties(index)
        listed.append(
            {"name": f"GPU:{index}", "kind": "GPU", "description": properties.name, "memory_total_bytes": properties.total_memory}
        )
    return listed


def _memory_stats(device: Any) -> dict[str, Any]:
    try:
        return device.memory_stats() or {}
    except Exception:  # a CPU device has none
        return {}


def main(argv: list[str] | None = None) -> int:
    backend = (sys.argv[1:] if argv is None else argv)[0]
    child_process.stage(f"importing {backend}")
    listed = {"jax": jax_devices, "torch": torch_devices}[backend]()
    child_process.reply({"backend": backend, "devices": listed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
