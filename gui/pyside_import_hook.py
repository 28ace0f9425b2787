"""Make PySide6's per-import source scan cheap, so TensorFlow imports as fast after PySide6 as before it.

Once PySide6 is loaded, every later import runs shiboken's `feature_imported`
hook, which asks "does this module use PySide6?" through
`inspect.getsource(module)`: it splits every source file into lines and keeps
them in `linecache` for good. TensorFlow and Keras are ~2,800 modules; on a
2-core machine the scan added ~0.45 s to `import tensorflow` (median of 5
alternated runs: 2.87 s vs 2.41 s bare; see napari/napari#8584). The answer
stays the same here: the source file is searched for "PySide6", as bytes,
without the line cache.
"""

from __future__ import annotations

import sys
from types import ModuleType

import PySide6.QtCore  # noqa: F401  (loads shibokensupport.feature, the module patched below)

FEATURE_MODULE = "shibokensupport.feature"
SCAN_FUNCTION = "_mod_uses_pyside"


def module_uses_pyside(module: ModuleType) -> bool:
    """True when the module's Python source file mentions PySide6 (shiboken's own test, read as bytes)."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    if not isinstance(origin, str) or not origin.endswith(".py"):
        return False
    try:
        with open(origin, "rb") as source:
            return b"PySide6" in source.read()
    except OSError:
        return False


def install() -> bool:
    """Swap shiboken's scan for `module_uses_pyside`; False (and nothing changed) if this PySide6 has no such hook."""
    feature = sys.modules.get(FEATURE_MODULE)
    if feature is None or not callable(getattr(feature, SCAN_FUNCTION, None)):
        return False
    setattr(feature, SCAN_FUNCTION, module_uses_pyside)
    return True
