"""Headless subcommands: `python main.py devices | models | run | compare | history | export | worker`.

Progress goes to stderr, results to stdout (`--json` for one JSON document).
Exit codes: 0 completed, 1 failed or stopped run, 2 invalid input (the message
on stderr says which field, what was given and what is allowed).
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from core.config import OPTIMIZERS, PRECISIONS, STRATEGIES, ConfigError, RunConfig
from core.formatting import NA
from core.results import FIGURES, Figure, RunResult, RunStatus, StepRecord

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run one subcommand; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "worker":
        from core.cluster.worker import main as worker_main

        return worker_main(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    from core.logs import setup_logging

    setup_logging(verbose=getattr(args, "verbose", False))
    try:
        return args.handler(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="main.py", description="Device Lab: how fast does this model train on each device I have?")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    devices = sub.add_parser("devices", help="list CPUs, GPUs and TPUs with memory details")
    devices.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    devices.add_argument("--logical-cpus", type=int, default=0, metavar="N", help="split the CPU into N logical devices first")
    devices.set_defaults(handler=_cmd_devices)

    models = sub.add_parser("models", help="list the sample models")
    models.add_argument("--json", action="store_true")
    models.set_defaults(handler=_cmd_models)

    run = sub.add_parser("run", help="train one model on one device or strategy")
    _add_job_arguments(run)
    run.add_argument("--strategy", default="default", choices=STRATEGIES)
    run.add_argument("--devices", default="", metavar="CPU:0,CPU:1", help="comma-separated TF device names")
    run.add_argument("--workers", type=int, default=2, help="processes for --strategy multi-worker")
    run.add_argument("--cluster", default="", metavar="H:P,H:P", help="multi-worker across hosts: this host is the first")
    run.add_argument("--tpu", default="", metavar="ADDRESS", help="TPU name, grpc://host:port or 'local'")
    run.add_argument("--tensorboard", default="", metavar="DIR", help="write TensorBoard event files under DIR")
    run.add_argument("--profile", default="", metavar="A-B", help="capture a TF profiler trace of steps A to B")
    run.set_defaults(handler=_cmd_run)

    compare = sub.add_parser("compare", help="run the same job on several targets and compare")
    _add_job_arguments(compare)
    compare.add_argument("--targets", required=True, metavar="T1;T2", help='e.g. "CPU:0;mirrored:CPU:0,CPU:1"')
    compare.add_argument("--baseline", type=int, default=0, metavar="I", help="row whose samples/s is speed-up 1.0")
    compare.set_defaults(handler=_cmd_compare)

    history = sub.add_parser("history", help="list stored runs")
    history.add_argument("--json", action="store_true")
    history.set_defaults(handler=_cmd_history)

    export = sub.add_parser("export", help="export stored runs to CSV or JSON")
    export.add_argument("run_ids", nargs="+", type=int, metavar="RUN_ID")
    target = export.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", metavar="FILE")
    target.add_argument("--json", metavar="FILE")
    export.set_defaults(handler=_cmd_export)
    return parser


def _add_job_arguments(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument("--no-save", action="store_true", help="do not record the run in the history")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--verbose", action="store_true", help="show TensorFlow's own log on stderr")


def _job_config(args: argparse.Namespace, **overrides: Any) -> RunConfig:
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
    )
    fields.update(overrides)
    return RunConfig(**fields)


def _configure(logical_cpus: int, verbose: bool = False) -> None:
    """Import TF (its C++ start-up chatter to the log file unless --verbose) and split the CPU if asked."""
    from core.logs import import_tensorflow_quietly
    from core.machine.runtime import RuntimeSettings, configure_runtime

    if not verbose:
        import_tensorflow_quietly()

    for warning in configure_runtime(RuntimeSettings(logical_cpus=logical_cpus)):
        print(f"warning: {warning}", file=sys.stderr)


def _cmd_devices(args: argparse.Namespace) -> int:
    _configure(args.logical_cpus, getattr(args, "verbose", False))
    from core.formatting import format_bytes
    from core.machine.inspect import device_table_rows, inspect_devices

    report = inspect_devices()
    rows = device_table_rows(report)
    if args.json:
        print(json.dumps({"devices": rows, "notes": list(report.notes)}, indent=2))
        return EXIT_OK
    table = [
        [row["kind"], row["tf_name"] or "-", row["name"], *(format_bytes(row[k]) for k in ("memory_total", "memory_used", "memory_free"))]
        for row in rows
    ]
    print(format_columns(["kind", "TF name", "name", "memory total", "used", "free"], table))
    for row in rows:
        print(f"\n{row['kind']} {row['tf_name'] or ''} {row['name']}")
        for label, value in row["details"].items():
            print(f"  {label}: {value}")
        if row["reason"]:
            print(f"  Unavailable: {row['reason']}")
    for note in report.notes:
        print(f"\nnote: {note}")
    return EXIT_OK


def _cmd_models(args: argparse.Namespace) -> int:
    from core.workloads.models import describe_models

    rows = describe_models()
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    table = [[r["name"], r["title"], "x".join(map(str, r["input_shape"])), f"{r['params']:,}", r["default_dataset"]] for r in rows]
    print(format_columns(["name", "model", "input", "params", "default data"], table))
    for r in rows:
        print(f"  {r['name']}: {r['description']}")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    devices = tuple(d for d in args.devices.split(",") if d.strip())
    hosts = tuple(h for h in args.cluster.split(",") if h.strip())
    config = _job_config(
        args,
        strategy=args.strategy,
        devices=devices,
        workers=len(hosts) if hosts else args.workers,
        cluster_hosts=hosts,
        tpu_address=args.tpu,
    )
    if config.strategy == "multi-worker":
        _announce_cluster(config)
    profile = _parse_step_range(args.profile) if args.profile else None
    _configure(args.logical_cpus, getattr(args, "verbose", False))
    from core.hooks.profiler import run_callbacks_for
    from core.runner import run_training
    from core.training.engine import check_against_machine, total_steps

    check_against_machine(config)
    callbacks = run_callbacks_for(config, args.tensorboard or None, profile)
    progress = ProgressPrinter(total_steps(config), config.batch_size)
    with stop_on_interrupt() as stop_event:
        result = run_training(config, progress, stop_event, callbacks)
    progress.finish()
    _save(result, args.no_save)
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


def _cmd_compare(args: argparse.Namespace) -> int:
    from core.compare.runner import progress_line, run_comparison
    from core.compare.table import format_table
    from core.compare.targets import parse_targets

    targets = parse_targets(args.targets)
    if not 0 <= args.baseline < len(targets):
        raise ConfigError("baseline", args.baseline, f"a row index from 0 to {len(targets) - 1}")
    base = _job_config(args)
    _configure(args.logical_cpus, getattr(args, "verbose", False))

    def announce(index: int, total: int, label: str) -> None:
        print(progress_line(index, total, label), file=sys.stderr)

    with stop_on_interrupt() as stop_event:
        comparison = run_comparison(
            base,
            targets,
            baseline_index=args.baseline,
            on_progress=announce,
            stop_event=stop_event,
            on_result=lambda _index, result: _save(result, args.no_save),
        )
    if args.json:
        print(json.dumps(comparison.to_rows_dict(), indent=2))
    else:
        print(format_table(comparison))
        for warning in comparison.warnings:
            print(f"warning: {warning}")
    return EXIT_OK if all(row.status == RunStatus.COMPLETED for row in comparison.rows) else EXIT_RUN_FAILED


def _cmd_history(args: argparse.Namespace) -> int:
    runs = _history().list_runs()
    if args.json:
        print(json.dumps([r.to_dict() for r in runs], indent=2))
        return EXIT_OK
    headers = ["id", "started", "status", "model", "strategy", "devices", "steps", *(f.title for f in FIGURES)]
    table = [
        [
            r.id,
            r.started_at,
            r.status,
            r.model,
            r.strategy,
            ",".join(r.devices) or "-",
            r.steps,
            *(f.format(r.figures[f.name], NA) for f in FIGURES),
        ]
        for r in runs
    ]
    print(format_columns(headers, table))
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    store = _history()
    known = {r.id for r in store.list_runs()}
    missing = [i for i in args.run_ids if i not in known]
    if missing:
        raise ConfigError("RUN_ID", missing, "ids listed by `main.py history`")
    if args.csv:
        store.export_csv(args.run_ids, args.csv)
    else:
        store.export_json(args.run_ids, args.json)
    print(f"exported {len(args.run_ids)} run(s) to {args.csv or args.json}", file=sys.stderr)
    return EXIT_OK


def _save(result: RunResult, skip: bool) -> None:
    if skip:
        return
    run_id = _history().save(result)
    print(f"saved as run {run_id} in the history", file=sys.stderr)


@functools.cache
def _history():
    """The run history, opened once per command (a comparison saves several runs)."""
    from core.history.store import RunStore

    store = RunStore.open()
    if store.notice:
        print(f"warning: {store.notice}", file=sys.stderr)
    return store


def _parse_step_range(text: str) -> tuple[int, int]:
    from core.hooks.profiler import PROFILE_FIELD, check_profile_steps

    first, _, last = text.partition("-")
    if not (first.strip().isdigit() and last.strip().isdigit()):
        raise ConfigError(PROFILE_FIELD, text, "a step range such as 10-20")
    check_profile_steps(int(first), int(last))
    return int(first), int(last)


class ProgressPrinter:
    """An `on_steps` callback printing one progress line to stderr at most twice a second."""

    def __init__(self, total_steps: int, batch_size: int, stream=None, interval_s: float = 0.5):
        self.total_steps = total_steps
        self.batch_size = batch_size
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self._last_print = 0.0
        self._last: StepRecord | None = None

    def __call__(self, records: Sequence[StepRecord]) -> None:
        self._last = records[-1]
        now = time.monotonic()
        if now - self._last_print >= self.interval_s or self._last.step == self.total_steps:
            self._last_print = now
            self._print()

    def _print(self) -> None:
        r = self._last
        rate = self.batch_size / r.step_time_s if r.step_time_s > 0 else 0.0
        tag = " (warm-up)" if r.warmup else ""
        self.stream.write(
            f"\rstep {r.step}/{self.total_steps}  loss {r.loss:.4f}  {r.step_time_s * 1e3:.2f} ms/step  {rate:,.0f} samples/s{tag}   "
        )
        self.stream.flush()

    def finish(self) -> None:
        if self._last is not None:
            self.stream.write("\n")


class stop_on_interrupt:
    """Context manager: the first Ctrl-C sets a stop event (the run ends cleanly), the second aborts."""

    def __enter__(self) -> threading.Event:
        self.event = threading.Event()
        self._previous: Callable | int | None = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self.event

    def _handle(self, _signum, _frame) -> None:
        if self.event.is_set():
            raise KeyboardInterrupt
        self.event.set()
        print("\nstopping after the current step call (Ctrl-C again to abort)", file=sys.stderr)

    def __exit__(self, *exc_info) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def format_result(result: RunResult) -> str:
    """The result as aligned 'name: value' lines."""
    s = result.summary()
    lines = [
        ("status", s["status"]),
        ("model", s["model"]),
        ("data", s["dataset"]),
        ("strategy", s["strategy"]),
        ("devices", ", ".join(result.environment.get("devices", [])) or "-"),
        ("replicas", s["replicas"]),
        ("steps", s["steps"]),
        *((f.title.lower(), _figure_text(f, s)) for f in FIGURES),
    ]
    lines += [("warning", w) for w in s["warnings"]]
    width = max(len(name) for name, _ in lines)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in lines)


def format_columns(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain left-aligned text table."""
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def _figure_text(figure: Figure, summary: dict[str, Any]) -> str:
    """A figure's value for `format_result`, with what it needs to be read right (warm-up steps, memory source)."""
    value = summary[figure.name]
    text = figure.format(value, NA)
    note = {
        "warmup_s": f"{summary['warmup_steps']} steps: tracing and compilation",
        "peak_memory_bytes": summary["peak_memory_source"],
    }.get(figure.name)
    return f"{text} ({note})" if value is not None and note else text
