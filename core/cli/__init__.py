"""Headless subcommands: `python main.py devices | models | run | compare | history | export | worker`.

Progress goes to stderr, results to stdout (`--json` for one JSON document).
Exit codes: 0 completed, 1 failed or stopped run, 2 invalid input (the message
on stderr says which field, what was given and what is allowed, why the
history cannot be used, or which model or data file cannot be used and why).
Ctrl-C, SIGTERM and SIGHUP stop a run after the call in flight
(`core.cli.signals`); elsewhere Ctrl-C ends the command without a traceback.
The parser is built here: every subcommand listed, the options of the one named
(`build_parser`); each command's module adds its own.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from core.cli.exits import EXIT_BAD_INPUT, EXIT_RUN_FAILED
from core.cli.job_options import (
    add_job_arguments,
    add_logical_cpus_argument,
    add_rounds_argument,
    add_target_loss_argument,
    add_training_arguments,
)
from core.config import STRATEGIES, ConfigError
from core.files import os_error_words
from core.history.database import StoreError
from core.tensorflow_import import TensorFlowMissing
from core.workloads.model_file import ModelFileError


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run one subcommand; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "worker":
        from core.cluster.worker import main as worker_main

        return worker_main(argv[1:])
    args = parse_arguments(argv)
    from core.logs import setup_logging

    setup_logging(verbose=getattr(args, "verbose", False))
    try:
        return args.handler(args)
    except (ConfigError, StoreError, ModelFileError, TensorFlowMissing) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_RUN_FAILED
    except BrokenPipeError:  # `main.py history | head`: the reader left; no traceback, and none at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_RUN_FAILED
    except OSError as exc:  # a path a file system refuses as too long, wherever it was met: one line, not a traceback
        if exc.errno != errno.ENAMETOOLONG:
            raise
        print(f"error: {exc.filename}: {os_error_words(exc)}. Give a shorter path (or a shorter DEVICE_LAB_DATA_DIR).", file=sys.stderr)
        return EXIT_BAD_INPUT


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (the option, what was given, the rule) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see `{self.prog} --help`)\n")


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The subcommand and its options from `argv`; a bad option exits with code 2 and one line."""
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
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


def _run_arguments(run: argparse.ArgumentParser) -> None:
    """`run`: the shared job and training options, the strategy and devices, hooks, the verdict."""
    from core.cli import training_commands

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


def _devices_arguments(devices: argparse.ArgumentParser) -> None:
    from core.cli import machine_commands

    devices.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    add_logical_cpus_argument(devices)
    devices.set_defaults(handler=machine_commands.cmd_devices)


def _peaks_arguments(peaks: argparse.ArgumentParser) -> None:
    from core.cli import machine_commands

    peaks.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    peaks.add_argument("--remeasure", action="store_true", help="measure again even when this machine's ceilings are cached")
    peaks.set_defaults(handler=machine_commands.cmd_peaks)


def _models_arguments(models: argparse.ArgumentParser) -> None:
    from core.cli import machine_commands

    models.add_argument("--json", action="store_true")
    models.set_defaults(handler=machine_commands.cmd_models)


def _compare_arguments(compare: argparse.ArgumentParser) -> None:
    from core.cli import training_commands

    add_job_arguments(compare)
    add_training_arguments(compare)
    compare.add_argument("--targets", required=True, metavar="T1;T2", help='e.g. "CPU:0;mirrored:CPU:0,CPU:1"')
    compare.add_argument("--baseline", type=int, default=0, metavar="I", help="row whose samples/s is speed-up 1.0")
    add_rounds_argument(compare)
    add_target_loss_argument(compare)
    compare.set_defaults(handler=training_commands.cmd_compare)


def _sweep_arguments(sweep: argparse.ArgumentParser) -> None:
    from core.cli import sweep_commands

    sweep_commands.add_sweep_arguments(sweep)
    sweep.set_defaults(handler=sweep_commands.cmd_sweep)


def _max_batch_arguments(max_batch: argparse.ArgumentParser) -> None:
    from core.cli import tuning_commands

    tuning_commands.add_max_batch_arguments(max_batch)
    max_batch.set_defaults(handler=tuning_commands.cmd_max_batch)


def _autotune_arguments(autotune: argparse.ArgumentParser) -> None:
    from core.cli import tuning_commands

    tuning_commands.add_autotune_arguments(autotune)
    autotune.set_defaults(handler=tuning_commands.cmd_autotune)


def _history_arguments(history: argparse.ArgumentParser) -> None:
    from core.cli import history_commands

    history.add_argument("--json", action="store_true")
    history.set_defaults(handler=history_commands.cmd_history)


def _export_arguments(export: argparse.ArgumentParser) -> None:
    from core.cli import history_commands

    export.add_argument("run_ids", nargs="+", type=int, metavar="RUN_ID")
    target = export.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", metavar="FILE")
    target.add_argument("--json", metavar="FILE")
    export.set_defaults(handler=history_commands.cmd_export)


def _project_arguments(project: argparse.ArgumentParser) -> None:
    from core.cli import projection_commands

    projection_commands.add_project_arguments(project)
    project.set_defaults(handler=projection_commands.cmd_project)


COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "devices": ("list CPUs, GPUs and TPUs with memory details", _devices_arguments),
    "peaks": ("measured ceilings of each device: matmul FLOP/s per precision, memory bandwidth", _peaks_arguments),
    "models": ("list the sample models", _models_arguments),
    "run": ("train one model on one device or strategy", _run_arguments),
    "compare": ("run the same job on several targets and compare", _compare_arguments),
    "sweep": ("vary one or two settings (batch, steps per call, precision, XLA) on one target", _sweep_arguments),
    "max-batch": ("the largest batch that fits in memory (each probe in a child process)", _max_batch_arguments),
    "autotune": ("find the fastest steps per call, precision and XLA (and batch) within a time budget", _autotune_arguments),
    "history": ("list stored runs", _history_arguments),
    "export": ("export stored runs to CSV or JSON", _export_arguments),
    "project": ("a model's speed projected on a GPU or TPU from the catalogue (a projection, not a measurement)", _project_arguments),
}
"""Each subcommand: its one-line help, and what adds its options and handler (its module imported then)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand listed; the options of `command` only, or of all when None.

    A command line names one subcommand, so only its options are built and only its module is
    imported (as pip loads only the command it runs); `--help` still lists them all.
    """
    parser = OneLineParser(prog="main.py", description="Device Lab: how fast does this model train on each device I have?")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments) in COMMANDS.items():
        subparser = sub.add_parser(name, help=help_text)
        if command is None or name == command:
            add_arguments(subparser)
    return parser
