"""`run` and `compare`: train in this process (or its workers) with progress on stderr."""

from __future__ import annotations

import argparse
import json
import sys

from core.cli.exits import EXIT_OK, EXIT_RUN_FAILED
from core.cli.history_commands import save
from core.cli.job_options import job_config
from core.cli.machine_commands import configure_tensorflow
from core.cli.output import ProgressPrinter, format_result
from core.cli.signals import stop_on_interrupt
from core.config import ConfigError, RunConfig
from core.results import RunStatus


def cmd_run(args: argparse.Namespace) -> int:
    devices = tuple(d for d in args.devices.split(",") if d.strip())
    hosts = tuple(h for h in args.cluster.split(",") if h.strip())
    config = job_config(
        args,
        strategy=args.strategy,
        devices=devices,
        workers=len(hosts) if hosts else args.workers,
        cluster_hosts=hosts,
        tpu_address=args.tpu,
    )
    if config.strategy == "multi-worker":
        _announce_cluster(config)
    profile = parse_step_range(args.profile) if args.profile else None
    configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False))
    from core.hooks.profiler import run_callbacks_for
    from core.runner import run_training
    from core.training.engine import check_against_machine, total_steps

    check_against_machine(config)
    callbacks = run_callbacks_for(config, args.tensorboard or None, profile)
    progress = ProgressPrinter(total_steps(config), config.batch_size)
    with stop_on_interrupt() as stop_event:
        result = run_training(config, progress, stop_event, callbacks)
    progress.finish()
    save(result, args.no_save)
    if args.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print(format_result(result))
    if result.status != RunStatus.COMPLETED:
        print(f"{result.status}: {result.message}", file=sys.stderr)
    return EXIT_OK if result.status == RunStatus.COMPLETED else EXIT_RUN_FAILED


def _announce_cluster(config: RunConfig) -> None:
    from core.cluster.topology import GRPC_WARNING, worker_commands

    print(f"warning: {GRPC_WARNING}", file=sys.stderr)
    commands = worker_commands(config)
    if commands:
        print("Start one worker on each other host:", file=sys.stderr)
        for command in commands:
            print(f"  {command}", file=sys.stderr)


def cmd_compare(args: argparse.Namespace) -> int:
    from core.compare.runner import progress_line, run_comparison
    from core.compare.table import format_table
    from core.compare.targets import parse_targets

    targets = parse_targets(args.targets)
    if not 0 <= args.baseline < len(targets):
        raise ConfigError("baseline", args.baseline, f"a row index from 0 to {len(targets) - 1}")
    base = job_config(args)
    configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False))

    def announce(index: int, total: int, label: str) -> None:
        print(progress_line(index, total, label), file=sys.stderr)

    with stop_on_interrupt() as stop_event:
        comparison = run_comparison(
            base,
            targets,
            baseline_index=args.baseline,
            on_progress=announce,
            stop_event=stop_event,
            on_result=lambda _index, result: save(result, args.no_save),
        )
    if args.json:
        print(json.dumps(comparison.to_rows_dict(), indent=2))
    else:
        print(format_table(comparison))
        for warning in comparison.warnings:
            print(f"warning: {warning}")
    return EXIT_OK if all(row.status == RunStatus.COMPLETED for row in comparison.rows) else EXIT_RUN_FAILED


def parse_step_range(text: str) -> tuple[int, int]:
    from core.hooks.profiler import PROFILE_FIELD, check_profile_steps

    first, _, last = text.partition("-")
    if not (first.strip().isdigit() and last.strip().isdigit()):
        raise ConfigError(PROFILE_FIELD, text, "a step range such as 10-20")
    check_profile_steps(int(first), int(last))
    return int(first), int(last)
