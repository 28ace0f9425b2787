"""Known tf.keras 2 config differences, fixed before Keras 3 deserialises a legacy model.

tf.keras 2 (the `tf-keras` package, TensorFlow before 2.16) wrote some layer
arguments that Keras 3 no longer takes, and Keras 3 refuses the whole model for
them ("Unrecognized keyword arguments passed to DepthwiseConv2D: {'groups': 1}").
Each rule in `RULES` drops one such argument where its value changes nothing in
Keras 3 (`groups=1`, `time_major=False`) or where Keras 3 works it out itself (the
shapes a MultiHeadAttention was built with). A value that would change the model
(`time_major=True`) is left, and Keras's refusal is reported whole.

`legacy_fixes(config)` lists what would be fixed (for the model's description);
`loadable_copy(path, kind)` gives the path Keras should load: the file itself, or
a temporary copy whose config carries the fixes (safe mode is unchanged: only
arguments are dropped, nothing is added).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from core.workloads.archive import read_json_member

ANY = object()  # a rule that drops the argument whatever its value
_GROUPED = ("DepthwiseConv1D", "DepthwiseConv2D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose")
_SEPARABLE = ("SeparableConv1D", "SeparableConv2D")
_RECURRENT = ("LSTM", "GRU", "SimpleRNN", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D")
_SPATIAL_DROPOUT = ("SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D")
_RANDOM = ("RandomFlip", "RandomRotation", "RandomZoom", "RandomContrast", "RandomTranslation", "RandomCrop", "RandomHeight", "RandomWidth")

RULES: dict[str, tuple[tuple[str, Any], ...]] = {
    **{name: (("groups", 1),) for name in _GROUPED},
    **{name: (("groups", 1), ("kernel_initializer", ANY), ("kernel_regularizer", ANY), ("kernel_constraint", ANY)) for name in _SEPARABLE},
    **{name: (("time_major", False),) for name in _RECURRENT},
    **{name: (("trainable", ANY),) for name in _SPATIAL_DROPOUT},
    **{name: (("rng_type", ANY),) for name in _RANDOM},
    "MultiHeadAttention": (("query_shape", ANY), ("key_shape", ANY), ("value_shape", ANY), ("softmax_robust_masking", False)),
}


@dataclass(frozen=True)
class LegacyFix:
    """One kind of fix and how many layers got it: "DepthwiseConv2D: dropped groups=1" (17 layers)."""

    text: str
    layers: int

    def __str__(self) -> str:
        return self.text if self.layers == 1 else f"{self.text} ({self.layers} layers)"


def fix_config(config: Any) -> tuple[Any, tuple[LegacyFix, ...]]:
    """A copy of a Keras model config with the RULES applied, and the fixes made."""
    made: Counter[str] = Counter()
    fixed = _walk(config, made)
    return fixed, tuple(LegacyFix(text, count) for text, count in made.items())


def _walk(node: Any, made: Counter[str]) -> Any:
    if isinstance(node, list):
        return [_walk(item, made) for item in node]
    if not isinstance(node, dict):
        return node
    fixed = {key: _walk(value, made) for key, value in node.items()}
    class_name = fixed.get("class_name")
    rules = RULES.get(class_name) if isinstance(class_name, str) else None
    inner = fixed.get("config")
    if rules and isinstance(inner, dict):
        fixed["config"] = _apply(fixed["class_name"], rules, inner, made)
    return fixed


def _apply(class_name: str, rules: tuple[tuple[str, Any], ...], config: dict[str, Any], made: Counter[str]) -> dict[str, Any]:
    kept = dict(config)
    for key, neutral in rules:
        if key in kept and (neutral is ANY or kept[key] == neutral):
            value = kept.pop(key)
            shown = f"{key}={value!r}" if isinstance(value, (bool, int, float, str)) else key
            made[f"{class_name}: dropped {shown}"] += 1
    return kept


def summary(fixes: tuple[LegacyFix, ...] | list[str]) -> str:
    """ "loaded with 1 legacy fix: DepthwiseConv2D: dropped groups=1 (17 layers)"; "" for none."""
    if not fixes:
        return ""
    return f"loaded with {len(fixes)} legacy fix{'es' if len(fixes) > 1 else ''}: " + "; ".join(str(f) for f in fixes)


def read_model_config(path: str | os.PathLike, kind: str) -> Any:
    """The model's config as JSON (a `.keras`'s config.json within its cap, an `.h5`'s model_config); None if absent."""
    if kind == "keras":
        return read_json_member(path, "config.json")
    import h5py

    with h5py.File(path, "r") as handle:
        raw = handle.attrs.get("model_config")
    if raw is None:
        return None
    return json.loads(raw.decode() if isinstance(raw, bytes) else raw)


def legacy_fixes(path: str | os.PathLike, kind: str) -> tuple[LegacyFix, ...]:
    """The fixes loading this `.keras`/`.h5` file needs (empty for a Keras 3 file)."""
    config = read_model_config(path, kind)
    return fix_config(config)[1] if config is not None else ()


@contextlib.contextmanager
def loadable_copy(path: str | os.PathLike, kind: str) -> Iterator[str]:
    """The path to hand Keras: `path` itself when no fix applies, else a temporary fixed copy (removed afterwards)."""
    config = read_model_config(path, kind)
    fixed, fixes = fix_config(config) if config is not None else (None, ())
    if not fixes:
        yield str(path)
        return
    with tempfile.TemporaryDirectory(prefix="device-lab-legacy-") as folder:
        copy = os.path.join(folder, os.path.basename(path))
        if kind == "keras":
            _rewrite_archive(path, copy, fixed)
        else:
            _rewrite_h5(path, copy, fixed)
        yield copy


def _rewrite_archive(path: str | os.PathLike, copy: str, config: Any) -> None:
    """The archive again, member by member, with config.json replaced (sizes were checked by `check_archive`)."""
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(copy, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            if info.filename == "config.json":
                target.writestr("config.json", json.dumps(config))
                continue
            with source.open(info) as reader, target.open(info, "w") as writer:
                shutil.copyfileobj(reader, writer, 1 << 20)


def _rewrite_h5(path: str | os.PathLike, copy: str, config: Any) -> None:
    import h5py

    shutil.copyfile(path, copy)
    with h5py.File(copy, "r+") as handle:
        del handle.attrs["model_config"]
        handle.attrs["model_config"] = json.dumps(config).encode()
