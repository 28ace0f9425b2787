"""A child process's environment in which some installed packages are not (TensorFlow and Qt, as on the GPU machines
this project is lent; or JAX, as on a machine that installed Device Lab before JAX came with it).

`without_packages/sitecustomize.py` on PYTHONPATH refuses the packages DEVICE_LAB_HIDDEN_PACKAGES names to that
process and to every child it starts (the app's children keep the environment).
"""

from __future__ import annotations

import os
from pathlib import Path

WITHOUT_PACKAGES = Path(__file__).resolve().parent / "without_packages"
TENSORFLOW_AND_QT = ("tensorflow", "tf_keras", "PySide6", "shiboken6", "pyqtgraph")
JAX = ("jax", "jaxlib")


def env_without(packages: tuple[str, ...], **changes: str) -> dict[str, str]:
    """This process's environment with `packages` (top-level module names) hidden, then `changes`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(WITHOUT_PACKAGES), env.get("PYTHONPATH", "")) if p)
    env["DEVICE_LAB_HIDDEN_PACKAGES"] = ",".join(packages)
    env.update(changes)
    return env


def env_without_tensorflow_and_qt(**changes: str) -> dict[str, str]:
    """This process's environment with TensorFlow and Qt hidden, then `changes`."""
    return env_without(TENSORFLOW_AND_QT, **changes)
