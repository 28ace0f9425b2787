"""The options every job command shares (`run`, `compare`, `sweep`, `max-batch`, `autotune`), and the RunConfig they make.

One parser and one builder: the same defaults and the same model-file checks for
every command (`add_job_arguments`, `job_config`); a new shared option is a few
lines in `add_job_arguments` and, when it is a RunConfig field, one in `job_config`.

`--model` is a sample model's name or the user's model file (.keras, .h5, .py).
A file is described in a time-limited child process before TensorFlow loads
here (`core.workloads.model_probe`): a file or data that cannot be used stops
the command with ModelFileError (exit code 2) before any run starts, and the
config gets the data the file resolves to and the file's sha256.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from core.compare.targets import CompareTarget
from core.config import BACKENDS, FILE_OPTIMIZER, MAX_LOGICAL_CPUS, OPTIMIZERS, PRECISIONS, ConfigError, RunConfig, is_whole_number
from core.formatting import format_bytes
from core.history.database import StoreError
from core.jobs.rounds import DEFAULT_ROUNDS, MAX_ROUNDS
from core.workloads.memory_estimate import estimate_from_description
from core.workloads.user_workload import PYTHON_DATA, SYNTHETIC, check_backend_layers
from core.workloads.workload import check_workload, is_model_file, model_title

if TYPE_CHECKING:
    from core.history.store import RunStore
    from core.jobs import JobOptions, RecordedRun

SAMPLE_DATA_DEFAULT = "synthetic"
MAX_VOCAB = 2**31 - 1


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    """`--backend`: the Keras backend that trains the job (JAX and PyTorch in a child process of their own)."""
    parser.add_argument(
        "--backend",
        default="tensorflow",
        choices=BACKENDS,
        help="the Keras backend that trains it (default tensorflow); jax and torch train in a child process that imports no TensorFlow",
    )


SETTING_OPTIONS = {
    "batch_size": "batch_size",
    "steps": "steps",
    "epochs": "epochs",
    "precision": "precision",
    "xla": "xla",
    "steps_per_call": "steps_per_call",
    "tpu_timeout_s": "tpu_timeout",
    "allow_network_workers": "allow_network_workers",
}
"""RunConfig fields read from the option of that `dest` where a command has one; a command whose option of that
name says something else (a sweep's comma-separated values) passes the field to `job_config` instead."""


def add_rounds_argument(parser: argparse.ArgumentParser) -> None:
    """`--rounds`: how many interleaved rounds the candidates are measured in (`core.jobs.rounds`)."""
    parser.add_argument(
        "--rounds",
        type=whole_number("--rounds", 1, MAX_ROUNDS, f"a whole number from 1 to {MAX_ROUNDS}"),
        default=DEFAULT_ROUNDS,
        metavar="N",
        help=f"interleaved rounds: each runs every candidate once, in a new random order, and the intervals come from them "
        f"(default {DEFAULT_ROUNDS}; 1 round claims no difference across runs)",
    )


TARGET_LOSS_HELP = (
    "time each run to this smoothed loss (steps, samples and seconds to reach it); "
    "default: the highest of the runs' smoothed final losses, which every run reached"
)


def add_target_loss_argument(parser: argparse._ActionsContainer, help_text: str = TARGET_LOSS_HELP) -> None:
    """`--target-loss L`: the loss each run is timed to (`core.training.to_target`); without it, the runs' common one
    (`help_text` says what another command does with it). `parser`: a parser or one of its groups."""
    parser.add_argument(
        "--target-loss",
        type=finite_number("--target-loss", "a finite number (a loss the runs should reach)"),
        default=None,
        metavar="L",
        help=help_text,
    )


def add_job_arguments(parser: argparse.ArgumentParser, trains_here: bool = True, records: bool = True) -> None:
    """The options every job command shares (`run`, `compare`, `sweep`, `max-batch`, `autotune`), with one default each.

    The model and its data, trust, vocabulary, optimizer, learning rate, seed
    and output; `trains_here`: --logical-cpus (the command trains in this
    process); `records`: --no-save (its runs go to the history).
    """
    parser.add_argument(
        "--model",
        required=True,
        type=non_empty("--model", "a sample model's name or a model file"),
        metavar="NAME|FILE",
        help="a sample model (see `main.py models`) or your model file: .keras, .h5 or .py",
    )
    parser.add_argument(
        "--data",
        default=None,
        type=non_empty("--data", "a data set's name or an .npz file"),
        help="sample models: synthetic (default), digits, mnist, fashion_mnist, cifar10, imdb; a model file: synthetic, "
        "build_dataset (the .py's; its default when it has one) or an .npz file (x and y, or one array per input/output name)",
    )
    parser.add_argument(
        "--trust", action="store_true", help="let the model file run its code (any .py file, Lambda layers): only for files you trust"
    )
    parser.add_argument(
        "--vocab",
        type=vocab_setting,
        default=(None, ()),
        metavar="N|NAME=N",
        help="synthetic ids in [0, N) for integer inputs whose range the model does not say; NAME=N (comma-separated) "
        "sets a named input's range over what its embedding says",
    )
    parser.add_argument(
        "--custom-objects",
        default="",
        metavar="FILE.py",
        help="a .py defining the model file's custom layers (registered before it opens; runs its code: needs --trust)",
    )
    parser.add_argument("--lr", type=float, default=RunConfig.learning_rate, help="learning rate (default %(default)g)")
    parser.add_argument(
        "--optimizer",
        default=None,
        choices=(*OPTIMIZERS, FILE_OPTIMIZER),
        help="default: a model file's own compiled optimizer with its settings (file), else adam",
    )
    parser.add_argument("--seed", type=int, default=RunConfig.seed)
    add_backend_argument(parser)
    if trains_here:
        add_logical_cpus_argument(parser)
    if records:
        parser.add_argument("--no-save", action="store_true", help="do not record the runs in the history")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--verbose", action="store_true", help="show TensorFlow's own log on stderr")


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """The settings of one training job (`run`, `compare`): batch, steps or epochs, precision, XLA, steps per call, TPU and workers."""
    parser.add_argument("--batch-size", type=int, default=RunConfig.batch_size, help="global batch size (default %(default)s)")
    length = parser.add_mutually_exclusive_group()  # both given: exit 2 (--epochs once overrode --steps without a word)
    length.add_argument("--steps", type=int, default=RunConfig.steps, help="training steps (default %(default)s)")
    length.add_argument("--epochs", type=int, default=None, help="whole passes over the data instead of --steps")
    parser.add_argument("--precision", default=RunConfig.precision, choices=PRECISIONS)
    parser.add_argument("--xla", action="store_true", help="compile each step with XLA")
    parser.add_argument("--steps-per-call", type=int, default=RunConfig.steps_per_call, metavar="K", help="steps per tf.function call")
    parser.add_argument(
        "--tpu-timeout",
        type=float,
        default=RunConfig.tpu_timeout_s,
        metavar="S",
        help="seconds the TPU may take to answer before the run fails",
    )
    parser.add_argument(
        "--allow-network-workers",
        action="store_true",
        help="start local multi-worker runs even where their servers cannot be hidden from the network",
    )


def add_logical_cpus_argument(parser: argparse.ArgumentParser) -> None:
    rule = f"a whole number from 0 (no split) to {MAX_LOGICAL_CPUS}"
    parser.add_argument(
        "--logical-cpus",
        type=whole_number("--logical-cpus", 0, MAX_LOGICAL_CPUS, rule),
        default=0,
        metavar="N",
        help="split the CPU into N logical devices",
    )


def job_config(args: argparse.Namespace, target: CompareTarget | None = None, **overrides: Any) -> RunConfig:
    """The RunConfig of a job command's options (validated), on `target`; a model file is checked in a child process first.

    `overrides` set what the command's own options say (a sweep's first
    point, a search's start batch). A GPU or TPU this machine does not have
    is refused here, before TensorFlow loads. Raises ConfigError for a bad
    setting, ModelFileError (ModelDataError) for a file or data that cannot be used.
    """
    fields = {name: getattr(args, dest) for name, dest in SETTING_OPTIONS.items() if hasattr(args, dest)}
    fields.update(
        model=args.model,
        dataset=args.data or SAMPLE_DATA_DEFAULT,
        trust=args.trust,
        vocab=args.vocab[0],
        vocab_by_input=args.vocab[1],
        learning_rate=args.lr,
        optimizer=args.optimizer or (FILE_OPTIMIZER if is_model_file(args.model) else "adam"),
        seed=args.seed,
        custom_objects=args.custom_objects,
        backend=args.backend,
    )
    fields.update(overrides)
    config = check_workload(RunConfig(**fields))  # every setting checked before a child is started for the file
    if target is not None:
        config = target.config_for(config)
    check_devices_here(config)
    if not is_model_file(config.model):
        return config
    return checked_model_file(config, data_given=args.data is not None)


def check_energy_counter(config: RunConfig) -> None:
    """ConfigError for an energy objective where the job's devices keep no energy counter (said before anything runs)."""
    from core.hooks.energy import energy_unavailable
    from core.machine.gpu import driver_gpu_count

    devices = list(config.devices) or (["GPU:0"] if driver_gpu_count() else ["CPU:0"])  # an unnamed device: a GPU where there is one
    reason = energy_unavailable(devices)
    if reason:
        raise ConfigError("--objective", "energy", f"a target whose energy is measured; here {reason}. Pick another --objective")


def check_devices_here(config: RunConfig) -> None:
    """ConfigError when `config` names a GPU or TPU this machine does not have, found without TensorFlow (NVML, device files).

    CPUs are left to TensorFlow (their number depends on --logical-cpus);
    a GPU the driver lists but TensorFlow cannot use is refused when the run starts.
    """
    for kind, found in (("GPU", _gpus_here), ("TPU", _tpus_here)):
        wanted = [name for name in config.devices if name.upper().startswith(kind + ":")]
        if not wanted:
            continue
        count, listing = found()
        for name in wanted:
            if count is not None and int(name.split(":")[1]) >= count:
                raise ConfigError("devices", name, f"devices this machine has: {listing}")


def _gpus_here() -> tuple[int | None, str]:
    from core.machine.gpu import load_nvml

    nvml, problem = load_nvml()
    count = nvml.nvmlDeviceGetCount() if nvml is not None else 0
    if count:
        return count, ", ".join(f"GPU:{index}" for index in range(count)) + ", CPU:0"
    return 0, f"CPU:0 only: no GPU found by NVML{f' ({problem})' if problem else ''}"


def _tpus_here() -> tuple[int | None, str]:
    """(0, why none) when nothing hints at a TPU; (None: TensorFlow counts its cores as the run starts, the hint) otherwise."""
    from core.machine.tpu import detect_tpu_cheaply

    hint = detect_tpu_cheaply()
    if hint:
        return None, f"a TPU ({hint})"
    return 0, "CPU:0 and no TPU: no TPU chip on PCI, no /dev/accel*, no TPU environment variable"


def non_empty(option: str, rule: str) -> Callable[[str], str]:
    """An argparse type refusing an empty value with the option's rule (argparse would take "" as given)."""

    def check(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"got an empty value; allowed: {rule}")
        return text

    check.__name__ = option
    return check


def whole_number(option: str, low: int, high: int, rule: str) -> Callable[[str], int]:
    """An argparse type for a whole number from `low` to `high`, refused with `rule` otherwise (before TensorFlow loads)."""

    def check(text: str) -> int:
        value = text.strip()
        number = int(value) if is_whole_number(value.removeprefix("-")) else None
        if number is None or not low <= number <= high:
            raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {rule}")
        return number

    check.__name__ = option
    return check


def vocab_setting(text: str) -> tuple[int | None, tuple[tuple[str, int], ...]]:
    """`--vocab`: "N" (inputs no embedding bounds), "NAME=N" pairs (named inputs, over their embedding's range), or both."""
    rule = f"N or NAME=N (comma-separated), N a whole number from 2 to {MAX_VOCAB}"
    size = whole_number("--vocab", 2, MAX_VOCAB, rule)
    plain: int | None = None
    named: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        name, equals, value = item.rpartition("=")
        if not equals and plain is None:
            plain = size(value)
        elif equals and name.strip() and name.strip() not in named:
            named[name.strip()] = size(value)
        else:
            raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {rule}")
    return plain, tuple(named.items())


def finite_number(option: str, rule: str) -> Callable[[str], float]:
    """An argparse type for a finite number, refused with `rule` otherwise (before TensorFlow loads)."""

    def check(text: str) -> float:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {rule}")
        return number

    check.__name__ = option
    return check


def checked_model_file(config: RunConfig, data_given: bool = True) -> RunConfig:
    """`config` with the data its model file resolves to and the file's sha256, after a child has opened both.

    Says on stderr what the file is (inputs, outputs, parameters, losses, data)
    and its memory estimate. `data_given` False lets the file pick its data
    (its build_dataset when a .py has one, else synthetic; synthetic on JAX and PyTorch, said in the line).
    """
    from core.workloads.model_probe import describe_model_file

    described = describe_model_file(config.model_ref, data=config.dataset if data_given else None, batch_size=config.batch_size)
    check_backend_layers(described, config.backend)
    data = described["data"]
    if data == PYTHON_DATA and config.backend != "tensorflow" and not data_given:
        data = described["data"] = SYNTHETIC
        described["notes"] = [
            *described.get("notes", []),
            "synthetic data: its build_dataset() is a tf.data pipeline, which trains on TensorFlow only (--backend tensorflow trains on it)",
        ]
    print(describe_line(described, config), file=sys.stderr)
    return config.with_changes(dataset=data, model_sha256=described["sha256"])


def describe_line(described: dict[str, Any], config: RunConfig) -> str:
    """One line on a model file: name, inputs, outputs, parameters, losses, data and the memory estimate."""
    inputs = ", ".join(f"{i['name']} {i['dtype']} {_shape(i['shape'])}" for i in described["inputs"])
    losses = ", ".join(f"{loss['output']}: {loss['loss']}" for loss in described["losses"])
    estimate = estimate_from_description(described, config.optimizer, config.precision)
    memory = (
        f"{format_bytes(estimate.total_bytes)} before activations (weights {format_bytes(estimate.weight_bytes)}, "
        f"gradients {format_bytes(estimate.gradient_bytes)}, optimizer state {format_bytes(estimate.optimizer_bytes)})"
    )
    notes = "".join(f"; {note}" for note in described.get("notes", []))
    return (
        f"model file {model_title(config.model)}: inputs {inputs}; {len(described['outputs'])} output(s); "
        f"{described['params']:,} parameters; loss {losses}; optimizer {optimizer_in_use(described, config.optimizer)}; "
        f"data {model_title(described['data'])}; memory {memory}{notes}"
    )


def optimizer_in_use(described: dict[str, Any], optimizer: str) -> str:
    """The optimizer a run on the described file trains with, and whose it is ("rmsprop (the file's)")."""
    own = described.get("optimizer")
    if optimizer != FILE_OPTIMIZER and own and own != optimizer and described.get("kind") != "python":
        return f"{optimizer} (the run's, replacing the file's {own})"
    if own:
        return f"{own} (the file's)"
    return f"{'adam' if optimizer == FILE_OPTIMIZER else optimizer} (the run's)"


def _shape(shape: list[int | None]) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"


class CliHistory:
    """The history as one command records its runs: opened once, each run recorded while it trains (`core.jobs`).

    A history that cannot be opened or written never stops a run nor its
    printed result: each distinct reason is said once on stderr.
    """

    def __init__(self, skip: bool):
        self.skip = skip
        self._said: set[str] = set()
        self.store: RunStore | None = None
        self.error = ""
        if skip:
            return
        try:
            self.store = open_history(for_recording=True)
        except StoreError as exc:
            self.error = f"The run history could not be opened: {exc} This run is not saved."

    def options(self, **fields: Any) -> JobOptions:
        """The job options for runs recorded here (`fields`: label, group, diagnose, hooks, listener, ...)."""
        from core.jobs import JobOptions

        return JobOptions(unsaved_reason=self.error, **fields)

    def report(self, recorded: RecordedRun) -> None:
        """After a run: where it is saved, or why it is not (each reason once)."""
        if recorded.history_error:
            self.say_error(recorded.history_error)
        elif recorded.run_id is not None:
            print(f"saved as run {recorded.run_id} in the history", file=sys.stderr)

    def say_error(self, error: str) -> None:
        """Say why a run is not (fully) saved, unless that was said already."""
        if error and error not in self._said:
            self._said.add(error)
            print(f"warning: {error}", file=sys.stderr)


@functools.cache
def open_history(for_recording: bool = False):
    """The run history, opened once per command (a comparison records several runs), its notice said once.

    When recording, a read-only history's notice is left to the recorder's one message.
    """
    store = _open_store()
    if store.notice and not (for_recording and store.read_only):
        print(f"warning: {store.notice}", file=sys.stderr)
    return store


@functools.cache
def _open_store():
    from core.history.store import RunStore

    return RunStore.open()


def configure_tensorflow(logical_cpus: int, verbose: bool = False, jobs: Sequence[RunConfig] = ()) -> None:
    """Import TF (its C++ start-up chatter to the log file unless --verbose) and split the CPU if asked.

    Where TensorFlow is not installed (a machine with JAX or PyTorch only) nothing is
    imported: `jobs` that train on TensorFlow are refused (TensorFlowMissing, exit code 2),
    the others (JAX, PyTorch) train in their own child processes without it.
    """
    from core.tensorflow_import import TensorFlowMissing, tensorflow_installed

    if not tensorflow_installed():
        for job in jobs:
            if job.backend == "tensorflow":
                raise TensorFlowMissing(f"{model_title(job.model)} on the tensorflow backend (the default)")
        return
    from core.logs import import_tensorflow_quietly
    from core.machine.runtime import RuntimeSettings, configure_runtime

    if not verbose:
        import_tensorflow_quietly()

    for warning in configure_runtime(RuntimeSettings(logical_cpus=logical_cpus)):
        print(f"warning: {warning}", file=sys.stderr)
