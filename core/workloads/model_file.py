"""Opening a user's model file safely: `.keras`, legacy `.h5`, or a `.py` that builds the model.

Nothing in a file runs unless the caller trusts it: `.keras`/`.h5` load with
Keras `safe_mode=True` (a Lambda layer's bytecode is refused), a `.py` file is
refused outright, and nothing is ever unpickled. Every problem is one
`ModelFileError` naming the path and the reason; `needs_trust` says when trust
alone would open it. TensorFlow is imported only inside the loaders.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

KERAS, H5, PYTHON = "keras", "h5", "python"
EXTENSIONS = {".keras": KERAS, ".h5": H5, ".hdf5": H5, ".py": PYTHON}
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
SAVEDMODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
RESAVE_HINT = 'Re-save it from the code that built it: model.save("m.keras"), and open that file.'

_modules: dict[tuple[str, str], ModuleType] = {}


class ModelFileError(ValueError):
    """A model (or data) file that cannot be used: the message names the path and the reason.

    `needs_trust` is True when the file would open if the user trusts it to run its code.
    """

    def __init__(self, path: str | os.PathLike, reason: str, needs_trust: bool = False) -> None:
        self.path = str(path)
        self.reason = reason
        self.needs_trust = needs_trust
        super().__init__(f"{self.path}: {reason}")


@dataclass(frozen=True)
class ModelSource:
    """A checked model file: its absolute path, kind (KERAS, H5 or PYTHON) and content hash."""

    path: str
    kind: str
    sha256: str
    trusted: bool = False


def file_sha256(path: str | os.PathLike) -> str:
    """The hex sha256 of the file's content (what remembered trust and the history key on)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_model_path(path: str | os.PathLike, trust: bool = False) -> ModelSource:
    """The file's kind and hash, or a ModelFileError saying why it cannot be opened (runs nothing)."""
    file = Path(path).expanduser().absolute()
    if file.is_dir():
        raise ModelFileError(file, _folder_reason(file))
    if file.name in SAVEDMODEL_FILES:
        raise ModelFileError(file.parent, _folder_reason(file.parent))
    if not file.exists():
        raise ModelFileError(file, "no such file. Check the path, or pick the file again.")
    kind = EXTENSIONS.get(file.suffix.lower())
    if kind is None:
        known = ", ".join(EXTENSIONS)
        raise ModelFileError(file, f"unknown model file type {file.suffix or '(no extension)'!r}: Device Lab opens {known} files.")
    try:
        head = _read_head(file)
        digest = file_sha256(file)
    except OSError as exc:
        raise ModelFileError(file, f"cannot be read: {exc.strerror or exc}. Check its permissions.") from None
    if not head:
        raise ModelFileError(file, "the file is empty (0 bytes): it was not saved completely. Save the model again.")
    _check_signature(file, kind, head)
    if kind == KERAS and not trust:
        _refuse_code_in_config(file)
    if kind == PYTHON and not trust:
        raise ModelFileError(file, "a Python file runs its code when opened: trust it to open it (--trust on the command line).", True)
    return ModelSource(str(file), kind, digest, trust)


def check_content(source: ModelSource, expected_sha256: str) -> None:
    """Raise ModelFileError when the file's content is not the one the run was set up with (`expected_sha256`; "" checks nothing)."""
    if expected_sha256 and source.sha256 != expected_sha256:
        raise ModelFileError(
            source.path,
            f"the file changed since the run was set up (sha256 {source.sha256[:12]}…, expected {expected_sha256[:12]}…); "
            "on a cluster, every host needs the same file at the same path.",
        )


def _folder_reason(folder: Path) -> str:
    if any((folder / name).exists() for name in SAVEDMODEL_FILES):
        return (
            "this is a TensorFlow SavedModel folder. Keras 3 cannot train a SavedModel; it can only wrap it for inference "
            f"(keras.layers.TFSMLayer). {RESAVE_HINT}"
        )
    return "this is a folder, not a model file: open a .keras, .h5 or .py file."


def _read_head(file: Path) -> bytes:
    with open(file, "rb") as handle:
        return handle.read(8)


def _check_signature(file: Path, kind: str, head: bytes) -> None:
    """Refuse a file whose bytes cannot be what its extension says (corrupt, truncated or misnamed)."""
    if kind == KERAS and not zipfile.is_zipfile(file):
        raise ModelFileError(
            file,
            "not a readable .keras file (a .keras file is a zip archive, and this one is not, or it is truncated). Save the model again.",
        )
    if kind == KERAS:
        with zipfile.ZipFile(file) as archive:
            if "config.json" not in archive.namelist():
                raise ModelFileError(file, "a zip archive but not a Keras model (it has no config.json). Save the model with model.save().")
    if kind == H5 and not head.startswith(HDF5_SIGNATURE):
        raise ModelFileError(file, "not an HDF5 file (its first bytes are not the HDF5 signature): corrupt, or not a Keras .h5 model.")


def _refuse_code_in_config(file: Path) -> None:
    """Refuse an untrusted .keras file whose config holds Python bytecode (a lambda), read as JSON: no child, nothing run.

    Keras would refuse it in safe mode too, but only after TensorFlow has loaded:
    saying so from the archive's config.json is immediate.
    """
    try:
        with zipfile.ZipFile(file) as archive:
            config = json.loads(archive.read("config.json"))
        holder = _code_holder(config)
    except (OSError, ValueError, KeyError, RecursionError, zipfile.BadZipFile):
        return  # the loader says what is wrong with the file
    if holder:
        raise ModelFileError(file, needs_trust_reason(holder), needs_trust=True)


def _code_holder(node: Any, in_lambda_layer: bool = False) -> str:
    """What in a Keras config holds serialized bytecode ("a Lambda layer", "Python code (a lambda)"), or ""."""
    if isinstance(node, dict):
        if node.get("class_name") == "__lambda__":
            return "a Lambda layer" if in_lambda_layer else "Python code (a lambda)"
        in_lambda_layer = in_lambda_layer or node.get("class_name") == "Lambda"
        children: Any = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return ""
    return next((found for child in children if (found := _code_holder(child, in_lambda_layer))), "")


def needs_trust_reason(what: str) -> str:
    """Why a model holding `what` (a Lambda layer, a lambda) opens only when trusted, and how to trust it."""
    return f"the model holds {what} that Keras loads only by running code from the file: trust the file to open it (--trust on the command line)."


def load_model_file(source: ModelSource) -> Any:
    """The Keras model in a checked `.keras`/`.h5` file, uncompiled (safe mode unless trusted).

    Call inside `strategy.scope()` to place its variables. The run's optimizer and
    loss are set by the engine, so the file's compile configuration is read apart
    (`compiled_loss_config`), never restored with its optimizer state.
    """
    import keras

    try:
        return keras.saving.load_model(source.path, compile=False, safe_mode=not source.trusted)
    except Exception as exc:
        raise explain_load_error(source, exc) from None


def explain_load_error(source: ModelSource, exc: Exception) -> ModelFileError:
    """A ModelFileError for what Keras raised while loading `source`."""
    text = str(exc)
    first_line = (text.strip().splitlines() or [type(exc).__name__])[0][:300]
    if "safe_mode" in text:
        what = "a Lambda layer" if "Lambda" in text else "Python code (a lambda)"
        return ModelFileError(source.path, needs_trust_reason(what), needs_trust=True)
    if "Could not locate" in text or "Unknown layer" in text or "Unknown " in first_line:
        name = _custom_name(text)
        return ModelFileError(
            source.path,
            f"the model uses a custom class or function{name} that is not defined here. Write a .py file that defines it "
            "(registered with @keras.saving.register_keras_serializable) and whose build_model() returns "
            "keras.saving.load_model(this file), then open that .py file.",
        )
    if "No model config found" in text:
        return ModelFileError(source.path, "the file holds weights only, no model. Open the .keras, .h5 or .py file that builds the model.")
    if isinstance(exc, OSError) or "truncated" in text:
        return ModelFileError(source.path, f"the file is corrupt or truncated ({first_line}). Save the model again.")
    return ModelFileError(source.path, f"Keras could not load it: {type(exc).__name__}: {first_line}")


def _custom_name(text: str) -> str:
    for marker in ("Could not locate class '", "Could not locate function '", "Unknown layer: '", "Unknown object: '"):
        start = text.find(marker)
        if start >= 0:
            name = text[start + len(marker) :].split("'", 1)[0]
            return f" ({name})"
    return ""


def compiled_loss_config(source: ModelSource) -> tuple[Any, Any]:
    """(loss, loss_weights) from the file's compile configuration as raw JSON configs; (None, None) when not compiled.

    Read as JSON (the `.keras` archive's config.json, the `.h5` file's training_config
    attribute): no code runs and the optimizer is not rebuilt.
    """
    try:
        if source.kind == KERAS:
            with zipfile.ZipFile(source.path) as archive:
                config = json.loads(archive.read("config.json"))
            compile_config = config.get("compile_config") or {}
            return compile_config.get("loss"), compile_config.get("loss_weights")
        if source.kind == H5:
            import h5py

            with h5py.File(source.path, "r") as handle:
                raw = handle.attrs.get("training_config")
            if raw is None:
                return None, None
            training = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
            return training.get("loss"), training.get("loss_weights")
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise ModelFileError(source.path, f"its compile configuration cannot be read ({exc}). Save the model again.") from None
    return None, None


def import_model_module(source: ModelSource) -> ModuleType:
    """The trusted `.py` file imported from its path (once per content hash), with `build_model` checked."""
    if not source.trusted:
        raise ModelFileError(
            source.path, "a Python file runs its code when opened: trust it to open it (--trust on the command line).", True
        )
    key = (source.path, source.sha256)
    if key in _modules:
        return _modules[key]
    name = f"device_lab_user_model_{source.sha256[:16]}"
    spec = importlib.util.spec_from_file_location(name, source.path)
    if spec is None or spec.loader is None:
        raise ModelFileError(source.path, "Python cannot import this file.")
    module = importlib.util.module_from_spec(spec)
    folder = str(Path(source.path).parent)
    sys.path.insert(0, folder)  # the file may import modules that sit beside it
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ModelFileError(source.path, f"running the file failed: {_exception_line(exc)}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    if not callable(getattr(module, "build_model", None)):
        raise ModelFileError(source.path, "the file defines no build_model() function returning a Keras model.")
    _modules[key] = module
    return module


def build_from_module(source: ModelSource, module: ModuleType) -> Any:
    """`module.build_model()`, checked to be a Keras model; failures become a ModelFileError."""
    import keras

    try:
        model = module.build_model()
    except Exception as exc:
        raise ModelFileError(source.path, f"build_model() failed: {_exception_line(exc)}") from None
    if not isinstance(model, keras.Model):
        raise ModelFileError(source.path, f"build_model() returned {type(model).__name__}, not a Keras model.")
    return model


def _exception_line(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError at line {exc.lineno}: {exc.msg}"
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
