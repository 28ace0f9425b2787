"""`sweep`: one job on one target with one or two settings varied, one normal run per point.

`--batch-sizes`, `--steps-per-call`, `--precision` and `--xla` each take one
value (fixed for every point) or several (an axis); one or two of them must
vary. Input is checked before TensorFlow loads. Every point is recorded in the
history under one group, progress goes to stderr, and the result (a table, or
one JSON object with `rows` and `best`) to stdout. Exit 0 when the sweep ran,
failed points included; 1 when it was stopped; 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.cli.exits import EXIT_OK, EXIT_RUN_FAILED
from core.cli.history_commands import CliHistory, open_history
from core.cli.machine_commands import configure_tensorflow
from core.cli.output import ProgressPrinter, format_columns, stdout_to_stderr
from core.cli.signals import run_interruptibly, stop_on_signals
from core.compare.targets import parse_target_option
from core.config import OPTIMIZERS, RunConfig
from core.formatting import NA, format_bytes, format_value
from core.history.database import StoreError
from core.results import StepRecord
from core.tuning.sweep import Sweep, run_sweep
from core.tuning.sweep_plan import AXES, AXIS_TITLES, SweepPlan, format_setting, next_sweep_group, parse_values, plan_sweep, varied_settings

if TYPE_CHECKING:
    from core.history.recorder import HistoryRecorder

AXIS_OPTIONS = {
    "batch_size": "--batch-sizes",
    "steps_per_call": "--steps-per-call",
    "precision": "--precision",
    "xla": "--xla",
    "backend": "--backends",
}
AXIS_DEFAULTS = {"batch_size": "64", "steps_per_call": "1", "precision": "off", "xla": "off", "backend": "tensorflow"}
AXIS_HELP = {
    "batch_size": "global batch sizes, e.g. 16,32,64 (the first is the batch --lr is set for)",
    "steps_per_call": "steps per tf.function call, e.g. 1,4,16,64",
    "precision": "off (float32), bfloat16, float16, e.g. off,bfloat16",
    "xla": "off, on, or off,on",
    "backend": "Keras backends, e.g. tensorflow,jax (--backend is the same option; jax and torch train in a child process)",
}


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """The `sweep` subcommand's options."""
    parser.add_argument("--model", required=True, help="sample model name (see `main.py models`) or a model file")
    parser.add_argument(
        "--data", default="synthetic", help="synthetic, digits, mnist, fashion_mnist, cifar10, imdb (or, for a file, an .npz)"
    )
    parser.add_argument("--target", default="default", metavar="T", help="where every point runs: CPU:0, GPU:0, mirrored:GPU:0,GPU:1, ...")
    for name, option in AXIS_OPTIONS.items():
        parser.add_argument(
            *([option, "--backend"] if name == "backend" else [option]),
            dest=name,
            default=AXIS_DEFAULTS[name],
            metavar="V1,V2",
            help=AXIS_HELP[name] + f" (default {AXIS_DEFAULTS[name]})",
        )
    parser.add_argument(
        "--all-precisions", action="store_true", help="also run precisions left out as slow on this target (float16 on a CPU, ...)"
    )
    parser.add_argument("--steps", type=int, default=100, help="steps of every point (the first call is warm-up, reported apart)")
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate of every point")
    parser.add_argument("--optimizer", default="adam", choices=OPTIMIZERS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trust", action="store_true", help="let a model file run its own code")
    parser.add_argument("--logical-cpus", type=int, default=0, metavar="N", help="split the CPU into N logical devices")
    parser.add_argument("--no-save", action="store_true", help="do not record the points in the history")
    parser.add_argument("--json", action="store_true", help="one JSON object with rows and best on stdout")
    parser.add_argument("--verbose", action="store_true", help="show TensorFlow's own log on stderr")


def sweep_values(args: argparse.Namespace) -> dict[str, tuple[Any, ...]]:
    """Each setting's values from its option; ConfigError names the option and the allowed form."""
    return {name: parse_values(name, getattr(args, name), option) for name, option in AXIS_OPTIONS.items()}


def base_config(args: argparse.Namespace, values: dict[str, tuple[Any, ...]]) -> RunConfig:
    """The job every point shares, on the target: each setting at its first value."""
    target = parse_target_option(args.target, "--target")
    job = RunConfig(
        model=args.model,
        dataset=args.data,
        steps=args.steps,
        learning_rate=args.lr,
        optimizer=args.optimizer,
        seed=args.seed,
        trust=args.trust,
        **{name: values[name][0] for name in AXES},
    )
    return target.config_for(job)


def cmd_sweep(args: argparse.Namespace) -> int:
    values = sweep_values(args)
    varied_settings(values, AXIS_OPTIONS)
    base = base_config(args, values)
    with stop_on_signals() as stop_event:
        configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False))
        from core.training.engine import check_against_machine

        check_against_machine(base)
        plan = plan_sweep(base, values, keep_slow=args.all_precisions)
        if stop_event.is_set():
            print("stopped before the sweep started; nothing was recorded", file=sys.stderr)
            return EXIT_RUN_FAILED
        say(f"sweep: {plan.describe()}")
        for item in plan.left_out:
            say(f"left out {format_setting(item.axis, item.value)}: {item.reason} (--all-precisions runs it anyway)")
        recording = SweepRecording(CliHistory(args.no_save), plan)
        progress = SweepProgress(plan)
        with stdout_to_stderr():
            sweep = run_interruptibly(
                lambda: run_sweep(
                    plan, progress.announce, progress, stop_event, progress.row_done, recorders=recording.recorders(), group=recording.group
                )
            )
    recording.report()
    print(json.dumps(sweep.to_dict(), indent=2) if args.json else format_sweep(sweep))
    return EXIT_RUN_FAILED if sweep.stopped else EXIT_OK


class SweepProgress:
    """Progress on stderr: 'point 2 of 4: batch 32 · float32', then that point's step line."""

    def __init__(self, plan: SweepPlan):
        self._plan = plan
        self._printer: ProgressPrinter | None = None

    def announce(self, index: int, total: int, label: str) -> None:
        settings = self._plan.points()[index]
        batch = settings.get("batch_size", self._plan.base.batch_size)
        say(f"point {index + 1} of {total}: {label}")
        self._printer = ProgressPrinter(self._plan.base.steps, batch)

    def __call__(self, records: Sequence[StepRecord]) -> None:
        if self._printer is not None:
            self._printer(records)

    def row_done(self, index: int, row) -> None:
        if self._printer is not None:
            self._printer.finish()
            self._printer = None
        if row.result.message:
            say(f"  {row.status}: {row.result.message}")


class SweepRecording:
    """The sweep's points in the history, under one group; each reason it cannot record said once."""

    def __init__(self, history: CliHistory, plan: SweepPlan):
        self._history = history
        self._recorders: list[HistoryRecorder] = []
        self._store = None
        self.group = ""
        if history.skip:
            return
        try:
            self._store = open_history(for_recording=True)
            self.group = next_sweep_group(self._store.groups(), plan)
        except StoreError as exc:
            say(f"warning: the run history could not be opened: {exc} The sweep is not saved.")

    def recorders(self):
        """The factory `run_sweep` takes (None: nothing is recorded)."""
        return None if self._store is None else self._recorder

    def _recorder(self, config: RunConfig, label: str, group: str) -> HistoryRecorder:
        from core.history.recorder import HistoryRecorder

        recorder = HistoryRecorder(self._store, config, label, group)
        self._recorders.append(recorder)
        return recorder

    def report(self) -> None:
        for recorder in self._recorders:
            self._history.say_error(recorder)
        saved = [recorder.run_id for recorder in self._recorders if recorder.run_id is not None and not recorder.error]
        if saved:
            say(f"saved {len(saved)} run(s) in the history as group '{self.group}'")


def format_sweep(sweep: Sweep) -> str:
    """The rows as a plain table (the best marked), then what was left out and the learning-rate rule."""
    axes = [axis.name for axis in sweep.plan.axes]
    batch_swept = "batch_size" in axes
    headers = [*(AXIS_TITLES[name] for name in axes), "status", "samples/s", "median step (ms)", "final loss", "peak memory"]
    headers += ["suggested lr"] if batch_swept else []
    table = []
    for index, row in enumerate(sweep.rows):
        result = row.result
        cells = [format_setting(name, row.settings[name]) for name in axes]
        cells += [row.status.value + (" (best)" if index == sweep.best else "")]
        cells += [format_value(result.samples_per_s, "rate", NA), format_value(result.step_time_median_ms, "ms", NA)]
        cells += [format_value(result.final_loss, "loss", NA), format_bytes(result.peak_memory_bytes)]
        cells += [f"{row.suggested_learning_rate:.3g}"] if batch_swept else []
        table.append(cells)
    lines = [format_columns(headers, table)]
    lines += [f"{row.label}: {row.status}: {row.result.message}" for row in sweep.rows if row.result.message]
    lines += [f"left out {format_setting(item.axis, item.value)}: {item.reason}" for item in sweep.plan.left_out]
    lines += [sweep.lr_note()] if batch_swept else []
    return "\n".join(lines)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
