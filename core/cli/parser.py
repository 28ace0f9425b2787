"""The command line: the subcommands and their options."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from core.cli import history_commands, machine_commands, sweep_commands, training_commands, tuning_commands
from core.cli.exits import EXIT_BAD_INPUT
from core.cli.job_options import (
    add_job_arguments,
    add_logical_cpus_argument,
    add_rounds_argument,
    add_target_loss_argument,
    add_training_arguments,
)
from core.config import STRATEGIES


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (the option, what was given, the rule) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see `{self.prog} --help`)\n")


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The subcommand and its options from `argv`; a bad option exits with code 2 and one line."""
    parser = build_parser()
    return parser.parse_args(joined_values(list(argv), value_options(parser)))


def joined_values(argv: list[str], options: set[str]) -> list[str]:
    """'--memory-limit -1GiB' -> '--memory-limit=-1GiB': a value starting with '-' reaches its option's own check.

    argparse would take '-4,8' or '-1GiB' for an option and answer "expected one argument".
    """
    joined: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if token in options and following.startswith("-") and not following.startswith("--") and following != "-h":
            joined.append(f"{token}={following}")
            index += 2
        else:
            joined.append(token)
            index += 1
    return joined


def value_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string, in `parser` and its subcommands, that takes a value."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= value_options(sub)
        elif action.option_strings and action.nargs != 0:
            found.update(action.option_strings)
    return found


def add_run_arguments(run: argparse.ArgumentParser) -> None:
    """The `run` subcommand: the shared job and training options, the strategy and devices, hooks, the verdict."""
    add_job_arguments(run)
    add_training_arguments(run)
    run.add_argument("--strategy", default="default", choices=STRATEGIES)
    run.add_argument("--devices", default="", metavar="CPU:0,CPU:1", help="comma-separated TF device names")
    run.add_argument("--workers", type=int, default=2, help="processes for --strategy multi-worker")
    run.add_argument("--cluster", default="", metavar="H:P,H:P", help="multi-worker across hosts: this host is the first")
    run.add_argument("--tpu", default="", metavar="ADDRESS", help="TPU name, grpc://host:port or 'local'")
    run.add_argument("--tensorboard", default="", metavar="DIR", help="write TensorBoard event files under DIR")
    run.add_argument("--profile", default="", metavar="A-B", help="capture a TF profiler trace of steps A to B")
    run.add_argument("--no-verdict", action="store_true", help="skip the diagnosis after the run (its probe runs take a few seconds)")
    add_target_loss_argument(run)
    run.set_defaults(handler=training_commands.cmd_run)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="main.py", description="Device Lab: how fast does this model train on each device I have?")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    devices = sub.add_parser("devices", help="list CPUs, GPUs and TPUs with memory details")
    devices.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    add_logical_cpus_argument(devices)
    devices.set_defaults(handler=machine_commands.cmd_devices)

    peaks = sub.add_parser("peaks", help="measured ceilings of each device: matmul FLOP/s per precision, memory bandwidth")
    peaks.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    peaks.add_argument("--remeasure", action="store_true", help="measure again even when this machine's ceilings are cached")
    peaks.set_defaults(handler=machine_commands.cmd_peaks)

    models = sub.add_parser("models", help="list the sample models")
    models.add_argument("--json", action="store_true")
    models.set_defaults(handler=machine_commands.cmd_models)

    add_run_arguments(sub.add_parser("run", help="train one model on one device or strategy"))

    compare = sub.add_parser("compare", help="run the same job on several targets and compare")
    add_job_arguments(compare)
    add_training_arguments(compare)
    compare.add_argument("--targets", required=True, metavar="T1;T2", help='e.g. "CPU:0;mirrored:CPU:0,CPU:1"')
    compare.add_argument("--baseline", type=int, default=0, metavar="I", help="row whose samples/s is speed-up 1.0")
    add_rounds_argument(compare)
    add_target_loss_argument(compare)
    compare.set_defaults(handler=training_commands.cmd_compare)

    sweep = sub.add_parser("sweep", help="vary one or two settings (batch, steps per call, precision, XLA) on one target")
    sweep_commands.add_sweep_arguments(sweep)
    sweep.set_defaults(handler=sweep_commands.cmd_sweep)

    max_batch = sub.add_parser("max-batch", help="the largest batch that fits in memory (each probe in a child process)")
    tuning_commands.add_max_batch_arguments(max_batch)
    max_batch.set_defaults(handler=tuning_commands.cmd_max_batch)

    autotune = sub.add_parser("autotune", help="find the fastest steps per call, precision and XLA (and batch) within a time budget")
    tuning_commands.add_autotune_arguments(autotune)
    autotune.set_defaults(handler=tuning_commands.cmd_autotune)

    history = sub.add_parser("history", help="list stored runs")
    history.add_argument("--json", action="store_true")
    history.set_defaults(handler=history_commands.cmd_history)

    export = sub.add_parser("export", help="export stored runs to CSV or JSON")
    export.add_argument("run_ids", nargs="+", type=int, metavar="RUN_ID")
    target = export.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", metavar="FILE")
    target.add_argument("--json", metavar="FILE")
    export.set_defaults(handler=history_commands.cmd_export)
    return parser
