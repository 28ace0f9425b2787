"""The command line: the subcommands and their options."""

from __future__ import annotations

import argparse

from core.cli import history_commands, machine_commands, sweep_commands, training_commands, tuning_commands
from core.cli.job_options import add_job_arguments
from core.config import STRATEGIES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="main.py", description="Device Lab: how fast does this model train on each device I have?")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    devices = sub.add_parser("devices", help="list CPUs, GPUs and TPUs with memory details")
    devices.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    devices.add_argument("--logical-cpus", type=int, default=0, metavar="N", help="split the CPU into N logical devices first")
    devices.set_defaults(handler=machine_commands.cmd_devices)

    peaks = sub.add_parser("peaks", help="measured ceilings of each device: matmul FLOP/s per precision, memory bandwidth")
    peaks.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    peaks.add_argument("--remeasure", action="store_true", help="measure again even when this machine's ceilings are cached")
    peaks.set_defaults(handler=machine_commands.cmd_peaks)

    models = sub.add_parser("models", help="list the sample models")
    models.add_argument("--json", action="store_true")
    models.set_defaults(handler=machine_commands.cmd_models)

    run = sub.add_parser("run", help="train one model on one device or strategy")
    add_job_arguments(run)
    run.add_argument("--strategy", default="default", choices=STRATEGIES)
    run.add_argument("--devices", default="", metavar="CPU:0,CPU:1", help="comma-separated TF device names")
    run.add_argument("--workers", type=int, default=2, help="processes for --strategy multi-worker")
    run.add_argument("--cluster", default="", metavar="H:P,H:P", help="multi-worker across hosts: this host is the first")
    run.add_argument("--tpu", default="", metavar="ADDRESS", help="TPU name, grpc://host:port or 'local'")
    run.add_argument("--tensorboard", default="", metavar="DIR", help="write TensorBoard event files under DIR")
    run.add_argument("--profile", default="", metavar="A-B", help="capture a TF profiler trace of steps A to B")
    run.add_argument("--no-verdict", action="store_true", help="skip the diagnosis after the run (its probe runs take a few seconds)")
    run.set_defaults(handler=training_commands.cmd_run)

    compare = sub.add_parser("compare", help="run the same job on several targets and compare")
    add_job_arguments(compare)
    compare.add_argument("--targets", required=True, metavar="T1;T2", help='e.g. "CPU:0;mirrored:CPU:0,CPU:1"')
    compare.add_argument("--baseline", type=int, default=0, metavar="I", help="row whose samples/s is speed-up 1.0")
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
