"""The run form's state: every choice of the form as plain values, with change events, and the run it describes.

`RunFormState` is a psygnal evented dataclass (napari's `EventedModel` pattern): setting a field emits
`state.events.<field>(new, old)` and `state.events.all`, and only when the value changes. The widgets of
`gui.run_form` render it and write the user's edits into it; `gui.remembered` saves and restores it
(`gui.state.saved_form`). It imports no Qt, so it is tested without a widget.

Text fields hold the text as typed (a batch size of "abc" is a choice the form explains, not a number), and
`check()` reads the state as the form always has: each field's problem in words with what to type, then
`RunConfig` and the catalogue (`check_workload`). Some fields are what the app knows rather than what the user
chose (the strategies this machine offers, the model file described, what is being opened, whether local workers
can be isolated, a confirmation given this session): they are never saved. Steps per call follows the strategy
here while the user has not typed their own.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from psygnal import SignalGroupDescriptor

from core.config import (
    MAX_BATCH_SIZE,
    MAX_STEPS,
    MAX_STEPS_PER_CALL,
    OPTIMIZERS,
    PRECISIONS,
    ConfigError,
    RunConfig,
    normalize_address,
)
from core.training.strategies import StrategyChoice
from core.workloads.user_workload import SYNTHETIC
from core.workloads.workload import check_workload, is_model_file
from gui.state.numbers import positive_number, text_error, whole_number
from gui.window_words import window_words

# The form's defaults are RunConfig's, as the CLI's are: one source.
DEFAULT_MODEL = "mlp"
DEFAULT_DATASET = "digits"
DEFAULT_STEPS = RunConfig.steps
DEFAULT_BATCH = RunConfig.batch_size
DEFAULT_LEARNING_RATE = f"{RunConfig.learning_rate:g}"
DEFAULT_PROFILE_STEPS = (3, 5)
DEFAULT_TPU_ADDRESS = "local"
STEPS_UNIT, EPOCHS_UNIT = "steps", "epochs"
LENGTH_UNITS = (STEPS_UNIT, EPOCHS_UNIT)
MAX_EPOCHS = 100_000
MAX_VOCAB = 2**31 - 1
ALLOW_NETWORK_WORKERS = "Start them anyway, reachable from the network"  # the cluster box's check box
TPU_STEPS_PER_CALL = 100  # a TPU step is launched from the host: many steps per call hide that latency
# RunConfig fields `apply` can fill.
APPLICABLE = ("batch_size", "precision", "xla", "steps_per_call", "learning_rate", "optimizer", "steps", "epochs")

BATCH_SIZE = whole_number(1, MAX_BATCH_SIZE, DEFAULT_BATCH)
STEPS = whole_number(1, MAX_STEPS, DEFAULT_STEPS)
EPOCHS = whole_number(1, MAX_EPOCHS, 1)
LEARNING_RATE = positive_number(10, DEFAULT_LEARNING_RATE)
STEPS_PER_CALL = whole_number(1, MAX_STEPS_PER_CALL, 1)
VOCAB = whole_number(2, MAX_VOCAB, 1000)
_SEPARATORS = re.compile(r"[\s,;]+")
_KNOWN = {"saved": False}  # the metadata of a field the app knows, never saved


def _known(default: Any) -> Any:
    return field(default=default, metadata=_KNOWN)


def spc_default(strategy: str) -> str:
    """The steps per call the form fills in for `strategy`."""
    return str(TPU_STEPS_PER_CALL if strategy == "tpu" else 1)


@dataclass(frozen=True)
class ModelFile:
    """What the form knows of the described model file it trains: read when the file is opened, never saved."""

    path: str
    sha256: str
    trusted: bool
    custom_objects: str = ""
    open_ranges: tuple[str, ...] = ()  # integer inputs whose id range no Embedding tells: synthetic data needs a vocabulary
    tf_only_layers: tuple[str, ...] = ()  # layers that train on the TensorFlow backend only (TextVectorization, …)


@dataclass
class RunFormState:
    """Every choice of the run form, and what the app knows that the form's check needs."""

    events: ClassVar[SignalGroupDescriptor] = SignalGroupDescriptor()

    # what to train
    model: str = DEFAULT_MODEL  # a sample model's name, or a model file's path
    dataset: str = DEFAULT_DATASET
    vocab: str = ""  # the id range of integer inputs no Embedding describes (a model file on synthetic data)
    backend: str = "tensorflow"
    # where
    strategy: str = "default"
    device: str = ""  # the one device of "one-device" (TensorFlow's name)
    mirrored_devices: tuple[str, ...] = ()  # the devices ticked for "mirrored"
    use_hosts: bool = False  # multi-worker over the hosts of a cluster (else worker processes on this machine)
    workers: int = RunConfig.workers  # local worker processes
    hosts: str = ""  # the cluster's host:port addresses as typed, this machine first
    cluster_timeout_s: int = RunConfig.cluster_timeout_s
    tpu_address: str = DEFAULT_TPU_ADDRESS
    tpu_timeout_s: int = int(RunConfig.tpu_timeout_s)
    # how
    batch_size: str = str(DEFAULT_BATCH)
    length: str = str(DEFAULT_STEPS)
    length_unit: str = STEPS_UNIT
    learning_rate: str = DEFAULT_LEARNING_RATE
    optimizer: str = RunConfig.optimizer
    precision: str = RunConfig.precision
    xla: bool = RunConfig.xla
    steps_per_call: str = "1"
    # what the run carries
    tensorboard: bool = False
    tensorboard_dir: str = ""
    profile: bool = False
    profile_first: int = DEFAULT_PROFILE_STEPS[0]
    profile_last: int = DEFAULT_PROFILE_STEPS[1]
    # what the app knows (never saved)
    strategies: tuple[StrategyChoice, ...] = _known(())  # each strategy, available here or not and why
    model_file: ModelFile | None = _known(None)  # the described model file the form trains
    pending: str = _known("")  # what is being opened or checked, in words: Start waits for it
    isolation_problem: str | None = _known(None)  # why local workers cannot be isolated ("" when they can; None: unknown)
    allow_network_workers: bool = _known(False)  # confirmed this session: run local workers reachable from the network

    def __post_init__(self) -> None:
        self.events.strategy.connect(self._follow_strategy)

    @classmethod
    def saved_fields(cls) -> tuple[str, ...]:
        """The fields that are the user's choices: what settings keep across restarts."""
        return tuple(f.name for f in fields(cls) if f.metadata.get("saved", True))

    # --- reading the form ------------------------------------------------------

    def check(self) -> tuple[RunConfig | None, list[str]]:
        """The run the form describes and [], or None and what is wrong, each with what to do."""
        errors = [*self._model_errors(), *self.training_errors(), *self._placement_errors(), *self._backend_errors()]
        if errors:
            return None, errors
        try:
            config = check_workload(
                RunConfig(
                    **self._model_fields(),
                    **self._training_values(),
                    strategy=self.strategy,
                    devices=self.selected_devices(),
                    workers=len(self.host_list()) if self.use_hosts else self.workers,
                    tpu_address=self.tpu_address.strip(),
                    tpu_timeout_s=float(self.tpu_timeout_s),
                    cluster_hosts=self.host_list() if self.strategy == "multi-worker" else (),
                    cluster_timeout_s=self.cluster_timeout_s,
                    allow_network_workers=self.strategy == "multi-worker" and self.network_workers_allowed(),
                    backend=self.backend,
                )
            )
            tensorboard = os.path.expanduser(self.tensorboard_dir.strip()) if self.tensorboard else ""
            return config.with_hooks(tensorboard or None, (self.profile_first, self.profile_last) if self.profile else None), []
        except ConfigError as exc:
            return None, [f"Settings rejected: {window_words(str(exc))}"]

    def config(self) -> RunConfig | None:
        """The run the form describes, or None while anything is wrong."""
        return self.check()[0]

    def errors(self) -> list[str]:
        """What is wrong with the form, each with what to type ([] when a run can be described)."""
        return self.check()[1]

    def training_errors(self) -> list[str]:
        """The problems of the training fields' text (batch, length, learning rate, steps per call)."""
        checks = (
            ("Batch size", BATCH_SIZE, self.batch_size),
            (self.length_label, self.length_parser, self.length),
            ("Learning rate", LEARNING_RATE, self.learning_rate),
            ("Steps per call", STEPS_PER_CALL, self.steps_per_call),
        )
        return [error for error in (text_error(*check) for check in checks) if error]

    @property
    def length_label(self) -> str:
        return "Epochs" if self.length_unit == EPOCHS_UNIT else "Steps"

    @property
    def length_parser(self):
        """What the length field takes in its unit: steps, or epochs."""
        return EPOCHS if self.length_unit == EPOCHS_UNIT else STEPS

    def selected_devices(self) -> tuple[str, ...]:
        """The TensorFlow names of the devices the strategy trains on; () when it places itself."""
        if self.strategy == "one-device":
            return (self.device,) if self.device else ()
        if self.strategy == "mirrored":
            return self.mirrored_devices
        return ()

    def host_list(self) -> tuple[str, ...]:
        """The typed cluster addresses in order; () for local workers."""
        return tuple(part for part in _SEPARATORS.split(self.hosts) if part) if self.use_hosts else ()

    def vocab_needed(self) -> bool:
        """True when the model file has integer inputs of unknown range and trains on synthetic data: a vocabulary to give."""
        opened = self.described_file()
        return opened is not None and self.dataset == SYNTHETIC and bool(opened.open_ranges)

    def described_file(self) -> ModelFile | None:
        """The described model file the form trains, or None for a sample model (or a file not described yet)."""
        opened = self.model_file
        return opened if opened is not None and opened.path == self.model else None

    def strategy_choice(self) -> StrategyChoice | None:
        """The chosen strategy's entry among those this machine offers (None before they are known)."""
        return next((choice for choice in self.strategies if choice.name == self.strategy), None)

    # --- filling the form --------------------------------------------------------

    def apply(self, changes: dict[str, Any]) -> None:
        """Fill the fields from RunConfig field names (what a sweep or autotune found best); None leaves a field as it is.

        Raises ValueError, before changing anything, for a name the form has no field for or a choice it does not offer.
        """
        unknown = sorted(set(changes) - set(APPLICABLE))
        if unknown:
            raise ValueError(f"the run form has no field for {', '.join(unknown)}; it fills {', '.join(APPLICABLE)}")
        wanted = {key: value for key, value in changes.items() if value is not None}
        if "precision" in wanted and wanted["precision"] not in PRECISIONS:
            raise ValueError(f"precision {wanted['precision']!r} is not one of {', '.join(PRECISIONS)}")
        if "optimizer" in wanted and wanted["optimizer"] not in OPTIMIZERS:
            raise ValueError(f"optimizer {wanted['optimizer']!r} is not one of {', '.join(OPTIMIZERS)}")
        if "batch_size" in wanted:
            self.batch_size = str(int(wanted["batch_size"]))
        if "steps_per_call" in wanted:
            self.steps_per_call = str(int(wanted["steps_per_call"]))
        if "learning_rate" in wanted:
            self.learning_rate = repr(float(wanted["learning_rate"]))
        if "precision" in wanted:
            self.precision = wanted["precision"]
        if "optimizer" in wanted:
            self.optimizer = wanted["optimizer"]
        if "xla" in wanted:
            self.xla = bool(wanted["xla"])
        if "epochs" in wanted or "steps" in wanted:
            self.length_unit = EPOCHS_UNIT if "epochs" in wanted else STEPS_UNIT
            self.length = str(int(wanted["epochs"] if "epochs" in wanted else wanted["steps"]))

    def _follow_strategy(self, strategy: str, previous: str) -> None:
        """Steps per call follows the strategy (100 on a TPU, else 1) while it holds the previous strategy's default."""
        if self.steps_per_call.strip() == spc_default(previous):
            self.steps_per_call = spc_default(strategy)

    # --- the parts of the check --------------------------------------------------

    def _model_errors(self) -> list[str]:
        if self.pending:
            return [self.pending]
        if is_model_file(self.model) and self.described_file() is None:
            return [f"Model: {os.path.basename(self.model)} is not read yet: choose it again in the Model menu."]
        if self.vocab_needed() and (problem := text_error("Vocabulary", VOCAB, self.vocab)):
            if not self.vocab.strip():
                names = ", ".join(f"'{name}'" for name in self.model_file.open_ranges) if self.model_file else ""
                return [f"Vocabulary: input {names} takes integer ids that feed no Embedding: type how many ids there are "
                        "(e.g. 1000), or train on your own data (Open .npz…)."]  # fmt: skip
            return [problem]
        return []

    def _placement_errors(self) -> list[str]:
        errors = []
        choice = self.strategy_choice()
        if choice is not None and not choice.available:
            errors.append(f"Strategy {choice.label}: {choice.reason}")
        devices = self.selected_devices()
        if self.strategy == "one-device" and not devices:
            errors.append("Devices: pick the device to train on.")
        if self.strategy == "mirrored" and len(devices) < 2:
            errors.append("Devices: tick two or more devices of one kind for mirrored.")
        if self.strategy == "multi-worker":
            errors.extend(self._cluster_errors())
        return errors

    def _cluster_errors(self) -> list[str]:
        if not self.use_hosts:
            if not self.isolation_problem or self.allow_network_workers:
                return []
            return [
                f"Cluster: the local workers cannot be isolated from the network here ({self.isolation_problem}). "
                f"Tick “{ALLOW_NETWORK_WORKERS}” to start them so, or use a cluster of hosts."
            ]
        hosts = self.host_list()
        if not hosts:
            return ["Cluster: list one host:port per worker, this machine first (or press Read from environment)."]
        problems = []
        for host in hosts:
            try:
                normalize_address(host)
            except ConfigError as exc:
                problems.append(f"Cluster: {host!r} is not host:port; use {exc.allowed}.")
        return problems

    def network_workers_allowed(self) -> bool:
        """True when local workers that cannot be isolated here may run reachable from the network (confirmed)."""
        return not self.use_hosts and bool(self.isolation_problem) and self.allow_network_workers

    def _backend_errors(self) -> list[str]:
        """A model file holding layers that train on TensorFlow only (TextVectorization, ...) with another Backend chosen."""
        opened = self.described_file()
        if self.backend == "tensorflow" or opened is None or not opened.tf_only_layers:
            return []
        return [
            f"Backend: {', '.join(opened.tf_only_layers)} trains on the TensorFlow backend only (Keras builds it on TensorFlow ops): "
            "pick Backend TensorFlow."
        ]

    def _model_fields(self) -> dict[str, Any]:
        fields_: dict[str, Any] = {"model": self.model, "dataset": self.dataset}
        opened = self.described_file()
        if opened is not None:
            vocab = VOCAB(self.vocab) if self.vocab_needed() else None
            fields_.update(trust=opened.trusted, vocab=vocab, model_sha256=opened.sha256, custom_objects=opened.custom_objects)
        return fields_

    def _training_values(self) -> dict[str, Any]:
        epochs = self.length_unit == EPOCHS_UNIT
        length = int(self.length_parser(self.length))
        return {
            "batch_size": int(BATCH_SIZE(self.batch_size)),
            "steps": DEFAULT_STEPS if epochs else length,
            "epochs": length if epochs else None,
            "learning_rate": float(LEARNING_RATE(self.learning_rate)),
            "optimizer": self.optimizer,
            "precision": self.precision,
            "xla": self.xla,
            "steps_per_call": int(STEPS_PER_CALL(self.steps_per_call)),
        }
