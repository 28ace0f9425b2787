"""`RunConfig`: one training job, validated the moment it is made.

Everything that can be checked without TensorFlow is checked here, so a bad
value never reaches the engine. Checks that need the live machine (does
device "GPU:3" exist?) live in `core.training.engine.check_against_machine`.

Two groups of settings have a type of their own. The hooks a run carries are
a field, `hooks` (a `HookSettings`). The model a run trains keeps its flat
fields (`model`, `trust`, `vocab`, `custom_objects`, `model_sha256`: the
constructor's keywords and `to_dict()`'s keys are used everywhere and stored
with every run), and `model_ref` gives them as one value, a
`ModelRef`, for the functions that open or check the file.

A config is a plain value: it knows no catalogue. Whether `model` names a
sample model or a usable file, and whether the data suits it, is checked by
`check_workload` (in the workloads package), which the job options, the window's
form and `run_job` call.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from core.errors import ExplainedError

STRATEGIES = ("default", "one-device", "mirrored", "multi-worker", "tpu")
OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")
MODEL_FILE_SUFFIXES = (".keras", ".h5", ".hdf5", ".py")
NPZ_SUFFIX = ".npz"
"""The user's own data: a NumPy archive of named arrays."""
FILE_OPTIMIZER = "file"
"""The optimizer setting that means: the model file's own compiled optimizer (Adam when it has none)."""
PRECISIONS = ("off", "float16", "bfloat16")
BACKENDS = ("tensorflow", "jax", "torch")
BACKEND_TITLES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}
TF_ONLY_STRATEGIES = ("multi-worker", "tpu")

MAX_BATCH_SIZE = 1 << 20
MAX_STEPS = 100_000_000
MAX_STEPS_PER_CALL = 10_000
MAX_WORKERS = 64
MAX_LOGICAL_CPUS = 16
"""The most CPU devices a process splits its CPU into: TensorFlow's logical CPUs, JAX's XLA host devices."""
MIN_CLUSTER_TIMEOUT_S = 5
MAX_CLUSTER_TIMEOUT_S = 86_400
MIN_TPU_TIMEOUT_S = 1
MAX_TPU_TIMEOUT_S = 600
PROFILE_FIELD = "profile_steps"


class ConfigError(ExplainedError, ValueError):
    """A run setting is invalid; the message names the field, the value and what is allowed."""

    def __init__(self, field_name: str, given: Any, allowed: str):
        self.field = field_name
        self.given = given
        self.allowed = allowed
        super().__init__(f"{field_name}: got {given!r}; allowed: {allowed}")


@dataclass(frozen=True)
class ModelRef:
    """A sample model's name, or a model file (`.keras`, `.h5`, `.py`) and what opening it may do: one value.

    The functions that open, describe or check a run's model take it instead of
    five parameters (`RunConfig.model_ref` builds it). For a file: `trust` lets
    it run its code, `vocab` bounds integer inputs no Embedding describes,
    `custom_objects` is a trusted `.py` defining its custom classes, `sha256` the
    content the run was set up with ("" when not known yet: nothing to check).
    """

    path_or_name: str
    trust: bool = False
    vocab: int | None = None
    custom_objects: str = ""
    sha256: str = ""
    vocab_by_input: tuple[tuple[str, int], ...] = ()  # (input name, N): ids in [0, N), over what its embedding says


def names_a_file(model: Any) -> bool:
    """Whether `model` is written as a model file's path (a folder in it, or a model file's suffix); sample names are bare words.

    A bare name of a folder that exists (a SavedModel beside you) is a file too: the workloads package's `is_model_file` knows.
    """
    return isinstance(model, str) and ("/" in model or os.sep in model or os.path.splitext(model)[1].lower() in MODEL_FILE_SUFFIXES)


@dataclass(frozen=True)
class HookSettings:
    """The hooks a run carries that change what is measured, recorded with the run.

    `tensorboard` is the folder TensorBoard event files go to ("" for none);
    `profile` the steps (first, last) the profiler captures (None for none).
    Stored as `to_dict()`: {"tensorboard": folder, "profile": "A-B"}, each key
    only when that hook is on (the form runs recorded before this type existed).
    """

    tensorboard: str = ""
    profile: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tensorboard, str):
            raise ConfigError("tensorboard", self.tensorboard, "a folder path, or empty for no TensorBoard logs")
        if self.profile is not None:
            if not isinstance(self.profile, (tuple, list)) or len(self.profile) != 2:
                raise ConfigError(PROFILE_FIELD, self.profile, "two whole step numbers A-B, e.g. 3-5")
            check_step_range(*self.profile)
            object.__setattr__(self, "profile", tuple(self.profile))

    def __bool__(self) -> bool:
        """True when any hook is on."""
        return bool(self.tensorboard or self.profile)

    @property
    def profile_text(self) -> str:
        """The profiled steps as recorded: "3-5"; "" when the profiler is off."""
        return f"{self.profile[0]}-{self.profile[1]}" if self.profile else ""

    def to_dict(self) -> dict[str, str]:
        """{"tensorboard": folder, "profile": "A-B"}, each only when on: what runs record and `run --json` prints."""
        return {
            **({"tensorboard": self.tensorboard} if self.tensorboard else {}),
            **({"profile": self.profile_text} if self.profile else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HookSettings:
        """Rebuild from `to_dict()` output; raises ConfigError for a profile that is not "A-B"."""
        profile = str(data.get("profile") or "")
        return cls(str(data.get("tensorboard") or ""), parse_step_range(profile) if profile else None)


def recorded_hooks(config: Mapping[str, Any]) -> dict[str, str]:
    """The hooks a stored config (`RunConfig.to_dict()`) recorded under `extra.hooks`, as `HookSettings.to_dict()` writes them."""
    hooks = (config.get("extra") or {}).get("hooks") or {}
    return {str(name): str(value) for name, value in hooks.items()}


def hooks_in_words(hooks: Mapping[str, str]) -> str:
    """Recorded hooks (`recorded_hooks`) in words: 'profiled 3-5, TensorBoard'; 'no hooks'."""
    words = ["TensorBoard" if name == "tensorboard" else f"profiled {value}" for name, value in sorted(hooks.items())]
    return ", ".join(words) or "no hooks"


def is_whole_number(text: str) -> bool:
    """Whether `text` is ASCII digits only: "²" and "٣" are digits to `str.isdigit()` but not to `int()`."""
    return text.isascii() and text.isdigit()


def parse_step_range(text: str) -> tuple[int, int]:
    """Parse "10-20" into (10, 20): the profiled steps as `--profile` takes them and runs record them; ConfigError otherwise."""
    first, _, last = text.partition("-")
    if not (is_whole_number(first.strip()) and is_whole_number(last.strip())):
        raise ConfigError(PROFILE_FIELD, text, "a step range such as 10-20")
    check_step_range(int(first), int(last))
    return int(first), int(last)


def check_step_range(first_step: Any, last_step: Any) -> None:
    """Raise ConfigError unless 1 <= first_step <= last_step, both whole numbers (a profiled step range)."""
    given = (first_step, last_step)
    for value in given:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(PROFILE_FIELD, given, "two whole step numbers A-B, e.g. 3-5")
    if first_step < 1:
        raise ConfigError(PROFILE_FIELD, given, "a first step of 1 or more (steps count from 1)")
    if last_step < first_step:
        raise ConfigError(PROFILE_FIELD, given, "a last step at or after the first step, e.g. 3-5")


@dataclass(frozen=True)
class RunConfig:
    """One training job: what to train, where, and with which knobs.

    `batch_size` is the *global* batch: under a multi-replica strategy each
    replica sees batch_size / replicas examples per step. `cluster_hosts`
    ("host:port" per worker, this machine first) turns a multi-worker run into
    a real cluster; empty means local worker processes on this machine.
    `cluster_timeout_s` bounds the wait for all workers to join; `tpu_timeout_s`
    bounds the time-boxed TPU probe that runs before TensorFlow's TPU initialisation.
    `allow_network_workers` lets local workers run where they cannot be isolated
    from the network (see `core.cluster`).

    `model` is a sample model's name or the path of the user's model file
    (`.keras`, `.h5`, `.py`); for a file, `dataset` is "synthetic",
    "build_dataset" (the .py's) or an `.npz` path, `trust` lets the file run
    its code, `vocab` bounds integer inputs no Embedding describes,
    `vocab_by_input` sets named inputs' id ranges over what their Embedding says,
    `custom_objects` is a trusted `.py` defining the file's custom classes,
    `optimizer` may be FILE_OPTIMIZER (the file's own), and
    `model_sha256` is the content the run was set up with (checked again
    where the file is opened: the engine, each worker). `model_ref` gives these
    as one `ModelRef`.

    `backend` is the Keras backend that trains it: "tensorflow" in this process,
    "jax" or "torch" in a child process of its own (`core.backends`).

    `hooks` records the hooks the run carries (TensorBoard folder, profiled
    steps); two configs that differ only in hooks compare equal: the same job.
    """

    model: str = "mlp"
    dataset: str = "synthetic"
    strategy: str = "default"
    devices: tuple[str, ...] = ()
    batch_size: int = 64
    steps: int = 100
    epochs: int | None = None
    learning_rate: float = 1e-3
    optimizer: str = "adam"
    precision: str = "off"
    xla: bool = False
    steps_per_call: int = 1
    seed: int = 0
    workers: int = 2
    tpu_address: str = ""
    tpu_timeout_s: float = 30.0
    cluster_hosts: tuple[str, ...] = ()
    cluster_timeout_s: int = 300
    allow_network_workers: bool = False
    trust: bool = False
    vocab: int | None = None
    custom_objects: str = ""
    model_sha256: str = ""
    backend: str = "tensorflow"
    vocab_by_input: tuple[tuple[str, int], ...] = ()
    hooks: HookSettings = field(default=HookSettings(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(normalize_device_name(d) for d in self.devices))
        if not isinstance(self.vocab_by_input, (tuple, list)) or any(
            not isinstance(pair, (tuple, list)) or len(pair) != 2 for pair in self.vocab_by_input
        ):
            raise ConfigError("vocab_by_input", self.vocab_by_input, "(input name, N) pairs")
        object.__setattr__(self, "vocab_by_input", tuple((name, size) for name, size in self.vocab_by_input))
        if isinstance(self.cluster_hosts, str):
            raise ConfigError("cluster_hosts", self.cluster_hosts, "a list of host:port addresses, one per worker")
        object.__setattr__(self, "cluster_hosts", tuple(normalize_address(a) for a in self.cluster_hosts))
        if not isinstance(self.hooks, HookSettings):
            raise ConfigError("hooks", self.hooks, "a HookSettings (TensorBoard folder, profiled steps)")
        _absolute_paths(self)
        _validate(self)
        object.__setattr__(self, "learning_rate", float(self.learning_rate))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists): the flat settings, stored with every run.

        The hooks go where runs have always stored them, `"extra": {"hooks":
        HookSettings.to_dict()}`, and `"extra"` is `{}` when no hook is on:
        the history, the exports and `--json` read that shape (see `recorded_hooks`).
        """
        data = asdict(self)
        del data["hooks"]
        data["devices"] = list(self.devices)
        data["cluster_hosts"] = list(self.cluster_hosts)
        data["vocab_by_input"] = [list(pair) for pair in self.vocab_by_input]
        data["extra"] = {"hooks": self.hooks.to_dict()} if self.hooks else {}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Rebuild from `to_dict()` output; unknown keys are ignored (older/newer files), the hooks read from `extra.hooks`."""
        known = {f.name for f in fields(cls)} - {"hooks"}
        kwargs = {k: v for k, v in data.items() if k in known}
        if "devices" in kwargs:
            kwargs["devices"] = tuple(kwargs["devices"] or ())
        if not names_a_file(kwargs.get("model")):  # a stored file's path is absolute
            kwargs.pop("custom_objects", None)  # stored by older versions, which ignored it for a sample model
        return cls(**kwargs, hooks=HookSettings.from_dict(recorded_hooks(data)))

    @property
    def model_ref(self) -> ModelRef:
        """The model and how its file may be opened (trust, vocab, custom objects, expected sha256), as one value."""
        return ModelRef(self.model, self.trust, self.vocab, self.custom_objects, self.model_sha256, self.vocab_by_input)

    def with_hooks(self, tensorboard: str | os.PathLike | None = None, profile: tuple[int, int] | None = None) -> RunConfig:
        """A copy that records which hooks are on (TensorBoard folder, profiled step range); none when called bare."""
        return replace(self, hooks=HookSettings(os.path.abspath(tensorboard) if tensorboard else "", profile or None))

    def with_changes(self, **changes: Any) -> RunConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def warnings(self, has_accelerator: bool) -> list[str]:
        """Valid but questionable choices, in words the user can act on."""
        notes = []
        if self.precision == "float16" and not has_accelerator:
            notes.append(
                "float16 on a CPU-only run is allowed but roughly 50x slower than float32 there: "
                "CPUs have no fast float16 math. Use precision 'off' (or 'bfloat16' on CPUs with AMX/AVX-512 BF16)."
            )
        if self.strategy == "mirrored" and len(self.devices) == 1:
            notes.append("Mirrored over a single device is a one-replica run: pick two or more devices to compare scaling.")
        return notes


SPEED_SETTINGS = (
    "model",
    "dataset",
    "batch_size",
    "precision",
    "steps_per_call",
    "xla",
    "backend",
    "optimizer",
    "vocab",
    "vocab_by_input",
    "custom_objects",
)
"""The settings besides the device that decide a step's speed (the learning rate, the seed and the length do not)."""
LEARNING_SETTINGS = (
    "model",
    "dataset",
    "batch_size",
    "learning_rate",
    "optimizer",
    "precision",
    "seed",
    "vocab",
    "vocab_by_input",
    "custom_objects",
)
"""The settings that decide how many samples a job needs to reach a loss (the device, strategy, backend and length do not)."""


def same_settings(recorded: Mapping[str, Any], config: RunConfig, names: Sequence[str]) -> bool:
    """A run's recorded config (`RunResult.config`, a dict) has `config`'s value for every one of `names`
    (SPEED_SETTINGS: it ran the same job; LEARNING_SETTINGS: it learns alike)."""
    wanted = config.to_dict()
    return all(json.dumps(recorded.get(name)) == json.dumps(wanted.get(name)) for name in names)


def normalize_device_name(name: str) -> str:
    """'/device:GPU:0', '/physical_device:GPU:0', 'gpu:0' -> 'GPU:0'."""
    if not isinstance(name, str):
        raise ConfigError("devices", name, "device names such as 'CPU:0' or 'GPU:1'")
    short = name.strip().split("device:")[-1].lstrip("/")
    kind, _, index = short.partition(":")
    if not kind or not is_whole_number(index):
        raise ConfigError("devices", name, "device names such as 'CPU:0' or 'GPU:1'")
    return f"{kind.upper()}:{int(index)}"


def normalize_address(address: str) -> str:
    """' host:2222 ' -> 'host:2222'; IPv6 as '[::1]:2222'. Raises ConfigError when not host:port."""
    allowed = "host:port addresses such as 10.0.0.2:2222 or node1:2222 ([::1]:2222 for IPv6)"
    if not isinstance(address, str):
        raise ConfigError("cluster_hosts", address, allowed)
    host, _, port = address.strip().rpartition(":")
    bare_host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if (
        not bare_host
        or any(c.isspace() or c in ",'\"[]/" for c in bare_host)
        or (":" in bare_host and bare_host == host)
        or not is_whole_number(port)
        or not 1 <= int(port) <= 65535
    ):
        raise ConfigError("cluster_hosts", address, allowed)
    return f"{host}:{int(port)}"


def _absolute_paths(config: RunConfig) -> None:
    """A model file, its custom objects and an .npz as absolute paths: workers and later sessions may start elsewhere."""
    if names_a_file(config.model):
        object.__setattr__(config, "model", os.path.abspath(os.path.expanduser(config.model)))
    if config.custom_objects and isinstance(config.custom_objects, str):
        object.__setattr__(config, "custom_objects", os.path.abspath(os.path.expanduser(config.custom_objects)))
    if isinstance(config.dataset, str) and config.dataset.lower().endswith(NPZ_SUFFIX):
        object.__setattr__(config, "dataset", os.path.abspath(os.path.expanduser(config.dataset)))


def _validate(config: RunConfig) -> None:
    """The checks a plain value can make; the catalogue's and the model file's are `check_workload`'s."""
    for name in ("model", "dataset"):
        if not isinstance(getattr(config, name), str) or not getattr(config, name):
            raise ConfigError(
                name,
                getattr(config, name),
                "a sample model's name or a model file's path" if name == "model" else "a data set's name or an .npz file",
            )
    if config.vocab is not None:
        _check_int("vocab", config.vocab, 2, 2**31 - 1)
    for name, size in config.vocab_by_input:
        if not isinstance(name, str) or not name:
            raise ConfigError("vocab_by_input", config.vocab_by_input, "(input name, N) pairs")
        _check_int("vocab", size, 2, 2**31 - 1)
    if not isinstance(config.trust, bool):
        raise ConfigError("trust", config.trust, "true or false")
    if not isinstance(config.custom_objects, str) or (config.custom_objects and not config.custom_objects.lower().endswith(".py")):
        raise ConfigError("custom_objects", config.custom_objects, "a .py file that defines the model's custom classes")
    _check_choice("strategy", config.strategy, STRATEGIES)
    _check_backend(config)
    _check_choice("optimizer", config.optimizer, (*OPTIMIZERS, FILE_OPTIMIZER))
    _check_choice("precision", config.precision, PRECISIONS)
    _check_int("batch_size", config.batch_size, 1, MAX_BATCH_SIZE)
    _check_int("steps", config.steps, 1, MAX_STEPS)
    if config.epochs is not None:
        _check_int("epochs", config.epochs, 1, 100_000)
    _check_int("steps_per_call", config.steps_per_call, 1, MAX_STEPS_PER_CALL)
    _check_int("seed", config.seed, 0, 2**31 - 1)
    _check_int("workers", config.workers, 1, MAX_WORKERS)
    lr = config.learning_rate
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0 or lr > 10:
        raise ConfigError("learning_rate", lr, "a number > 0 and <= 10, such as 0.001")
    if not isinstance(config.xla, bool):
        raise ConfigError("xla", config.xla, "true or false")
    if config.strategy == "one-device" and len(config.devices) != 1:
        raise ConfigError("devices", list(config.devices), "exactly one device for strategy 'one-device', e.g. CPU:0")
    if config.strategy == "default" and config.devices:
        raise ConfigError("devices", list(config.devices), "none for strategy 'default' (TensorFlow places ops itself)")
    if len(set(config.devices)) != len(config.devices):
        raise ConfigError("devices", list(config.devices), "each device once")
    if config.strategy == "mirrored":
        kinds = {d.split(":")[0] for d in config.devices}
        if len(kinds) > 1:
            raise ConfigError("devices", list(config.devices), "devices of one kind for mirrored (all CPUs or all GPUs)")
    _check_int("cluster_timeout_s", config.cluster_timeout_s, MIN_CLUSTER_TIMEOUT_S, MAX_CLUSTER_TIMEOUT_S)
    if config.cluster_hosts:
        if config.strategy != "multi-worker":
            raise ConfigError("cluster_hosts", list(config.cluster_hosts), "none unless the strategy is 'multi-worker'")
        if len(set(config.cluster_hosts)) != len(config.cluster_hosts):
            raise ConfigError("cluster_hosts", list(config.cluster_hosts), "each host:port once")
        if config.workers != len(config.cluster_hosts):
            raise ConfigError("workers", config.workers, f"{len(config.cluster_hosts)}: one worker per cluster address")
    timeout = config.tpu_timeout_s
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not MIN_TPU_TIMEOUT_S <= timeout <= MAX_TPU_TIMEOUT_S:
        raise ConfigError("tpu_timeout_s", timeout, f"seconds from {MIN_TPU_TIMEOUT_S} to {MAX_TPU_TIMEOUT_S}")
    if not isinstance(config.allow_network_workers, bool):
        raise ConfigError("allow_network_workers", config.allow_network_workers, "true or false")
    if config.strategy == "tpu" and not str(config.tpu_address).strip():
        raise ConfigError("tpu_address", config.tpu_address, "'local', a TPU name, or grpc://host:port")


def _check_backend(config: RunConfig) -> None:
    """The backend is known; JAX and PyTorch run neither TF's cluster/TPU strategies nor a tf.data build_dataset."""
    _check_choice("backend", config.backend, BACKENDS)
    if config.backend == "tensorflow":
        return
    if config.strategy in TF_ONLY_STRATEGIES:
        raise ConfigError("strategy", config.strategy, f"default, one-device or mirrored on the {config.backend} backend")
    check_host_cpus(config.devices, config.backend, "devices", list(config.devices))
    if config.backend == "torch" and config.strategy == "mirrored":
        raise ConfigError("strategy", config.strategy, "default or one-device on the torch backend (Keras has no data parallel API for it)")
    if config.dataset == "build_dataset":
        raise ConfigError(
            "dataset",
            config.dataset,
            f"synthetic or an .npz on the {config.backend} backend: a .py's build_dataset() gives a tf.data pipeline, "
            "which trains on the TensorFlow backend only; add --data synthetic (or an .npz), or --backend tensorflow",
        )


def check_host_cpus(devices: Sequence[str], backend: str, field_name: str, given: Any) -> None:
    """ConfigError unless every CPU device is below MAX_LOGICAL_CPUS: JAX would ask XLA for that many host devices (and hang)."""
    if any(d.startswith("CPU:") and int(d.split(":")[1]) >= MAX_LOGICAL_CPUS for d in devices):
        raise ConfigError(field_name, given, f"CPU devices from CPU:0 to CPU:{MAX_LOGICAL_CPUS - 1} on the {backend} backend")


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, value, ", ".join(allowed))


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(name, value, f"a whole number from {low} to {high}")


def backend_title(name: str) -> str:
    """'jax' -> 'JAX' (a name it does not know, as it is)."""
    return BACKEND_TITLES.get(name, name)
