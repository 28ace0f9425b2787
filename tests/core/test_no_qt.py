"""core/ must never import Qt: every module, subpackages included, loaded in a fresh interpreter."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import core

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_core_modules_load_no_qt():
    modules = [m.name for m in pkgutil.walk_packages(core.__path__, "core.")]
    assert "core.training.engine" in modules and "core.machine.inspect" in modules
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "qt = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'PyQt5', 'PyQt6', 'pyqtgraph', 'shiboken6'))\n"
        "print(','.join(qt))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"core imported Qt modules: {out.stdout.strip()}"
