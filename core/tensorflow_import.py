"""TensorFlow's import: without JAX's, and where TensorFlow is not installed, a one-line refusal.

`tensorflow_installed` tells, without importing it, whether TensorFlow can be
imported here; `require_tensorflow` raises TensorFlowMissing (the CLI's exit
code 2) for a job that needs it on a machine with JAX or PyTorch only (GPU
servers often have no TensorFlow): the message says to install it or to pick
another backend.

`import tensorflow` loads JAX too where JAX is installed.

Two modules that TensorFlow's import loads try `import jax` (inside a `try`):
`tensorflow.lite.python.util`, for TFLite's JAX converter, and Keras's
`keras.src.callbacks.orbax_checkpoint`, to patch old JAX versions. With the
[jax] extra that is about 0.9 s of a 3.1 s TensorFlow start, in every process
that imports TensorFlow: the window, each CLI command, each probe and worker
(measured with `python -X importtime -c "import tensorflow"` on this
project's 2-core VM). A TensorFlow process uses neither, so
`skip_jax_in_tensorflow_import` (installed when `core` is imported) makes
those two imports fail as if JAX were absent. Only theirs are refused:
`import jax` anywhere else, in any thread, works as always, and a JAX-backend
process has loaded JAX before either module runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import FrameType, ModuleType

JAX_OPTIONAL_FOR = ("tensorflow.lite.python.util", "keras.src.callbacks.orbax_checkpoint")
_FRAMES_TO_CALLER = 12  # find_spec is called a few importlib frames below the import statement


class _NoOptionalJax(importlib.abc.MetaPathFinder):
    """Refuses `jax` to the module bodies in JAX_OPTIONAL_FOR; stands aside for every other import."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> ModuleSpec | None:
        importer = _importing_module() if fullname == "jax" else None
        if importer in JAX_OPTIONAL_FOR:
            raise ModuleNotFoundError(f"JAX is not loaded for {importer} (see core.tensorflow_import)", name="jax")
        return None


def _importing_module() -> str | None:
    """The first of JAX_OPTIONAL_FOR found among the frames above (those of the import machinery first)."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(_FRAMES_TO_CALLER):
        if frame is None:
            return None
        name = frame.f_globals.get("__name__")
        if name in JAX_OPTIONAL_FOR:
            return name
        frame = frame.f_back
    return None


def skip_jax_in_tensorflow_import() -> None:
    """Put the finder first on `sys.meta_path` (once per process)."""
    if not any(isinstance(finder, _NoOptionalJax) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NoOptionalJax())


INSTALL_OR_SWITCH = "install it (pip install tensorflow) or train on JAX or PyTorch (--backend jax or --backend torch)"


class TensorFlowMissing(Exception):
    """A job needs TensorFlow and it is not installed here; the message says what needs it and what to do."""

    def __init__(self, what: str):
        super().__init__(f"{what} needs TensorFlow, which is not installed here: {INSTALL_OR_SWITCH}")


def tensorflow_installed() -> bool:
    """Whether `import tensorflow` can work in this process: found on the path and not blocked (None in sys.modules)."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def require_tensorflow(what: str) -> None:
    """Raise TensorFlowMissing naming `what` ("this run on the tensorflow backend") where TensorFlow is not installed."""
    if not tensorflow_installed():
        raise TensorFlowMissing(what)


def installed_engine() -> str:
    """The framework installed here, without importing it: TensorFlow, else JAX, else PyTorch; "" when none is."""
    if tensorflow_installed():
        return "tensorflow"
    for name in ("jax", "torch"):
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return ""


def installed_keras_backend() -> str:
    """The backend Keras runs on in this process's children where TensorFlow is not installed: JAX, else PyTorch
    ("jax" when neither is, so that Keras says what is missing); "tensorflow" where it is installed."""
    return installed_engine() or "jax"
