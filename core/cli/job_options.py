"""The options every training command shares (`run`, `compare`), and the RunConfig they make."""

from __future__ import annotations

import argparse
from typing import Any

from core.config import OPTIMIZERS, PRECISIONS, RunConfig


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="sample model name (see `main.py models`)")
    parser.add_argument("--data", default="synthetic", help="synthetic, digits, mnist, fashion_mnist, cifar10, imdb")
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
    fields = dict(
        model=args.model,
        dataset=args.data,
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
    )
    fields.update(overrides)
    return RunConfig(**fields)
