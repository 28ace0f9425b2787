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
from dataclasses import replace
from typing import Any

from core.cli.exits import EXIT_OK, EXIT_RUN_FAILED
from core.cli.job_options import (
    CliHistory,
    add_job_arguments,
    add_rounds_argument,
    add_target_loss_argument,
    check_energy_counter,
    configure_tensorflow,
    job_config,
)
from core.cli.output import ProgressPrinter, format_columns, stdout_to_stderr
from core.cli.signals import run_interruptibly, stop_on_signals
from core.compare.significance import contended_label
from core.compare.targets import parse_target_option
from core.config import ConfigError, RunConfig
from core.formatting import NA, format_bytes, format_value
from core.history.database import StoreError
from core.jobs.rounds import rounds_measured
from core.results import StepRecord
from core.training.to_target import target_how, to_target_text
from core.tuning.sweep import (
    BY_JOULES_TO_TARGET,
    OBJECTIVES,
    Sweep,
    SweepListener,
    SweepRow,
    energy_best,
    row_reach,
    run_sweep,
    target_decision,
    why_not_most_samples,
)
from core.tuning.sweep_plan import AXES, AXIS_TITLES, SweepPlan, format_setting, next_sweep_group, parse_values, plan_sweep, varied_settings

AXIS_OPTIONS = {
    "batch_size": "--batch-sizes",
    "steps_per_call": "--steps-per-call",
    "precision": "--precision",
    "xla": "--xla",
    "backend": "--backends",
}
AXIS_DEFAULTS = {"batch_size": "64", "steps_per_call": "1", "precision": "off", "xla": "off", "backend": "the --backend"}
AXIS_HELP = {
    "batch_size": "global batch sizes, e.g. 16,32,64 (each point's suggested learning rate scales --lr from --batch-size)",
    "steps_per_call": "steps per tf.function call, e.g. 1,4,16,64",
    "precision": "off (float32), bfloat16, float16, e.g. off,bfloat16",
    "xla": "off, on, or off,on",
    "backend": "Keras backends, e.g. tensorflow,jax (jax and torch train in a child process)",
}


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """The `sweep` subcommand's options: the shared job options, the target, each setting's values, steps."""
    add_job_arguments(parser)
    parser.add_argument("--target", default="default", metavar="T", help="where every point runs: CPU:0, GPU:0, mirrored:GPU:0,GPU:1, ...")
    for name, option in AXIS_OPTIONS.items():
        parser.add_argument(
            option,
            dest=_axis_dest(name),
            default=None if name == "backend" else AXIS_DEFAULTS[name],
            metavar="V1,V2",
            help=AXIS_HELP[name] + f" (default {AXIS_DEFAULTS[name]})",
        )
    parser.add_argument(
        "--batch-size",
        dest="base_batch_size",  # `batch_size` holds --batch-sizes' text
        type=int,
        default=RunConfig.batch_size,
        help="the batch --lr is set for, the window's Batch size: the linear rule's base for the points' learning rates "
        "(default %(default)s; the batch of every point when --batch-sizes gives one)",
    )
    parser.add_argument(
        "--all-precisions", action="store_true", help="also run precisions left out as slow on this target (float16 on a CPU, ...)"
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=RunConfig.steps,
        help="steps of every point (the first call is warm-up, reported apart; default %(default)s)",
    )
    parser.add_argument(
        "--objective",
        default="time",
        choices=OBJECTIVES,
        help="what the star goes to: time (default: the first to the target loss, or the most samples/s where that decides "
        "nothing); energy: the fewest measured joules to the target (or per sample), which needs an energy counter",
    )
    add_rounds_argument(parser)
    add_target_loss_argument(parser)


def sweep_values(args: argparse.Namespace) -> dict[str, tuple[Any, ...]]:
    """Each setting's values from its option; ConfigError names the option and the allowed form, or the value given twice."""
    values = {}
    for name, option in AXIS_OPTIONS.items():
        text = getattr(args, _axis_dest(name))
        if text is None:  # only the backend's may be unset: the job's --backend
            text = args.backend
        values[name] = parse_values(name, text, option)
        given = [parse_values(name, part, option)[0] for part in str(text).split(",")]
        repeated = [value for value in values[name] if given.count(value) > 1]
        if repeated:
            raise ConfigError(option, text, f"each value once ({format_setting(name, repeated[0])} is given more than once)")
    return values


def _axis_dest(name: str) -> str:
    """The attribute of a setting's values: its name, but "backends" for the backend (--backend is the job's one backend)."""
    return "backends" if name == "backend" else name


def base_config(args: argparse.Namespace, values: dict[str, tuple[Any, ...]]) -> RunConfig:
    """The job every point shares, on the target: each setting at its first value, but a swept batch at --batch-size (the
    batch --lr is set for, as the window's form gives it), a model file checked in a child first."""
    target = parse_target_option(args.target, "--target")
    firsts = {name: values[name][0] for name in AXES}
    if len(values["batch_size"]) > 1:
        firsts["batch_size"] = args.base_batch_size
    return job_config(args, target, **firsts)


def cmd_sweep(args: argparse.Namespace) -> int:
    values = sweep_values(args)
    varied_settings(values, AXIS_OPTIONS)
    base = base_config(args, values)
    if args.objective == "energy":
        check_energy_counter(base)
    with stop_on_signals() as stop_event:
        configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False), [base])
        from core.training.engine import check_against_machine

        check_against_machine(base)
        plan = plan_sweep(base, values, keep_slow=args.all_precisions)
        if stop_event.is_set():
            print("stopped before the sweep started; nothing was recorded", file=sys.stderr)
            return EXIT_RUN_FAILED
        say(f"sweep: {plan.describe()}")
        for item in plan.left_out:
            say(f"left out {format_setting(item.axis, item.value)}: {item.reason} (--all-precisions runs it anyway)")
        history = CliHistory(args.no_save)
        group = _sweep_group(history, plan)
        options = history.options(group=group, listener=SweepProgress(plan, history))
        with stdout_to_stderr():
            sweep = run_interruptibly(lambda: run_sweep(plan, history.store, options, stop_event, args.rounds))
    sweep = replace(sweep, target_loss=args.target_loss, objective=args.objective)
    saved = [row.run_id for row in sweep.rows if row.run_id is not None]
    if saved:
        say(f"saved {len(saved)} run(s) in the history as group '{group}'")
    print(json.dumps(sweep.to_dict(), indent=2) if args.json else format_sweep(sweep))
    return EXIT_RUN_FAILED if sweep.stopped else EXIT_OK


def _sweep_group(history: CliHistory, plan: SweepPlan) -> str:
    """The sweep's group in the history ('sweep 3: batch × precision'); "" when it is not recorded (why said once)."""
    if history.store is not None:
        try:
            return next_sweep_group(history.store.groups(), plan)
        except StoreError as exc:
            history.store, history.error = None, f"The run history could not be read: {exc} This run is not saved."
    history.error = history.error.replace("This run is not saved.", "The sweep is not saved.")
    history.say_error(history.error)
    return ""


class SweepProgress(SweepListener):
    """Progress on stderr: 'point 2 of 4: batch 32 · float32', then that point's step line and where it is saved."""

    def __init__(self, plan: SweepPlan, history: CliHistory):
        self._plan = plan
        self._history = history
        self._printers: dict[int, ProgressPrinter] = {}
        self._current = -1
        self._round = -1

    def on_job_start(self, index: int, total: int, label: str) -> None:
        settings = self._plan.points()[index]
        batch = settings.get("batch_size", self._plan.base.batch_size)
        say(f"point {index + 1} of {total}: {label}")
        self._printers[index] = ProgressPrinter(self._plan.base.steps, batch)

    def on_turn(self, index: int, round_index: int, rounds: int) -> None:
        self._current = index
        if round_index > self._round:
            self._round = round_index
            say(f"round {round_index + 1} of {rounds}")

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        printer = self._printers.get(self._current)
        if printer is not None:
            printer(records)

    def on_row(self, index: int, row: SweepRow) -> None:
        printer = self._printers.pop(index, None)
        if printer is not None:
            printer.finish()
        if row.result.message:
            say(f"  {row.status}: {row.result.message}")
        self._history.say_error(row.history_error)


def format_sweep(sweep: Sweep) -> str:
    """The rows as a plain table (the best marked), then what was left out and the learning-rate rule."""
    axes = [axis.name for axis in sweep.plan.axes]
    batch_swept = "batch_size" in axes
    headers = [
        *(AXIS_TITLES[name] for name in axes),
        "status",
        "samples/s",
        "mean step (ms)",
        "median step (ms)",
        "final loss",
        "to target",
        "peak memory",
        "energy/sample",
    ]
    headers += ["suggested lr"] if batch_swept else []
    table = []
    tied = sweep.tied()
    decision = target_decision(sweep.rows, sweep.target_loss)
    target = decision.target_loss
    reached = row_reach(sweep.rows, sweep.target_loss)
    for index, row in enumerate(sweep.rows):
        result = row.result
        cells = [format_setting(name, row.settings[name]) for name in axes]
        mark = " (tied)" if index in tied or (index == sweep.best and tied) else " (best)" if index == sweep.best else ""
        cells += [contended_label(row.status.value, result) + mark]
        cells += [format_value(result.samples_per_s, "rate", NA), format_value(result.mean_step_ms, "ms", NA)]
        cells += [format_value(result.step_time_median_ms, "ms", NA)]
        cells += [
            format_value(result.final_loss, "loss", NA),
            to_target_text(reached[index]),
            format_bytes(result.peak_memory_bytes),
            format_value(result.joules_per_sample, "joules", "not measured"),
        ]
        cells += [f"{row.suggested_learning_rate:.3g}"] if batch_swept else []
        table.append(cells)
    lines = [format_columns(headers, table)]
    lines += [f"{row.label}: {row.status}: {row.result.message}" for row in sweep.rows if row.result.message]
    rounds = max((rounds_measured(row.result) for row in sweep.rows), default=0)
    if rounds:
        lines.append(f"measured in {rounds} interleaved round{'s' if rounds != 1 else ''}: every point once a round, in a new random order")
    if target is not None:
        lines.append(
            f"to target: seconds from the first step (warm-up included) until the smoothed loss reached {target:.4g}: {target_how(sweep.target_loss)}"
        )
    lines += best_lines(sweep, tied, rounds)
    if any(row.result.contended for row in sweep.rows):
        lines.append("(busy): measured while other processes used the machine: figures are low and noisy; re-run on a quiet machine")
    lines += [f"left out {format_setting(item.axis, item.value)}: {item.reason}" for item in sweep.plan.left_out]
    lines += [sweep.lr_note()] if batch_swept else []
    return "\n".join(lines)


def best_lines(sweep: Sweep, tied: Sequence[int], rounds: int) -> list[str]:
    """What the star compares and why, then the ties: "(best)" marks a point only when it is better beyond noise."""
    best = sweep.best
    if best is None:
        return ["(best): none: no point measured its energy" + _energy_reason(sweep)] if sweep.objective == "energy" else []
    if sweep.objective == "energy":
        return energy_best_lines(sweep, tied)
    decision = target_decision(sweep.rows, sweep.target_loss)
    lines = [] if decision.decides else [f"judged by samples/s: time to the target decides nothing ({decision.why})"]
    first = "reached the target first" if decision.decides else "has the most samples/s"
    why = why_not_most_samples(sweep.rows, sweep.target_loss)
    if not tied:
        return [*lines, f"(best): the point that {first}" + (f"; {why}" if why else "")]
    label, names = sweep.rows[best].label, ", ".join(sweep.rows[index].label for index in tied)
    compared = "time to the target" if decision.decides else "samples/s"
    how = ", from the samples/s over the rounds and the samples each needed," if decision.decides else " over the rounds"
    return [
        *lines,
        f"no point is best beyond noise: {label} {first}, tied with {names}" + (f"; {why}" if why else ""),
        f"(tied): no difference in {compared} from {label} beyond noise (the 95% interval of their ratio{how} holds 1"
        + ("; one round tells no points apart)" if rounds < 2 else ")"),
    ]


def energy_best_lines(sweep: Sweep, tied: Sequence[int]) -> list[str]:
    """The energy objective's star: the fewest joules to the target (or per sample), and the ties."""
    best = sweep.best
    assert best is not None
    _, _, by = energy_best(sweep.rows, sweep.target_loss)
    what = (
        "the fewest joules to the target loss"
        if by == BY_JOULES_TO_TARGET
        else "the fewest joules per sample (time to the target decides nothing)"
    )
    label = sweep.rows[best].label
    if not tied:
        return [f"(best): {label}, the point with {what}, fewer than every other beyond noise over the rounds"]
    names = ", ".join(sweep.rows[index].label for index in tied)
    return [f"no point is best beyond noise: {label} used {what}, tied with {names} (the 95% interval of their joules per sample holds 1)"]


def _energy_reason(sweep: Sweep) -> str:
    reasons = {row.result.energy_reason for row in sweep.rows if row.result.energy_reason}
    return f" ({'; '.join(sorted(reasons))})" if reasons else ""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
