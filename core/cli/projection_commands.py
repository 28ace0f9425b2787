"""`project`: a model's step time and samples/s projected on a catalogue device it need not be run on (`core.projection`).

The device is checked as the options are parsed (an unknown name exits 2 with the known ones,
in one line, before anything starts); the model and settings as every job command checks them
(`job_config`: a model file is described in a child first); then XLA counts the step's costs in
a child process on this machine's CPU (JAX, no TensorFlow, no GPU) and the calibrated model
projects them. The answer is always labelled a projection; nothing is recorded in the history.
Exit codes: 0 projected, 1 the step's costs could not be counted (JAX, whose XLA counts them, not installed
here is said before anything starts), 2 bad input (an unknown device, a precision the device lacks, PyTorch
on a TPU, a model or setting refused).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from core.cli.exits import EXIT_BAD_INPUT, EXIT_OK, EXIT_RUN_FAILED
from core.cli.job_options import add_job_arguments, add_target_loss_argument, job_config, whole_number
from core.cli.output import format_columns
from core.config import MAX_STEPS_PER_CALL, PRECISIONS, RunConfig
from core.formatting import format_bytes, format_seconds, format_si
from core.projection.catalogue import PRECISION_NAMES, UnknownDevice, device_names, find_device
from core.tensorflow_import import tensorflow_installed

MAX_SAMPLES_TO_TARGET = 10**15


def add_project_arguments(parser: argparse.ArgumentParser) -> None:
    """The `project` subcommand's options: the shared job options (nothing trains here, nothing is recorded), the device, the settings."""
    add_job_arguments(parser, trains_here=False, records=False)
    parser.add_argument(
        "--device",
        required=True,
        type=device_argument,
        metavar="NAME",
        help=f"the accelerator to project on: {', '.join(device_names())} (case, spaces and dashes aside)",
    )
    parser.add_argument("--batch-size", type=int, default=RunConfig.batch_size, help="global batch size (default %(default)s)")
    parser.add_argument("--precision", default=RunConfig.precision, choices=PRECISIONS)
    parser.add_argument(
        "--steps-per-call",
        type=whole_number("--steps-per-call", 1, MAX_STEPS_PER_CALL, f"a whole number from 1 to {MAX_STEPS_PER_CALL}"),
        default=RunConfig.steps_per_call,
        metavar="K",
        help="steps per compiled call (default %(default)s)",
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--samples-to-target",
        type=whole_number("--samples-to-target", 1, MAX_SAMPLES_TO_TARGET, "a whole number of samples, at least 1"),
        default=None,
        metavar="N",
        help="samples a run needed to reach its loss target (`run`'s time to target): adds the projected time to reach it",
    )
    add_target_loss_argument(
        target,
        "adds the projected time to this smoothed loss, from the samples the newest run of the same training "
        "in the history needed to reach it",
    )


def device_argument(text: str) -> str:
    """An argparse type: the catalogue name of `text`, refused with the known names otherwise (one line, exit 2)."""
    try:
        return find_device(text).name
    except UnknownDevice as exc:
        raise argparse.ArgumentTypeError(f"got {text!r}; {exc.hint}") from exc


def cmd_project(args: argparse.Namespace) -> int:
    from core.projection.measured_here import SamplesToLoss, latest_measured, samples_to_loss
    from core.projection.project import ProjectionRefused, check_request, project, projected_batches
    from core.projection.step_costs import CostsUnavailable, measure_step_costs, require_jax
    from core.tensorflow_import import installed_keras_backend
    from core.workloads.workload import model_title

    device = find_device(args.device)
    try:
        require_jax()  # before a model file is described (a child, Keras and its backend starting)
    except CostsUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED
    if not tensorflow_installed():  # a model file is described by Keras in a child: on the backend that is here
        os.environ.setdefault("KERAS_BACKEND", installed_keras_backend())
    config = job_config(args)
    try:
        check_request(config, device)
    except ProjectionRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    batches = projected_batches(config.batch_size)
    print(
        f"counting the train step's costs with XLA at batch {', '.join(f'{b:,}' for b in batches)} "
        "(a child process: JAX on this machine's CPU; nothing trains)…",
        file=sys.stderr,
        flush=True,
    )
    try:
        costs = measure_step_costs(config, batches)
    except CostsUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED
    samples, how = args.samples_to_target, "given (--samples-to-target)" if args.samples_to_target else ""
    if args.target_loss is not None:
        found = samples_to_loss(config, args.target_loss)
        samples, how = (found.samples, found.how()) if isinstance(found, SamplesToLoss) else (None, found)
    document = project(config, device, costs, model_title(config.model), samples, latest_measured(config), how)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(projection_text(document))
    return EXIT_OK


def projection_text(document: dict[str, Any]) -> str:
    """The projection as text: the label, one row per batch, why, memory, the points it rests on and its caveats."""
    device = document["device"]
    band = document["range"]
    lines = [
        f"{document['label']} (nothing is recorded)",
        f"  {document['backend']} backend, {PRECISION_NAMES[document['precision']]}, {document['steps_per_call']} step(s) per call; "
        f"device {device['name']}: {device['ceiling_flops'] / 1e12:,.0f} TFLOP/s ({device['ceiling_how']}), "
        f"{device['bandwidth_bytes_per_s'] / 1e12:,.2f} TB/s, {device['memory_bytes'] / 1e9:,.0f} GB ({format_bytes(device['memory_bytes'])})",
        f"  each range: the projection ÷/x {band['factor']:.2f} (high/low {band['high_over_low']:.2f}): {band['how']}",
        "",
    ]
    header = ["batch", "projected step (ms)", "projected samples/s", "device bound", "regime", "memory", "FLOPs/step", "bytes/step"]
    table = [
        [
            f"{row['batch']:,}",
            f"{_figure(row['step_s']['low'] * 1e3)}-{_figure(row['step_s']['high'] * 1e3)}",
            f"{row['samples_per_s']['low']:,.0f}-{row['samples_per_s']['high']:,.0f}",
            f"{row['device_bound_samples_per_s']:,.0f}",
            row["regime"],
            f"{'fits' if row['fits']['fits'] else 'DOES NOT FIT'}: {format_bytes(row['fits']['need_bytes'])}",
            format_si(row["flops"], "FLOP"),
            format_si(row["bytes"], "B"),
        ]
        for row in document["rows"]
    ]
    lines.append(format_columns(header, table))
    lines += ["", "why:"]
    lines += [f"  batch {row['batch']:,}: {row['regime']}: {row['why']}" for row in document["rows"]]
    memory = document["memory"]
    lines += ["", f"memory: each batch's need vs {format_bytes(memory['usable_bytes'])} usable ({memory['usable_how']}); {memory['how']}"]
    lines += [f"  left out: {text}" for text in document["left_out"]]
    for row in document["rows"]:
        if row["time_to_target_s"]:
            target = row["time_to_target_s"]
            lines.append(
                f"time to the loss target ({document['samples_to_target']:,} samples at batch {row['batch']:,}; "
                f"{document['samples_to_target_how']}): {format_seconds(target['low'])} to {format_seconds(target['high'])} (projected)"
            )
    if document["samples_to_target"] is None and document["samples_to_target_how"]:
        lines.append(f"time to the loss target: not projected: {document['samples_to_target_how']}")
    lines += measured_text(document)
    calibration = document["calibration"]
    constants = calibration["constants"]
    lines += ["", f"calibrated on ({calibration['backend']} constants: {_constants_text(constants)}):"]
    lines += [
        f"  {point['backend']} {point['model']} on {point['device']}, batch {point['batch']}{_point_setting(point)}: "
        f"{point['steady_samples_per_s']:,.0f} samples/s measured{' (its median step)' if point['median_step_ms'] is not None else ''} "
        f"({point['source']})"
        for point in calibration["points"]
    ]
    if document["caveats"]:
        lines += ["", "caveats (where this projection leans on more than its points show):"]
        lines += [f"  - {caveat}" for caveat in document["caveats"]]
    return "\n".join(lines)


def _constants_text(constants: dict[str, Any]) -> str:
    per = "step" if constants.get("per_layer_s") is not None else "call"
    parts = [
        f"host {constants['host_s'] * 1e3:.3g} ms per {per}",
        f"efficiency {constants['efficiency']:.3%} of the ceiling",
        f"{constants['byte_share']:.1%} of XLA's pre-fusion bytes reach memory",
        f"{constants['epoch_s'] * 1e3:.3g} ms per epoch",
    ]
    if constants.get("per_layer_s") is not None:
        parts.append(f"{constants['per_layer_s'] * 1e3:.3g} ms per layer")
    if constants.get("scatter_s"):
        parts.append(f"{constants['scatter_s'] * 1e12:.3g} ps per scattered element")
    parts.append(f"{constants['kernel_s'] * 1e6:g} µs per kernel (fixed)")
    return ", ".join(parts)


def _point_setting(point: dict[str, Any]) -> str:
    """ ", digits, float16": a point's data set and precision where they are not synthetic and float32."""
    return "".join(f", {value}" for value in (point["dataset"], point["precision"]) if value not in ("synthetic", "off"))


def _figure(value: float) -> str:
    """Three significant digits, never in exponent form: 0.744, 5.26, 44.8, 1,672."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def measured_text(document: dict[str, Any]) -> list[str]:
    """ "against this machine: run #12 (CPU:0, ...) trained this job at 21,911 samples/s: at batch 64 the projection is 1.61-3.21x
    that", or nothing where the history holds no run of the job."""
    measured = document["measured_here"]
    row = next((row for row in document["rows"] if row["speedup_vs_measured"]), None)
    if measured is None or row is None:
        return []
    ratio = row["speedup_vs_measured"]
    return [
        f"against this machine: run #{measured['run_id']} ({measured['where']}, {measured['started_at'][:16].replace('T', ' ')} UTC) trained this job at "
        f"{measured['samples_per_s']:,.0f} samples/s: at batch {row['batch']:,} the projection is "
        f"{_figure(ratio['low'])}-{_figure(ratio['high'])}x that"
    ]
