"""Help > About: what Device Lab is, and the versions actually running (for bug reports).

Qt and Python versions are known at once; TensorFlow's (with Keras and the
CUDA/cuDNN it was built against) need TensorFlow imported, so they are read in
a worker thread (at once when start-up has imported it already).
"""

from __future__ import annotations

import html
import platform
import sys
from importlib import metadata

import numpy
import PySide6
from PySide6.QtCore import Qt, qVersion
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from gui.icons import app_icon
from gui.qt_threads import run_in_background

DISTRIBUTION = "device-lab"
TAGLINE = "How fast does this model train on each device and strategy I have, and why?"
LOADING = "loading…"


def app_version() -> str:
    """Device Lab's installed version, or "dev" when running from a source tree that is not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "dev"


def base_versions() -> dict[str, str]:
    """Versions known without importing TensorFlow (pyqtgraph is imported here if the plots are not built yet)."""
    import pyqtgraph

    return {
        "Device Lab": app_version(),
        "Python": f"{platform.python_version()} ({platform.python_implementation()}, {sys.platform})",
        "Qt": qVersion(),
        "PySide6": PySide6.__version__,
        "pyqtgraph": pyqtgraph.__version__,
        "NumPy": numpy.__version__,
    }


def tensorflow_versions() -> dict[str, str]:
    """TensorFlow, Keras, and the CUDA/cuDNN TensorFlow was built with; imports TensorFlow (call off the GUI thread)."""
    import keras
    import tensorflow as tf

    info = dict(tf.sysconfig.get_build_info())
    cuda = info.get("cuda_version") if info.get("is_cuda_build") else None
    return {
        "TensorFlow": tf.__version__,
        "Keras": keras.__version__,
        "CUDA (TF build)": str(cuda) if cuda else "not a CUDA build",
        "cuDNN (TF build)": str(info.get("cudnn_version") or "-") if cuda else "-",
    }


def versions_text(versions: dict[str, str]) -> str:
    """Plain text, one "name: version" per line (what Copy puts on the clipboard)."""
    return "\n".join(f"{name}: {version}" for name, version in versions.items())


class AboutDialog(QDialog):
    """The app, its purpose, and a table of versions with a Copy button."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("aboutDialog")
        self.setWindowTitle("About Device Lab")
        self.versions = {**base_versions(), **dict.fromkeys(("TensorFlow", "Keras", "CUDA (TF build)", "cuDNN (TF build)"), LOADING)}
        icon = QLabel()
        icon.setPixmap(app_icon().pixmap(64, 64))
        icon.setAlignment(Qt.AlignmentFlag.AlignTop)
        head = QLabel(f"<h2>Device Lab</h2><p>{html.escape(TAGLINE)}</p>"
                      "<p>Lists CPUs, GPUs and TPUs, trains sample models under tf.distribute strategies, "
                      "and plots loss and step time live. Apache-2.0.</p>")  # fmt: skip
        head.setWordWrap(True)
        self.versions_label = QLabel()
        self.versions_label.setObjectName("aboutVersions")
        self.versions_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_button = QPushButton("Copy versions")
        self.copy_button.setObjectName("copyVersionsButton")
        self.copy_button.setToolTip("Copy the versions to the clipboard, e.g. for a bug report.")
        self.copy_button.clicked.connect(self.copy_versions)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Close).setToolTip("Close this window (Esc).")
        top = QHBoxLayout()
        top.addWidget(icon)
        top.addWidget(head, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.versions_label)
        layout.addWidget(buttons)
        self._show_versions()
        self._load_tensorflow()

    def copy_versions(self) -> None:
        QGuiApplication.clipboard().setText(versions_text(self.versions))

    def _load_tensorflow(self) -> None:
        run_in_background(tensorflow_versions, on_result=self._on_tensorflow, on_error=self._on_tensorflow_failed, name="about-versions")

    def _on_tensorflow(self, versions: dict[str, str]) -> None:
        self.versions.update(versions)
        self._show_versions()

    def _on_tensorflow_failed(self, message: str) -> None:
        self.versions.update({"TensorFlow": f"could not be imported: {message}", "Keras": "-"})
        self._show_versions()

    def _show_versions(self) -> None:
        rows = "".join(
            f"<tr><td><b>{html.escape(name)}</b>&nbsp;&nbsp;</td><td>{html.escape(version)}</td></tr>"
            for name, version in self.versions.items()
        )
        self.versions_label.setText(f"<table>{rows}</table>")
