"""TensorFlow's import in a Device Lab process leaves JAX unloaded, and JAX still imports when asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
import core
import tensorflow
loaded_with_tensorflow = "jax" in sys.modules
import jax
print(loaded_with_tensorflow, jax.numpy.add(1, 2).item())
"""


@pytest.mark.slow
def test_importing_tensorflow_after_core_loads_no_jax_and_jax_imports_later() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "3"]


def test_only_the_named_modules_are_refused_jax() -> None:
    from core.tensorflow_import import JAX_OPTIONAL_FOR, _NoOptionalJax

    finder = _NoOptionalJax()
    assert finder.find_spec("jax") is None, "an import from anywhere else goes on to the real finders"
    assert finder.find_spec("numpy") is None
    for module in JAX_OPTIONAL_FOR:
        with pytest.raises(ModuleNotFoundError, match=module):
            exec("finder.find_spec('jax')", {"__name__": module, "finder": finder})
