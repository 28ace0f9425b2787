"""Data a user's model can eat: synthetic from its signature, an `.npz` file, or the model's own dataset.

Synthetic inputs are random normal for float inputs and ids in `[0, vocab)` for
integer inputs; targets follow each output's loss (class ids, one-hot, 0/1 or
values). An `.npz` holds `x` and `y`, or one array per input and output name,
and is loaded without unpickling. Shapes that do not fit the model give one
`ModelDataError` naming the input, the expected and the given shape.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.files import open_regular
from core.formatting import format_bytes
from core.workloads.data import SYNTHETIC_EXAMPLES
from core.workloads.model_file import ModelFileError, regular_file_reason
from core.workloads.model_signature import (
    BINARY,
    CLASS_IDS,
    MASK_ONES,
    ONE_HOT,
    SHIPPED_WORDS,
    TEXT_DTYPE,
    InputInfo,
    LossChoice,
    ModelSignature,
    OutputInfo,
    target_shape,
)

TENSOR_ALIGNMENT = 64
"""Bytes TensorFlow's CPU tensors are aligned to (EIGEN_MAX_ALIGN_BYTES): an array aligned so becomes a tensor without a copy."""
UNKNOWN_DIM = 32  # a synthetic length for dimensions the model leaves open (sequence length)
NPZ_MEMORY_SHARE = 0.25
"""The most of the available memory an .npz's arrays may take once loaded: training holds a few copies of them."""
SYNTHETIC_BUDGET_BYTES = 256 * 2**20  # synthetic examples are generated once; big inputs get fewer of them


class ModelDataError(ModelFileError):
    """Data that does not fit the model: the message names the input or output, the expected and the given shape."""


class NonFiniteData(ModelDataError):
    """An .npz array with NaN or infinite values: `array` (its name in the file), `rows` of its `examples` hold one, the
    first at `first_row` (0-based). Training on them makes the loss NaN whatever the learning rate."""

    def __init__(self, path: str, array: str, rows: int, examples: int, first_row: int) -> None:
        self.array, self.rows, self.examples, self.first_row = array, rows, examples, first_row
        super().__init__(
            path,
            f"array '{array}' has NaN or infinite values in {rows:,} of its {examples:,} rows (examples), the first in row "
            f"{first_row}: training on them makes the loss NaN whatever the learning rate. Drop or fill those rows.",
        )


IDS_PAST_TABLE = "ids past an embedding table: "
"""How a note on ids past the table an input feeds begins: a NaN loss with it is said as that, not as a divergence."""


def ids_past_tables(signature: ModelSignature, x: Any = None) -> list[str]:
    """A note for each input whose ids reach past the rows of the id table it feeds (an Embedding's input_dim).

    `x` is the user's data (the inputs as `load_npz` gives them); None: synthetic ids in [0, vocab), past the table only
    where a --vocab NAME=N over it set the range. Such an id reads NaN on JAX (a gather there fills what it cannot
    read), zeros on a GPU under TensorFlow: the loss is NaN or wrong whatever the learning rate.
    """
    arrays = _flat_inputs(x, signature) if x is not None else [None] * len(signature.inputs)
    notes = []
    for info, array in zip(signature.inputs, arrays, strict=True):
        if info.table is None:
            continue
        if array is None:
            if info.vocab is None or info.vocab <= info.table:
                continue
            largest, whose = info.vocab - 1, f"synthetic ids in [0, {info.vocab}) from {info.vocab_source}"
        else:
            if not array.size or array.dtype.kind not in "iuf":
                continue
            top = array.max()
            if not np.isfinite(top) or top < info.table:
                continue
            largest, whose = int(top), "the data's"
        notes.append(
            f"{IDS_PAST_TABLE}input '{info.name}' holds ids up to {largest} ({whose}), past the {info.table} rows of the table "
            f"it feeds ({info.table_source}): give ids in [0, {info.table})"
        )
    return notes


def _flat_inputs(x: Any, signature: ModelSignature) -> list[np.ndarray]:
    """The model's input arrays in signature order, from one array, a tuple or a dict by name (as `structure` made them)."""
    if isinstance(x, dict):
        return [np.asarray(x[info.name]) for info in signature.inputs]
    if isinstance(x, (list, tuple)):
        return [np.asarray(array) for array in x]
    return [np.asarray(x)]


def shown(shape: Sequence[int | None]) -> str:
    """A shape as text, None for open dimensions: (None, 6)."""
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _fixed(shape: Sequence[int | None]) -> tuple[int, ...]:
    return tuple(UNKNOWN_DIM if d is None else int(d) for d in shape)


def synthetic_example_count(signature: ModelSignature, losses: Sequence[LossChoice]) -> int:
    """How many synthetic examples to generate: SYNTHETIC_EXAMPLES, fewer when one example is big."""
    per_example = sum(math.prod(_fixed(i.shape[1:])) * _itemsize(i.dtype) for i in signature.inputs)
    per_example += sum(math.prod(_fixed(target_shape(c, o))) * 4 for c, o in zip(losses, signature.outputs, strict=True))
    return int(max(1, min(SYNTHETIC_EXAMPLES, SYNTHETIC_BUDGET_BYTES // max(1, per_example))))


TEXT_ITEM_BYTES = 128
"""What one synthetic sentence takes (4-24 words as NumPy unicode): a text input's size per element."""


def _itemsize(dtype: str) -> int:
    if dtype == TEXT_DTYPE:
        return TEXT_ITEM_BYTES
    return 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize


def synthetic_arrays(signature: ModelSignature, losses: Sequence[LossChoice], examples: int, seed: int, path: str) -> tuple[Any, Any]:
    """Random (x, y) for `examples` examples, structured as the model takes and gives them."""
    rng = np.random.default_rng(seed)
    xs = [_synthetic_input(info, examples, rng, path) for info in signature.inputs]
    ys = [_synthetic_target(choice, output, examples, rng, path) for choice, output in zip(losses, signature.outputs, strict=True)]
    return structure(xs, signature.inputs, signature.dict_inputs), structure(ys, signature.outputs, signature.dict_outputs)


def structure(arrays: Sequence[Any], infos: Sequence[InputInfo | OutputInfo], as_dict: bool) -> Any:
    """One array alone, a dict by name for a model that takes/gives a dict, else a tuple in model order."""
    if as_dict:
        return {info.name: array for info, array in zip(infos, arrays, strict=True)}
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


def _synthetic_input(info: InputInfo, examples: int, rng: np.random.Generator, path: str) -> np.ndarray:
    shape = (examples, *_fixed(info.shape[1:]))
    if info.fill == MASK_ONES:
        return np.ones(shape, dtype=bool if info.dtype == "bool" else info.dtype)
    if info.is_text:
        words = np.asarray(info.words or SHIPPED_WORDS)
        lengths = rng.integers(4, 25, size=shape).ravel()
        return np.array([" ".join(rng.choice(words, count)) for count in lengths]).reshape(shape)
    if info.float_ids and info.vocab is not None:
        return rng.integers(0, info.vocab, size=shape).astype(info.dtype)
    if info.is_integer:
        if info.vocab is None:
            raise ModelDataError(
                path,
                f"input '{info.name}' takes integer ids but feeds no layer with an input_dim (an Embedding), so their range is "
                "unknown: give the vocabulary size (--vocab N, used only for such inputs) or your own data (.npz).",
            )
        return rng.integers(0, info.vocab, size=shape).astype(info.dtype)
    if info.dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if "float" not in info.dtype:
        raise ModelDataError(path, f"input '{info.name}' has dtype {info.dtype}: synthetic data cannot fill it; give your own data (.npz).")
    values = rng.standard_normal(shape, dtype=np.float32)
    if info.dtype == "bfloat16":
        import tensorflow as tf

        return values.astype(tf.bfloat16.as_numpy_dtype)
    return values.astype(info.dtype)


def _synthetic_target(choice: LossChoice, output: OutputInfo, examples: int, rng: np.random.Generator, path: str) -> np.ndarray:
    shape = (examples, *_fixed(target_shape(choice, output)))
    units = output.units
    if choice.target in (CLASS_IDS, ONE_HOT):
        if not units:
            raise ModelDataError(
                path, f"output '{output.name}' has an unknown number of classes {shown(output.shape)}: give your own data (.npz)."
            )
        if choice.target == CLASS_IDS:
            return rng.integers(0, units, size=shape).astype(np.int32)
        return np.eye(units, dtype=np.float32)[rng.integers(0, units, size=shape[:-1])]
    if choice.target == BINARY:
        return rng.integers(0, 2, size=shape).astype(np.float32)
    return rng.standard_normal(shape, dtype=np.float32)


def load_npz(path: str | os.PathLike, signature: ModelSignature, losses: Sequence[LossChoice]) -> tuple[Any, Any, int]:
    """(x, y, examples) from an `.npz` checked against the model; never unpickles."""
    path = str(path)
    arrays = _read_npz(path)
    xs = _pick(arrays, signature.inputs, "x", "input", path)
    ys = _pick(arrays, signature.outputs, "y", "output", path)
    names = _picked_names(arrays, signature.inputs, "x") + _picked_names(arrays, signature.outputs, "y")
    xs = [
        array.reshape(-1, 1) if info.shape[1:] == (1,) and array.ndim == 1 else array
        for info, array in zip(signature.inputs, xs, strict=True)
    ]
    problems = _length_problems(xs + ys)
    problems += [p for info, array in zip(signature.inputs, xs, strict=True) if (p := _input_problem(info, array))]
    targets = []
    for choice, output, array in zip(losses, signature.outputs, ys, strict=True):
        target, problem = _fit_target(choice, output, array)
        targets.append(target)
        problems += [problem] if problem else []
    if problems:
        raise ModelDataError(path, "the data does not fit the model: " + "; ".join(problems) + ".")
    xs = [_as_input(info, array) for info, array in zip(signature.inputs, xs, strict=True)]
    targets = [aligned(target) for target in targets]
    for name, array in zip(names, xs + targets, strict=True):
        check_finite(array, name, path)
    x = structure(xs, signature.inputs, signature.dict_inputs)
    return x, structure(targets, signature.outputs, signature.dict_outputs), len(xs[0])


FINITE_CHUNK_BYTES = 16 << 20
"""How much of an array `check_finite` looks at in one go: np.isfinite's mask of it stays small beside a large .npz."""


def check_finite(array: np.ndarray, name: str, path: str) -> None:
    """Raise NonFiniteData when a float array holds NaN or infinity (counted by rows: examples), a chunk of rows at a time."""
    if array.dtype.kind not in "fc" or not array.size:
        return
    rows = array.reshape(len(array), -1) if array.ndim > 1 else array.reshape(-1, 1)
    step = max(1, FINITE_CHUNK_BYTES // max(1, rows.shape[1] * array.itemsize))
    bad, first = 0, -1
    for start in range(0, len(rows), step):
        finite = np.isfinite(rows[start : start + step]).all(axis=1)
        if not finite.all():
            if first < 0:
                first = start + int(np.argmin(finite))
            bad += int(len(finite) - np.count_nonzero(finite))
    if bad:
        raise NonFiniteData(path, name, bad, len(rows), first)


def aligned(array: np.ndarray, dtype: Any = None) -> np.ndarray:
    """The array in `dtype` (its own by default), numeric ones in memory aligned to TENSOR_ALIGNMENT bytes; no copy
    where it is that already.

    NumPy aligns an array to 16 bytes only (a large one fresh from the system starts 16 bytes into its pages; one
    from the heap lands on a 64-byte boundary by chance). TensorFlow converts an unaligned array with a transient copy
    beside the tensor, and on CPUs where it uses oneDNN its allocator keeps that memory: a 256 MiB .npz trained in
    a process 3.1x its size larger on a 2-core Xeon, 2.1x aligned (`tensor_view` shares the array's memory).
    """
    dtype = np.dtype(dtype or array.dtype)
    if dtype.kind not in "iuf":
        return array.astype(dtype, copy=False)
    if array.dtype == dtype and _is_aligned(array):
        return array
    copy = aligned_empty(array.shape, dtype)
    copy[...] = array
    return copy


def aligned_empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """An uninitialised C-order array whose data starts on a TENSOR_ALIGNMENT boundary."""
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    buffer = np.empty(size + TENSOR_ALIGNMENT, dtype=np.uint8)
    start = -buffer.ctypes.data % TENSOR_ALIGNMENT
    return buffer[start : start + size].view(dtype).reshape(shape)


def _is_aligned(array: np.ndarray) -> bool:
    """C-order data starting on a TENSOR_ALIGNMENT boundary."""
    return array.ctypes.data % TENSOR_ALIGNMENT == 0 and array.flags.c_contiguous


def tensor_view(array: Any) -> Any:
    """An aligned numeric array as a TensorFlow tensor over the same memory (DLPack); anything else as it is."""
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "iuf" or not _is_aligned(array):
        return array
    import tensorflow as tf

    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())


def _as_input(info: InputInfo, array: np.ndarray) -> np.ndarray:
    """The array in the input's dtype (without a copy where it has it already); text stays NumPy unicode (tf.string to TensorFlow)."""
    if info.is_text:
        return array
    return aligned(array, "float32" if info.dtype == "bfloat16" else info.dtype)


def _read_npz(path: str) -> dict[str, np.ndarray]:
    problem = regular_file_reason(path, "no such data file. Check the path.", "an .npz file (np.savez)")
    if problem or os.path.isdir(path):
        raise ModelDataError(path, problem or "this is a folder, not a data file: give an .npz file (np.savez).")
    try:
        with open_regular(path) as handle:
            head = handle.read(6)
    except OSError as exc:
        raise ModelDataError(path, f"cannot be read: {exc.strerror or exc}.") from None
    if head.startswith(b"\x93NUMPY"):
        raise ModelDataError(path, "a single .npy array: give an .npz with arrays x and y (np.savez).")
    if not zipfile.is_zipfile(path):
        raise ModelDataError(path, "not an .npz file (not a zip archive of arrays, or truncated). Save the data with np.savez.")
    _check_inflated_size(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: _read_aligned(archive, name) for name in archive.files}
    except MemoryError:
        raise ModelDataError(path, "its arrays do not fit in memory. Give a smaller .npz (fewer examples).") from None
    except ValueError as exc:
        reason = "it holds Python objects, which are never unpickled" if "pickle" in str(exc) else f"an array cannot be read ({exc})"
        raise ModelDataError(path, f"{reason}. Save plain numeric arrays with np.savez.") from None
    except Exception as exc:  # zipfile.BadZipFile, zlib.error, EOFError: a damaged archive
        raise ModelDataError(path, f"not a readable .npz file ({type(exc).__name__}: {exc}). Save it again with np.savez.") from None


_READ_CHUNK = 8 << 20


def _read_aligned(archive: Any, name: str) -> np.ndarray:
    """The archive's array `name`, a plain numeric one read straight into aligned memory (one copy in memory, not two);
    any other through NumPy's own reader."""
    try:
        member = archive.zip.open(f"{name}.npy")
    except KeyError:
        return archive[name]
    with member:
        shape, fortran_order, dtype = _npy_header(member)
        if not fortran_order and dtype.kind in "iuf" and dtype.isnative:
            array = aligned_empty(shape, dtype)
            _read_into(member, array.reshape(-1).view(np.uint8).data)
            return array
    return archive[name]


def _npy_header(member: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, Fortran order, dtype) from the .npy header at the start of an open archive member; the data is not read."""
    version = np.lib.format.read_magic(member)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    return read_header(member)


def _read_into(member: Any, target: memoryview) -> None:
    """Fill `target` from the open zip member, a chunk at a time (a zip member reads into a bytes object first: one
    read of the whole array would hold it twice); ValueError when the member ends first."""
    filled = 0
    while filled < len(target):
        got = member.readinto(target[filled : filled + _READ_CHUNK])
        if not got:
            raise ValueError(f"the array's data ends after {filled} of {len(target)} bytes")
        filled += got


def npz_headers(path: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each array's (shape, dtype), read from its .npy header inside the archive (nothing is inflated); ModelDataError if unreadable."""
    headers = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for entry in archive.infolist():
                if not entry.filename.endswith(".npy"):
                    continue
                with archive.open(entry) as member:
                    shape, _, dtype = _npy_header(member)
                headers[entry.filename[: -len(".npy")]] = (tuple(shape), dtype)
    except Exception as exc:  # a damaged archive or header
        raise ModelDataError(path, f"not a readable .npz file ({type(exc).__name__}: {exc}). Save it again with np.savez.") from None
    return headers


def npz_array_bytes(path: str) -> dict[str, int]:
    """Each array's size once loaded, read from its .npy header inside the archive (nothing is inflated); ModelDataError if unreadable."""
    return {name: math.prod(shape) * dtype.itemsize for name, (shape, dtype) in npz_headers(path).items()}


def _check_inflated_size(path: str) -> None:
    """Refuse, before anything is inflated, an .npz whose arrays would take more than NPZ_MEMORY_SHARE of the available memory."""
    import psutil

    sizes = npz_array_bytes(path)
    total, available = sum(sizes.values()), psutil.virtual_memory().available
    if total > available * NPZ_MEMORY_SHARE:
        largest = max(sizes, key=lambda name: sizes[name])
        raise ModelDataError(
            path,
            f"its arrays take {format_bytes(total)} once loaded ('{largest}': {format_bytes(sizes[largest])}), more than "
            f"{NPZ_MEMORY_SHARE:.0%} of the {format_bytes(available)} of memory available (training copies the data). "
            "Give fewer examples, or free memory.",
        )


def _pick(arrays: dict[str, np.ndarray], infos: Sequence[InputInfo | OutputInfo], single: str, what: str, path: str) -> list[np.ndarray]:
    names = [info.name for info in infos]
    if all(name in arrays for name in names):
        return [arrays[name] for name in names]
    if len(infos) == 1 and single in arrays:
        return [arrays[single]]
    wanted = f"'{single}' or " if len(infos) == 1 else ""
    raise ModelDataError(
        path,
        f"no array for the model's {what}{'s' if len(infos) > 1 else ''}: give {wanted}one array per {what} name "
        f"({', '.join(repr(n) for n in names)}); the file has {', '.join(repr(k) for k in arrays) or 'no arrays'}.",
    )


def _picked_names(arrays: dict[str, np.ndarray], infos: Sequence[InputInfo | OutputInfo], single: str) -> list[str]:
    """The file's names of the arrays `_pick` took: one per input or output name, else `single` ('x' or 'y')."""
    names = [info.name for info in infos]
    return names if all(name in arrays for name in names) else [single]


def _length_problems(arrays: Sequence[np.ndarray]) -> list[str]:
    lengths = {len(a) if a.ndim else 0 for a in arrays}
    if len(lengths) > 1 or 0 in lengths:
        return [f"every array needs the same number of examples, the file's have {sorted(lengths)}"]
    return []


def _input_problem(info: InputInfo, array: np.ndarray) -> str:
    if not _fits(info.shape[1:], array.shape[1:]):
        return f"input '{info.name}' expects examples of shape {shown(info.shape[1:])} (batch shape {shown(info.shape)}), the file gives {shown(array.shape)}"
    if info.is_integer and not np.issubdtype(array.dtype, np.integer):
        return f"input '{info.name}' takes integer ids ({info.dtype}), the file gives {array.dtype}"
    if info.is_integer and info.vocab is not None and array.size and (array.min() < 0 or array.max() >= info.vocab):
        return (
            f"input '{info.name}' takes ids in [0, {info.vocab}) ({info.vocab_source}), the file's go from {array.min()} to {array.max()}"
        )
    if info.is_text:
        return "" if array.dtype.kind in "US" else f"input '{info.name}' takes text (strings), the file gives {array.dtype}"
    if not info.is_integer and not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        return f"input '{info.name}' takes numbers, the file gives {array.dtype}"
    return ""


def _fits(expected: Sequence[int | None], given: Sequence[int]) -> bool:
    return len(expected) == len(given) and all(e is None or e == g for e, g in zip(expected, given, strict=True))


def _fit_target(choice: LossChoice, output: OutputInfo, array: np.ndarray) -> tuple[np.ndarray, str]:
    """The target array reshaped and cast for its loss, or a problem saying why it does not fit."""
    expected = target_shape(choice, output)
    given = array.shape[1:]
    if not _fits(expected, given):
        if _fits((*expected, 1), given):
            array = array.reshape(array.shape[:-1])
        elif expected[-1:] == (1,) and _fits(expected[:-1], given):
            array = array[..., None]
        else:
            return (
                array,
                f"output '{output.name}' ({choice.loss}) expects targets of shape {shown(expected)} per example, the file gives {shown(array.shape)}",
            )
    if choice.target != CLASS_IDS:
        return array.astype(np.float32, copy=False), ""
    if not np.issubdtype(array.dtype, np.integer):
        return array, f"output '{output.name}' ({choice.loss}) expects integer class ids, the file gives {array.dtype}"
    if output.units and array.size and (array.min() < 0 or array.max() >= output.units):
        return array, f"output '{output.name}' has {output.units} classes, the file's ids go from {array.min()} to {array.max()}"
    return array.astype(np.int32, copy=False), ""


def check_element_spec(spec: Any, signature: ModelSignature, path: str) -> None:
    """Raise ModelDataError when build_dataset's batches do not fit the model's inputs."""
    if not isinstance(spec, tuple) or len(spec) != 2:
        raise ModelDataError(path, "build_dataset() must give (x, y) pairs of batches; its elements are not pairs.")
    specs = _flat_by_model(spec[0], [i.name for i in signature.inputs])
    if specs is None:
        raise ModelDataError(path, f"build_dataset() gives x for {_count(spec[0])} input(s), the model has {len(signature.inputs)}.")
    problems = [
        f"input '{info.name}' expects batches of shape {shown(info.shape)}, build_dataset() gives {shown(tuple(s.shape))}"
        for info, s in zip(signature.inputs, specs, strict=True)
        if s.shape.rank is None or not _fits(info.shape[1:], tuple(s.shape)[1:]) or s.shape.rank != len(info.shape)
    ]
    if problems:
        raise ModelDataError(path, "the data does not fit the model: " + "; ".join(problems) + ".")


def _flat_by_model(structure_: Any, names: Sequence[str]) -> list[Any] | None:
    if isinstance(structure_, dict):
        return [structure_[n] for n in names] if all(n in structure_ for n in names) else None
    items = list(structure_) if isinstance(structure_, (tuple, list)) else [structure_]
    return items if len(items) == len(names) else None


def _count(structure_: Any) -> int:
    return len(structure_) if isinstance(structure_, (tuple, list, dict)) else 1


def array_dataset(x: Any, y: Any, examples: int, global_batch_size: int, seed: int, synthetic: bool):
    """An endless dataset of global batches from in-memory arrays (static shapes: drop_remainder)."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(tensor_view, (x, y)))
    if synthetic:
        batches = max(1, examples // global_batch_size)
        ds = ds.repeat().batch(global_batch_size, drop_remainder=True).take(batches).cache().repeat()
    else:
        ds = ds.shuffle(min(examples, 10_000), seed=seed, reshuffle_each_iteration=True).repeat()
        ds = ds.batch(global_batch_size, drop_remainder=True)
    return finish_dataset(ds)


def rebatched_dataset(ds: Any, global_batch_size: int):
    """The user's dataset repeated and re-cut into whole global batches."""
    return finish_dataset(ds.repeat().rebatch(global_batch_size, drop_remainder=True))


def finish_dataset(ds: Any):
    """The options the engine's datasets share (see core.workloads.data.make_dataset), then prefetch."""
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    options.autotune.enabled = False  # no parallel map to tune; the autotune thread delays a stop
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)
