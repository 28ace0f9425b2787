"""Opening a user's model file safely: `.keras`, legacy `.h5`, or a `.py` that builds the model.

Nothing in a file runs unless the caller trusts it: `.keras`/`.h5` load with
Keras `safe_mode=True` (a Lambda layer's bytecode is refused), a `.py` file is
refused outright, and nothing is ever unpickled. A `.keras` archive is checked
against its size caps before anything reads it (`archive`), known tf.keras 2
config differences are fixed before Keras deserialises (`legacy_compat`), and a
trusted custom-objects `.py` can define the model's own classes. Every problem is
one `ModelFileError` naming the path and the reason; `needs_trust` says when trust
alone would open it. TensorFlow is imported only inside the loaders.

`ModelRef` is what a run asks to open (the model and what opening it may do),
`ModelSource` what `check_model_path` found there.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import inspect
import json
import os
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from core.config import MODEL_FILE_SUFFIXES
from core.errors import ExplainedError
from core.files import NotARegularFile, open_regular, os_error_words, regular_file
from core.workloads import legacy_compat
from core.workloads.archive import ArchiveLimitError, check_archive, read_json_member
from core.workloads.declared_weights import oversized_reason

KERAS, H5, PYTHON = "keras", "h5", "python"
EXTENSIONS = dict(zip(MODEL_FILE_SUFFIXES, (KERAS, H5, H5, PYTHON), strict=True))
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
SAVEDMODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
RESAVE_HINT = 'Re-save it from the code that built it: model.save("m.keras"), and open that file.'
CUSTOM_OBJECTS_HINT = (
    "Give the .py file that defines it (registered with @keras.saving.register_keras_serializable, or a plain class "
    'of that name): --custom-objects FILE.py with --trust, or "Open with custom layers…" in the window\'s trust dialog.'
)
MAX_CAUSE_CHARS = 1200  # a Keras message past this is cut at a word, after its cause
PACKAGE_EXTRAS = {"keras_hub": ("keras-hub", "hub"), "keras_nlp": ("keras-nlp", "hub"), "keras_cv": ("keras-cv", "")}

_modules: dict[tuple[str, str], ModuleType] = {}


class ModelFileError(ExplainedError, ValueError):
    """A model (or data) file that cannot be used: the message names the path and the reason.

    `needs_trust` is True when the file would open if the user trusts it to run its code;
    `needs_custom_objects` when it names a class only a custom-objects file can define.
    """

    def __init__(self, path: str | os.PathLike, reason: str, needs_trust: bool = False, needs_custom_objects: bool = False) -> None:
        self.path = str(path)
        self.reason = reason
        self.needs_trust = needs_trust
        self.needs_custom_objects = needs_custom_objects
        super().__init__(f"{self.path}: {reason}")


@dataclass(frozen=True)
class ModelSource:
    """A checked model file: its absolute path, kind (KERAS, H5 or PYTHON) and content hash."""

    path: str
    kind: str
    sha256: str
    trusted: bool = False
    custom_objects: str = ""


def file_sha256(path: str | os.PathLike) -> str:
    """The hex sha256 of the file's content (what remembered trust and the history key on).

    Only a regular file is read: a device (/dev/zero) or a named pipe would never end or never start, so it raises
    `core.files.NotARegularFile` (an OSError) at once, as it does any other OSError.
    """
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def regular_file_reason(path: str | os.PathLike, missing: str, wanted: str = "a .keras, .h5 or .py file") -> str:
    """Why `path` cannot be read as a file ("" when it is a regular file, or a folder, which callers explain themselves):
    `missing` when there is none, else what it is and that `wanted` is what to give.

    Checked without opening it: a named pipe, a device or a socket (also behind a symbolic link) is refused at once,
    never read; a name over 255 bytes is said in words.
    """
    try:
        regular_file(path)
    except FileNotFoundError:
        return missing
    except NotARegularFile as exc:
        return f"{exc.strerror}: give {wanted}." if not exc.is_folder else ""
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            return missing
        advice = "Give a shorter path (rename the file or a folder on it)." if exc.errno == errno.ENAMETOOLONG else "Check its permissions."
        return f"cannot be opened: {os_error_words(exc, path)}. {advice}"
    return ""


def check_model_path(path: str | os.PathLike, trust: bool = False, custom_objects: str | os.PathLike | None = None) -> ModelSource:
    """The file's kind and hash, or a ModelFileError saying why it cannot be opened (runs nothing).

    `custom_objects` is a `.py` file defining the model's custom classes: it runs
    when the model loads, so it needs `trust` like a `.py` model.
    """
    file = Path(path).expanduser().absolute()
    if _is_folder(file):
        raise ModelFileError(file, _folder_reason(file))
    if file.name in SAVEDMODEL_FILES:
        raise ModelFileError(file.parent, _folder_reason(file.parent))
    problem = regular_file_reason(file, "no such file. Check the path, or pick the file again.")
    if problem:
        raise ModelFileError(file, problem)
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
    if kind == KERAS:
        _refuse_tf_keras_archive(file)
        config = _archive_config(file)
        if not trust:
            _refuse_code_in_config(file, config)
        _refuse_oversized(file, config)
    if kind == PYTHON and not trust:
        raise ModelFileError(file, "a Python file runs its code when opened: trust it to open it (--trust on the command line).", True)
    extra = check_custom_objects(custom_objects, trust) if custom_objects else ""
    return ModelSource(str(file), kind, digest, trust, extra)


def check_custom_objects(path: str | os.PathLike, trust: bool) -> str:
    """The absolute path of a custom-objects `.py` file, or a ModelFileError (missing, not .py, not trusted)."""
    file = Path(path).expanduser().absolute()
    missing = "no such custom-objects file. Check the path of --custom-objects."
    problem = missing if _is_folder(file) else regular_file_reason(file, missing, "the .py file that defines the model's custom classes")
    if problem:
        raise ModelFileError(file, problem)
    if file.suffix.lower() != ".py":
        raise ModelFileError(file, "--custom-objects takes a .py file that defines the model's custom classes.")
    if not trust:
        raise ModelFileError(
            file, "a custom-objects file runs its code when the model opens: trust it to use it (--trust on the command line).", True
        )
    return str(file)


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
    with open_regular(file) as handle:
        return handle.read(8)


def _is_folder(path: Path) -> bool:
    """True for a folder (or a link to one); False for anything else, and for a path too long to look at."""
    return os.path.isdir(path)


def _check_signature(file: Path, kind: str, head: bytes) -> None:
    """Refuse a file whose bytes cannot be what its extension says (corrupt, truncated or misnamed)."""
    if kind == KERAS and not zipfile.is_zipfile(file):
        raise ModelFileError(
            file,
            "not a readable .keras file (a .keras file is a zip archive, and this one is not, or it is truncated). Save the model again.",
        )
    if kind == KERAS:
        try:
            check_archive(file)
        except ArchiveLimitError as exc:
            raise ModelFileError(file, str(exc)) from None
    if kind == H5 and not head.startswith(HDF5_SIGNATURE):
        raise ModelFileError(file, "not an HDF5 file (its first bytes are not the HDF5 signature): corrupt, or not a Keras .h5 model.")


def _archive_config(file: Path) -> Any:
    """The .keras archive's config.json, read as JSON within its cap; None when it cannot be read (the loader says why)."""
    try:
        return read_json_member(file, "config.json")
    except ArchiveLimitError as exc:
        raise ModelFileError(file, str(exc)) from None
    except (OSError, ValueError, KeyError, RecursionError, zipfile.BadZipFile):
        return None


def _refuse_code_in_config(file: Path, config: Any) -> None:
    """Refuse an untrusted .keras file whose config holds Python bytecode (a lambda), read as JSON: no child, nothing run.

    Keras would refuse it in safe mode too, but only after TensorFlow has loaded:
    saying so from the archive's config.json is immediate.
    """
    try:
        holder = _code_holder(config)
    except RecursionError:
        return  # the loader says what is wrong with the file
    if holder:
        raise ModelFileError(file, needs_trust_reason(holder), needs_trust=True)


def _refuse_oversized(file: Path, config: Any) -> None:
    """Refuse a .keras file whose config declares more weights than the memory available (`declared_weights`), before
    anything tries to allocate them."""
    import psutil

    reason = oversized_reason(config, psutil.virtual_memory().available)
    if reason:
        raise ModelFileError(file, reason)


def _refuse_tf_keras_archive(file: Path) -> None:
    """Refuse a `.keras` written by tf.keras 2 (its own zip layout, which Keras 3 cannot read), saying what to do."""
    try:
        metadata = read_json_member(file, "metadata.json")
    except ArchiveLimitError as exc:
        raise ModelFileError(file, str(exc)) from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return
    version = str(metadata.get("keras_version", "")) if isinstance(metadata, dict) else ""
    if version.startswith("2."):
        raise ModelFileError(
            file,
            f"saved by tf.keras {version} in its own .keras layout, which Keras 3 cannot read. Save it from tf.keras as .h5 "
            '(model.save("m.h5")) and open that: Device Lab fixes the known tf.keras 2 differences of .h5 files.',
        )


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

    Call inside `strategy.scope()` to place its variables. Known tf.keras 2 config
    differences are fixed first (`legacy_compat`); the classes of the source's
    custom-objects file are in scope. The file's compile configuration is read
    apart (`compiled_config`), never restored with its optimizer state.
    """
    import keras

    try:
        objects = custom_objects_of(source)
        with legacy_compat.loadable_copy(source.path, source.kind) as path, keras.saving.custom_object_scope(objects):
            return keras.saving.load_model(path, compile=False, safe_mode=not source.trusted, custom_objects=objects)
    except ModelFileError:
        raise
    except Exception as exc:
        raise explain_load_error(source, exc) from None


def custom_objects_of(source: ModelSource) -> dict[str, Any]:
    """The classes and functions the source's custom-objects file defines, by name (importing it registers its own too)."""
    if not source.custom_objects:
        return {}
    module = import_trusted_module(source.custom_objects, file_sha256(source.custom_objects))
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__ == module.__name__
    }


def explain_load_error(source: ModelSource, exc: Exception) -> ModelFileError:
    """A ModelFileError for what Keras raised while loading `source`: its cause first, whole (never cut mid-word)."""
    text = str(exc)
    cause = load_error_cause(exc)
    if _out_of_memory(exc):
        return ModelFileError(source.path, out_of_memory_reason(exc))
    vocabulary = _vocabulary_file_reason(text)
    if vocabulary:
        return ModelFileError(source.path, vocabulary, needs_trust=_OUTSIDE_VOCABULARY.search(text) is not None)
    if "safe_mode" in text:
        what = "a Lambda layer" if "Lambda" in text else "Python code (a lambda)"
        return ModelFileError(source.path, needs_trust_reason(what), needs_trust=True)
    package = _missing_package(text)
    if package:
        return ModelFileError(source.path, missing_package_reason(package, _class_named(text)))
    if "Could not locate" in text or "Unknown layer" in text or "Unknown " in cause:
        name = _custom_name(text)
        return ModelFileError(
            source.path, f"the model uses a custom class or function{name} that is not defined here. {CUSTOM_OBJECTS_HINT}", False, True
        )
    if "No model config found" in text:
        return ModelFileError(source.path, "the file holds weights only, no model. Open the .keras, .h5 or .py file that builds the model.")
    if isinstance(exc, OSError) or "truncated" in text:
        return ModelFileError(source.path, f"the file is corrupt or truncated ({cause}). Save the model again.")
    return ModelFileError(source.path, f"Keras could not load it: {type(exc).__name__}: {cause}")


_OOM_TENSOR = re.compile(r"OOM when allocating tensor with shape\[([\d,]*)\] and type (\w+)")


def _out_of_memory(exc: BaseException) -> bool:
    """Whether building the model failed to allocate memory (TensorFlow's OOM, JAX's RESOURCE_EXHAUSTED, NumPy's MemoryError)."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "ResourceExhaustedError" or "RESOURCE_EXHAUSTED" in str(exc)


def out_of_memory_reason(exc: BaseException) -> str:
    """Building the model ran out of memory, in one line: the tensor it asked for where the error says, not its raw text."""
    found = _OOM_TENSOR.search(str(exc))
    asked = f"a {found.group(2)} tensor of shape [{found.group(1)}]" if found else load_error_cause(exc)[:200]
    return f"building the model ran out of memory ({asked}): its weights do not fit in this machine's memory. Make the model smaller."


_OUTSIDE_VOCABULARY = re.compile(r"vocabulary file outside of the model archive.*Vocabulary file: '(.*)'", re.DOTALL)
_MISSING_VOCABULARY = re.compile(r"Vocabulary file (.*) does not exist")


def _vocabulary_file_reason(text: str) -> str:
    """Why a model whose lookup layer reads its vocabulary from a file (a path in its config, as tf.keras 2 saves it) does
    not open: untrusted (Keras reads files outside the model only for a trusted one), or the file is not there ("": neither)."""
    layer = _class_named(text) or "a lookup layer"
    outside = _OUTSIDE_VOCABULARY.search(text)
    if outside:
        return (
            f"its {layer} reads its vocabulary from the file {outside.group(1)}, outside the model file, which Keras does only for "
            "a trusted file: trust the file to open it (--trust on the command line)."
        )
    missing = _MISSING_VOCABULARY.search(text)
    if missing:
        return (
            f"its {layer} reads its vocabulary from the file {missing.group(1)}, which does not exist here: put the vocabulary "
            "file at that path, or re-save the model with Keras 3 as .keras (which keeps the vocabulary inside the file)."
        )
    return ""


def load_error_cause(exc: BaseException) -> str:
    """The cause in a Keras loading error: the text after "Exception encountered:" when there is one, else the first line.

    Keras puts the whole layer config before the cause; the cause is kept whole,
    and only a text over MAX_CAUSE_CHARS is shortened, at a word, with "…".
    """
    text = str(exc).strip()
    marker = "Exception encountered:"
    if marker in text:
        text = text.rsplit(marker, 1)[1].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = " ".join(lines[:3]) if lines else type(exc).__name__
    if len(cause) <= MAX_CAUSE_CHARS:
        return cause
    return cause[:MAX_CAUSE_CHARS].rsplit(" ", 1)[0] + " …"


def _missing_package(text: str) -> str:
    """The top-level package a config names but this Python cannot import ("keras_hub"), or ""."""
    for marker in ("parent module ", "No module named '"):
        start = text.find(marker)
        if start >= 0:
            name = text[start + len(marker) :].split()[0].strip("'\".,")
            top = name.split(".")[0]
            if top and top not in ("keras", "tensorflow", "tf_keras"):
                return top
    return ""


def _class_named(text: str) -> str:
    start = text.find("class '")
    return text[start + 7 :].split("'", 1)[0] if start >= 0 else ""


def missing_package_reason(module: str, class_name: str = "") -> str:
    """What to install, and where, for a model whose class lives in `module` (keras_hub: the [hub] extra)."""
    package, extra = PACKAGE_EXTRAS.get(module, (module.replace("_", "-"), ""))
    what = f"its class {class_name}" if class_name else "a class it uses"
    how = f'pip install -e ".[{extra}]" in the Device Lab folder, or ' if extra else ""
    return (
        f"{what} lives in the package {package} ({module}), which this Python cannot import. Install it into the environment "
        f"Device Lab runs in ({sys.executable}): {how}{sys.executable} -m pip install {package}; then open the file again."
    )


def _custom_name(text: str) -> str:
    for marker in ("Could not locate class '", "Could not locate function '", "Unknown layer: '", "Unknown object: '"):
        start = text.find(marker)
        if start >= 0:
            name = text[start + len(marker) :].split("'", 1)[0]
            return f" ({name})"
    return ""


@dataclass(frozen=True)
class CompiledConfig:
    """What a file was compiled with, as raw JSON configs (read without running anything); all None when not compiled."""

    loss: Any = None
    loss_weights: Any = None
    optimizer: Any = None


def compiled_config(source: ModelSource) -> CompiledConfig:
    """The file's loss, loss weights and optimizer config: a `.keras`'s compile_config, an `.h5`'s training_config.

    Read as JSON (config.json within its cap; the HDF5 attribute): no code runs.
    """
    try:
        if source.kind == KERAS:
            compile_config = read_json_member(source.path, "config.json").get("compile_config") or {}
            return CompiledConfig(compile_config.get("loss"), compile_config.get("loss_weights"), compile_config.get("optimizer"))
        if source.kind == H5:
            import h5py

            with h5py.File(source.path, "r") as handle:
                raw = handle.attrs.get("training_config")
            if raw is None:
                return CompiledConfig()
            training = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
            return CompiledConfig(training.get("loss"), training.get("loss_weights"), training.get("optimizer_config"))
    except (OSError, ValueError, KeyError, AttributeError, zipfile.BadZipFile) as exc:
        raise ModelFileError(source.path, f"its compile configuration cannot be read ({exc}). Save the model again.") from None
    return CompiledConfig()


def import_model_module(source: ModelSource) -> ModuleType:
    """The trusted `.py` file imported from its path (once per content hash), with `build_model` checked."""
    if not source.trusted:
        raise ModelFileError(
            source.path, "a Python file runs its code when opened: trust it to open it (--trust on the command line).", True
        )
    module = import_trusted_module(source.path, source.sha256)
    if not callable(getattr(module, "build_model", None)):
        raise ModelFileError(source.path, "the file defines no build_model() function returning a Keras model.")
    return module


def import_trusted_module(path: str, sha256: str) -> ModuleType:
    """A trusted `.py` file imported from its path, once per content hash; failures become a ModelFileError."""
    key = (path, sha256)
    if key in _modules:
        return _modules[key]
    name = f"device_lab_user_model_{sha256[:16]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelFileError(path, "Python cannot import this file.")
    module = importlib.util.module_from_spec(spec)
    folder = str(Path(path).parent)
    sys.path.insert(0, folder)  # the file may import modules that sit beside it
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ModelFileError(path, f"running the file failed: {_exception_line(exc)}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    _modules[key] = module
    return module


def build_from_module(source: ModelSource, module: ModuleType) -> Any:
    """`module.build_model()`, checked to be a Keras model; failures become a ModelFileError."""
    import keras

    try:
        model = module.build_model()
    except Exception as exc:
        reason = out_of_memory_reason(exc) if _out_of_memory(exc) else f"build_model() failed: {_exception_line(exc)}"
        raise ModelFileError(source.path, reason) from None
    if not isinstance(model, keras.Model):
        raise ModelFileError(source.path, f"build_model() returned {type(model).__name__}, not a Keras model.")
    return model


def _exception_line(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError at line {exc.lineno}: {exc.msg}"
    first = load_error_cause(exc) if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
