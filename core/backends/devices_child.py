"""`python -m core.backends.devices_child BACKEND`: the devices JAX or PyTorch sees, as its reply; imports no TensorFlow."""

from __future__ import annotations

import sys
from typing import Any

from core import child_process


def jax_devices() -> list[dict[str, Any]]:
    """Every device `jax.devices()` lists (the default platform: GPUs where JAX has CUDA, else CPUs)."""
    import jax

    listed = []
    for device in jax.devices():
        stats = _memory_stats(device)
        listed.append(
            {
                "name": f"{device.platform.upper()}:{device.id}",
                "kind": device.platform.upper(),
                "description": str(getattr(device, "device_kind", device.platform)),
                "memory_total_bytes": stats.get("bytes_limit"),
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
