"""Each installed non-TensorFlow backend's devices, listed in a child process (the app never imports JAX or PyTorch)."""

from __future__ import annotations

from typing import Any

from core.backends.available import backends
from core.child_process import Child
from core.config import backend_title

LIST_LIMIT_S = 60.0


def list_backend_devices(limit_s: float = LIST_LIMIT_S) -> list[dict[str, Any]]:
    """[{"backend", "title", "installed", "devices": [...], "error"}] for JAX and PyTorch; TensorFlow's are the app's own list."""
    listed = []
    for info in backends():
        if info.name == "tensorflow":
            continue
        entry: dict[str, Any] = {"backend": info.name, "title": info.title, "installed": info.installed, "devices": [], "error": ""}
        if not info.installed:
            entry["error"] = info.note
        else:
            with Child.start(
                "core.backends.devices_child", [info.name], what=f"listing {backend_title(info.name)}'s devices", limit_s=limit_s
            ) as child:
                end = child.wait()
                reply = child.result if isinstance(child.result, dict) else None
                if end.ok and reply is not None:
                    entry["devices"] = reply["devices"]
                else:
                    entry["error"] = child.describe_end()
        listed.append(entry)
    return listed
