"""core/ must never import Qt: checked in a fresh interpreter so nothing else can hide it."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import core

ROOT = Path(__file__).resolve().parents[2]


def test_core_modules_load_no_qt():
    modules = [f"core.{m.name}" for m in pkgutil.iter_modules(core.__path__)]
    assert "core.training" in modules and "core.devices" in modules
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "qt = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'PyQt5', 'PyQt6', 'pyqtgraph', 'shiboken6'))\n"
        "print(','.join(qt))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"core imported Qt modules: {out.stdout.strip()}"
