"""`max-batch` and `autotune`: the largest batch that fits, and the fastest settings within a time budget.

`max-batch` trains a few steps per probe in child processes (this process never
imports TensorFlow), so a probe that runs out of memory is a row of the answer,
never a crash. `autotune` trains in this process, one short run per point.
Input is checked before anything starts; progress goes to stderr, the answer
(a table, or one JSON object) to stdout. Exit 0 when the search found a batch
that fits; 1 when it was stopped or the job itself failed; 2 on bad input, and
when not even batch 1 fits in the --memory-limit given (one line says the limit
is below what the model needs; without --memory-limit that is 1: the machine's
memory, not the input).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import psutil

from core.cli.exits import EXIT_BAD_INPUT, EXIT_OK, EXIT_RUN_FAILED
from core.cli.job_options import add_job_arguments, add_rounds_argument, check_energy_counter, configure_tensorflow, job_config
from core.cli.output import format_columns
from core.cli.signals import ends_by, run_interruptibly, stop_on_signals
from core.compare.targets import parse_target_option
from core.config import MAX_BATCH_SIZE, PRECISIONS, ConfigError, RunConfig
from core.formatting import NA, format_bytes, format_value
from core.tuning.autotune import (
    BUDGET_SLACK_S,
    DEFAULT_BUDGET_S,
    OBJECTIVES,
    AutotuneResult,
    TunePoint,
    autotune,
    check_budget,
    settings_text,
)
from core.tuning.max_batch import (
    BUDGET,
    MEMORY_LIMIT_FIELD,
    NOT_MEASURABLE,
    SIZE_ALLOWED,
    TOLERANCE,
    MaxBatchResult,
    Probe,
    check_target,
    find_max_batch,
    margin_text,
    parse_size,
)
from core.tuning.max_batch_probe import PROBE_STEPS
from core.tuning.sweep_plan import format_setting, parse_values

TOLERANCE_FIELD = "--tolerance"
WATCHDOG_GRACE_S = 1.0
"""The whole command ends by budget + slack + this, even inside TensorFlow's import (the search itself ends by budget + slack)."""


def add_search_arguments(parser: argparse.ArgumentParser, trains_here: bool) -> None:
    """The job both searches work on: the shared job options, the target, the settings they keep and the memory budget."""
    add_job_arguments(parser, trains_here=trains_here, records=False)
    parser.add_argument("--target", default="default", metavar="T", help="where it runs: default, CPU:0, GPU:0, mirrored:GPU:0,GPU:1, ...")
    parser.add_argument("--precision", default=RunConfig.precision, choices=PRECISIONS)
    parser.add_argument("--xla", action="store_true", help="compile each step with XLA")
    parser.add_argument(
        MEMORY_LIMIT_FIELD,
        default=None,
        metavar="SIZE",
        help="host memory budget such as 4GiB, at most this machine's RAM (default: half the available RAM); on a GPU, a cap on its memory",
    )


def add_max_batch_arguments(parser: argparse.ArgumentParser) -> None:
    """The `max-batch` subcommand's options (its probes train in child processes: no --logical-cpus here)."""
    add_search_arguments(parser, trains_here=False)
    parser.add_argument(
        "--start-batch", type=int, default=RunConfig.batch_size, metavar="N", help="the batch the search starts from (default %(default)s)"
    )
    parser.add_argument(
        "--up-to", type=int, default=MAX_BATCH_SIZE, metavar="N", help="the largest batch worth trying, e.g. the data set's size"
    )
    parser.add_argument(
        TOLERANCE_FIELD,
        default=str(TOLERANCE),
        metavar="F",
        help=f"stop when the gap between fits and does not fit is within this fraction (default {TOLERANCE})",
    )
    parser.add_argument("--budget-s", type=float, default=None, metavar="S", help="seconds the whole search may take (default: no limit)")


def add_autotune_arguments(parser: argparse.ArgumentParser) -> None:
    """The `autotune` subcommand's options."""
    add_search_arguments(parser, trains_here=True)
    parser.add_argument(
        "--batch-size",
        type=int,
        default=RunConfig.batch_size,
        help="your global batch (kept unless --allow-batch-change; default %(default)s)",
    )
    parser.add_argument("--steps-per-call", type=int, default=RunConfig.steps_per_call, metavar="K", help="your steps per call: the start")
    parser.add_argument(
        "--budget-s", type=float, default=DEFAULT_BUDGET_S, metavar="S", help=f"seconds the search may take (default {DEFAULT_BUDGET_S:g})"
    )
    parser.add_argument(
        "--allow-batch-change",
        action="store_true",
        help="also try larger batches, each at your learning rate and at the linear rule's (scaled with the batch)",
    )
    parser.add_argument(
        "--backends",
        default="",
        metavar="B1,B2",
        help="also try these Keras backends, e.g. tensorflow,jax (off by default: each such point starts a child process)",
    )
    parser.add_argument("--max-batch", type=int, default=None, metavar="N", help="the largest batch to try (from `max-batch`)")
    parser.add_argument(
        "--objective",
        default="loss",
        choices=OBJECTIVES,
        help="loss (default): adopt a setting only if it also reaches your settings' loss no later; samples: samples/s alone; "
        "energy: the fewest measured joules per sample (needs an energy counter: NVML on a GPU, powercap on the CPU)",
    )
    add_rounds_argument(parser)


def job_for(args: argparse.Namespace, batch_size: int, steps_per_call: int = 1) -> RunConfig:
    """The job the search works on, on its target; a model file is opened in a child process first."""
    target = parse_target_option(args.target, "--target")
    return job_config(args, target, batch_size=batch_size, steps_per_call=steps_per_call)


def memory_limit(args: argparse.Namespace) -> int | None:
    """--memory-limit in bytes (None: not given); ConfigError for an empty value or more than this machine's RAM."""
    if args.memory_limit is None:
        return None
    ram = psutil.virtual_memory().total
    rule = f"{SIZE_ALLOWED}, from 1MiB to this machine's RAM ({format_bytes(ram)})"
    try:
        size = parse_size(args.memory_limit)
    except ConfigError as exc:
        raise ConfigError(MEMORY_LIMIT_FIELD, args.memory_limit, rule) from exc
    if size > ram:
        raise ConfigError(MEMORY_LIMIT_FIELD, args.memory_limit, rule)
    return size


def parse_tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.001 <= value <= 1.0:
        raise ConfigError(TOLERANCE_FIELD, text, "a fraction from 0.001 to 1, such as 0.03")
    return value


def process_started() -> float:
    """The time.monotonic() at which this process started, so a budget counts everything the command did."""
    try:
        age = time.time() - psutil.Process().create_time()
    except psutil.Error:  # no process table to read: count from now
        age = 0.0
    return time.monotonic() - max(age, 0.0)


def cmd_max_batch(args: argparse.Namespace) -> int:
    started = process_started()
    budget_s = check_budget(args.budget_s) if args.budget_s is not None else None
    limit = memory_limit(args)
    tolerance = parse_tolerance(args.tolerance)
    for option, value in (("--start-batch", args.start_batch), ("--up-to", args.up_to)):
        if not 1 <= value <= MAX_BATCH_SIZE:
            raise ConfigError(option, value, f"a whole number from 1 to {MAX_BATCH_SIZE}")
    job = job_for(args, args.start_batch)
    check_target(job, limit)
    with stop_on_signals() as stop_event:
        say(f"largest batch of {job.model} on {args.target}: {PROBE_STEPS} steps per probe, each in a child process")
        result = run_interruptibly(
            lambda: find_max_batch(
                job,
                limit,
                stop_event=stop_event,
                on_probe=_print_probe,
                cap=args.up_to,
                tolerance=tolerance,
                budget_s=budget_s,
                started=started,
            )
        )
    print(json.dumps(result.to_dict(), indent=2) if args.json else format_max_batch(result))
    if result.error:
        say(f"the search ended early: {result.error}")
    elif result.stopped:
        say(f"the search was stopped: {margin_text(result)}{budget_advice(result)}")
    elif none_fit(result):
        print(f"error: {none_fit_line(result, args.memory_limit)}", file=sys.stderr)
        return EXIT_BAD_INPUT if limit is not None else EXIT_RUN_FAILED
    return EXIT_OK if result.finished else EXIT_RUN_FAILED


def none_fit(result: MaxBatchResult) -> bool:
    """True when the search finished and not even the smallest batch fit in the memory limit."""
    return result.finished and result.largest_fitting == 0 and result.smallest_failing is not None


def none_fit_line(result: MaxBatchResult, given: str | None) -> str:
    """One line: the memory limit (`given` as typed, None for the default) is below what the model needs, and what to do."""
    smallest = result.smallest_failing or 1
    seen = max((p.peak_bytes for p in result.probes if p.batch == smallest and p.peak_bytes), default=0)
    needs = f" (its probe had passed {format_bytes(seen)} when it was stopped)" if seen else ""
    limit = f"{MEMORY_LIMIT_FIELD} {given}" if given else f"the default {result.limit_kind} of {format_bytes(result.memory_limit)}"
    advice = f"give a larger {MEMORY_LIMIT_FIELD}" if given else f"free memory, or give {MEMORY_LIMIT_FIELD}"
    return f"{limit} is below what the model needs: not even batch {smallest:,} fit{needs}; {advice}."


def budget_advice(result: MaxBatchResult) -> str:
    """'; give a larger --budget-s (a probe took about 11 s)' when the time budget stopped the search, else ''."""
    if result.stopped_by != BUDGET:
        return ""
    seconds = sorted(p.seconds for p in result.probes)
    took = f" (a probe took about {seconds[len(seconds) // 2]:.0f} s)" if seconds else ""
    return f"; give a larger --budget-s{took}"


def _print_probe(batch: int, probe: Probe | None) -> None:
    if probe is None:
        say(f"probe: batch {batch:,} ...")
    else:
        verdict = f"stopped: {probe.reason}" if probe.stopped else "fits" if probe.fits else f"does not fit: {probe.error or probe.reason}"
        say(f"  batch {batch:,}: {verdict} (peak {format_bytes(probe.peak_bytes)}, {probe.seconds:.1f} s)")


def format_max_batch(result: MaxBatchResult) -> str:
    rows = [[f"{p.batch:,}", "yes" if p.fits else "no", format_bytes(p.peak_bytes), f"{p.seconds:.1f} s", p.reason] for p in result.probes]
    lines = [format_columns(["batch", "fits", "peak memory", "time", "why not"], rows), ""]
    per_example = format_bytes(int(result.bytes_per_example)) if result.bytes_per_example is not None else NOT_MEASURABLE
    found = f"{result.max_batch:,}" if not result.stopped or result.smallest_failing is not None else "not found"
    lines.append(f"largest batch: {found} ({margin_text(result)})")
    lines.append(f"memory per example: {per_example}; limit: {result.limit_kind} {format_bytes(result.memory_limit)}")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def cmd_autotune(args: argparse.Namespace) -> int:
    started = process_started()  # the budget bounds the whole command: the interpreter's and TensorFlow's start-up included
    budget_s = check_budget(args.budget_s)
    limit = memory_limit(args)
    if args.max_batch is not None and args.max_batch < args.batch_size:
        raise ConfigError("--max-batch", args.max_batch, f"a batch of at least --batch-size ({args.batch_size})")
    job = job_for(args, args.batch_size, args.steps_per_call)
    if args.objective == "energy":
        check_energy_counter(job)
    backends = parse_values("backend", args.backends, "--backends") if args.backends else ()
    give_up = started + budget_s + BUDGET_SLACK_S + WATCHDOG_GRACE_S
    seen: list[TunePoint] = []

    def show_point(point: TunePoint) -> None:
        seen.append(point)
        _print_point(point)

    with stop_on_signals() as stop_event, ends_by(give_up, lambda: _out_of_time(budget_s, started, args.json, seen)):
        configure_tensorflow(args.logical_cpus, args.verbose, [job])
        from core.training.engine import check_against_machine

        check_against_machine(job)
        say(f"autotune of {job.model} on {args.target} at batch {job.batch_size}, within {budget_s:g} s")
        result = run_interruptibly(
            lambda: autotune(
                job,
                budget_s,
                args.allow_batch_change,
                args.max_batch,
                stop_event,
                show_point,
                limit,
                started=started,
                backends=backends,
                rounds=args.rounds,
                objective=args.objective,
            )
        )
    print(json.dumps(result.to_dict(), indent=2) if args.json else format_autotune(result))
    if not result.measured:
        say(f"autotune failed: {result.error}; the points above say why")
    elif result.error:
        say(f"the job itself failed: {result.error}")
    code = EXIT_RUN_FAILED if result.stopped or result.error or not result.measured else EXIT_OK
    if result.abandoned:  # a TensorFlow call still runs in its thread and cannot be interrupted: end without waiting for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _out_of_time(budget_s: float, started: float, as_json: bool, points: list[TunePoint]) -> None:
    """What autotune says when its budget and slack ran out before the search could answer: what it had measured by then."""
    measured = [point for point in points if point.status == "measured"]
    if measured:
        error = (
            f"the {budget_s:g} s budget (+ {BUDGET_SLACK_S:g} s slack) ran out before the search finished: "
            f"{len(measured)} point(s) measured (above), none chosen as the best"
        )
    else:
        error = (
            f"nothing was measured within the {budget_s:g} s budget (+ {BUDGET_SLACK_S:g} s slack): "
            "TensorFlow's start-up and the first point's set-up took it all"
        )
    if as_json:
        document = {"best": None, "samples_per_s": None, "points": [p.to_dict() for p in points], "error": error}
        print(json.dumps({**document, "elapsed_s": time.monotonic() - started}))
    say(f"autotune failed: {error}; give it a larger --budget-s")


def _print_point(point: TunePoint) -> None:
    rate = format_value(point.samples_per_s, "rate", NA)
    say(f"  {point.stage}: {settings_text(point.settings)}: {point.status} {rate} samples/s {point.message}".rstrip())


def format_autotune(result: AutotuneResult) -> str:
    rows = [[p.stage, settings_text(p.settings), p.status, format_value(p.samples_per_s, "rate", NA), p.message] for p in result.points]
    lines = [format_columns(["stage", "settings", "status", "samples/s", "note"], rows), ""]
    if not result.measured:
        return "\n".join(
            [*lines, f"took {result.elapsed_s:.1f} s of a {result.budget_s:g} s budget (+ {BUDGET_SLACK_S:g} s slack at most)"]
        )
    lines.append(f"best: {settings_text(result.best)}: {format_value(result.samples_per_s, 'rate', NA)} samples/s")
    defaults_faster = " (Keras's defaults ran faster: see the note)" if result.keras_defaults_faster else ""
    lines.append(
        f"gain over your settings: {_times(result.gain)}; over Keras's defaults (1 step per execution, float32, no XLA): "
        f"{_times(result.gain_over_keras_defaults)}{defaults_faster}"
    )
    if result.gain_interval is not None:
        lines.append(f"how sure: {result.gain_interval.text()}; {result.gain_interval.sureness()}")
    elif result.rival is not None:
        against = f": {result.rival_interval.text()}; {result.rival_interval.sureness()}" if result.rival_interval is not None else ""
        lines.append(f"your settings kept against {settings_text(result.rival)}{against}")
    if result.target_loss is not None:
        lines.append(
            f"time to your settings' loss {result.target_loss:.4g} (steady seconds, in the rounds): {_times(result.time_to_target_gain)} "
            f"as fast (objective: {result.objective})"
        )
    lines.append(
        f"took {result.elapsed_s:.1f} s of a {result.budget_s:g} s budget (+ {BUDGET_SLACK_S:g} s slack at most): {result.ending()}"
    )
    lines += [f"left out {format_setting('precision', value)}: {reason}" for value, reason in result.left_out]
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def _times(gain: float | None) -> str:
    return f"{gain:.2f}x" if gain is not None else NA


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
