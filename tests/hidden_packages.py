"""A child process's environment in which TensorFlow and Qt are not installed, as on the GPU machines this project is lent.

`without_tf_qt/sitecustomize.py` on PYTHONPATH refuses tensorflow, tf_keras, PySide6, shiboken6 and
pyqtgraph to that process and to every child it starts (the app's children keep PYTHONPATH).
"""

from __future__ import annotations

import os
from pathlib import Path

WITHOUT_TF_QT = Path(__file__).resolve().parent / "without_tf_qt"


def env_without_tensorflow_and_qt(**changes: str) -> dict[str, str]:
    """This process's environment with TensorFlow and Qt hidden, then `changes`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(WITHOUT_TF_QT), env.get("PYTHONPATH", "")) if p)
    env.update(changes)
    return env
