"""The options every training command shares (`run`, `compare`), and the RunConfig they make.

`--model` is a sample model's name or the user's model file (.keras, .h5, .py).
A file is described in a time-limited child process before TensorFlow loads
here (`core.workloads.model_probe`): a file or data that cannot be used stops
the command with ModelFileError (exit code 2) before any run starts, and the
config gets the data the file resolves to and the file's sha256.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from core.config import BACKENDS, OPTIMIZERS, PRECISIONS, RunConfig
from core.formatting import format_bytes
from core.workloads.memory_estimate import estimate_from_description
from core.workloads.workload import is_model_file, model_title

SAMPLE_DATA_DEFAULT = "synthetic"


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    """`--backend`: the Keras backend that trains the job (JAX and PyTorch in a child process of their own)."""
    parser.add_argument(
        "--backend",
        default="tensorflow",
        choices=BACKENDS,
        help="the Keras backend that trains it (default tensorflow); jax and torch train in a child process that imports no TensorFlow",
    )


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    add_backend_argument(parser)
    parser.add_argument(
        "--model", required=True, metavar="NAME|FILE", help="a sample model (see `main.py models`) or your model file: .keras, .h5 or .py"
    )
    parser.add_argument(
        "--data",
        default=None,
        help="sample models: synthetic (default), digits, mnist, fashion_mnist, cifar10, imdb; a model file: synthetic, "
        "build_dataset (the .py's; its default when it has one) or an .npz file (x and y, or one array per input/output name)",
    )
    parser.add_argument(
        "--trust", action="store_true", help="let the model file run its code (any .py file, Lambda layers): only for files you trust"
    )
    parser.add_argument(
        "--vocab", type=int, default=None, metavar="N", help="synthetic ids in [0, N) for integer inputs that feed no Embedding"
    )
    parser.add_argument("--logical-cpus", type=int, default=0, metavar="N", help="split the CPU into N logical devices")
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=None, help="whole passes over the data instead of --steps")
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate")
    parser.add_argument("--optimizer", default="adam", choices=OPTIMIZERS)
    parser.add_argument("--precision", default="off", choices=PRECISIONS)
    parser.add_argument("--xla", action="store_true", help="compile each step with XLA")
    parser.add_argument("--steps-per-call", type=int, default=1, metavar="K", help="steps per tf.function call")
    parser.add_argument("--seed", type=int, default=0)
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
    parser.add_argument("--no-save", action="store_true", help="do not record the run in the history")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--verbose", action="store_true", help="show TensorFlow's own log on stderr")


def job_config(args: argparse.Namespace, **overrides: Any) -> RunConfig:
    """The RunConfig of the options (validated); a model file is checked in a child process first.

    Raises ConfigError for a bad setting, ModelFileError (ModelDataError) for a
    file or data that cannot be used.
    """
    fields = dict(
        model=args.model,
        dataset=args.data or SAMPLE_DATA_DEFAULT,
        batch_size=args.batch_size,
        steps=args.steps,
        epochs=args.epochs,
        learning_rate=args.lr,
        optimizer=args.optimizer,
        precision=args.precision,
        xla=args.xla,
        steps_per_call=args.steps_per_call,
        seed=args.seed,
        tpu_timeout_s=args.tpu_timeout,
        allow_network_workers=args.allow_network_workers,
        trust=args.trust,
        vocab=args.vocab,
        backend=args.backend,
    )
    fields.update(overrides)
    config = RunConfig(**fields)  # every setting checked before a child is started for the file
    if not is_model_file(config.model):
        return config
    return checked_model_file(config, data_given=args.data is not None)


def checked_model_file(config: RunConfig, data_given: bool = True) -> RunConfig:
    """`config` with the data its model file resolves to and the file's sha256, after a child has opened both.

    Says on stderr what the file is (inputs, outputs, parameters, losses, data)
    and its memory estimate. `data_given` False lets the file pick its data
    (its build_dataset when a .py has one, else synthetic).
    """
    from core.workloads.model_probe import describe_model_file

    described = describe_model_file(
        config.model, config.trust, vocab=config.vocab, data=config.dataset if data_given else None, batch_size=config.batch_size
    )
    print(describe_line(described, config), file=sys.stderr)
    return config.with_changes(dataset=described["data"], model_sha256=described["sha256"])


def describe_line(described: dict[str, Any], config: RunConfig) -> str:
    """One line on a model file: name, inputs, outputs, parameters, losses, data and the memory estimate."""
    inputs = ", ".join(f"{i['name']} {i['dtype']} {_shape(i['shape'])}" for i in described["inputs"])
    losses = ", ".join(f"{loss['output']}: {loss['loss']}" for loss in described["losses"])
    estimate = estimate_from_description(described, config.optimizer, config.precision)
    memory = (
        f"{format_bytes(estimate.total_bytes)} before activations (weights {format_bytes(estimate.weight_bytes)}, "
        f"gradients {format_bytes(estimate.gradient_bytes)}, optimizer state {format_bytes(estimate.optimizer_bytes)})"
    )
    return (
        f"model file {model_title(config.model)}: inputs {inputs}; {len(described['outputs'])} output(s); "
        f"{described['params']:,} parameters; loss {losses}; data {model_title(described['data'])}; memory {memory}"
    )


def _shape(shape: list[int | None]) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"
