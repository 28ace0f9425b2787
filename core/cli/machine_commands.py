"""`devices`, `peaks` and `models`, and the TensorFlow start-up every command that trains shares."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from core.cli.exits import EXIT_OK, EXIT_RUN_FAILED
from core.cli.job_options import configure_tensorflow
from core.cli.output import format_columns
from core.cli.signals import stop_on_signals
from core.diagnosis.evidence import CEILING_PRECISIONS
from core.formatting import format_si

if TYPE_CHECKING:
    from core.machine.peaks import DevicePeaks, PeaksReport


def cmd_devices(args: argparse.Namespace) -> int:
    configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False))
    from core.backends.devices import list_backend_devices
    from core.machine.inspect import device_table_rows, inspect_devices
    from core.machine.types import memory_cells

    report = inspect_devices()
    rows = device_table_rows(report)
    others = list_backend_devices()
    if args.json:
        print(json.dumps({"devices": rows, "notes": list(report.notes), "backends": others}, indent=2))
        return EXIT_OK
    table = [
        [device.kind, device.tf_name or "-", device.name, *memory_cells(device)]  # memory counted once (logical CPUs share it)
        for device in report.devices
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
    for entry in others:
        print(f"\n{entry['title']}: " + (entry["error"] or ", ".join(f"{d['name']} ({d['description']})" for d in entry["devices"])))
    return EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    from core.tensorflow_import import tensorflow_installed
    from core.workloads.models import describe_models

    if tensorflow_installed():
        from core.logs import import_tensorflow_quietly

        import_tensorflow_quietly()  # counting parameters builds the models: TensorFlow's C++ start-up lines go to the log
    else:
        from core.tensorflow_import import installed_keras_backend

        os.environ.setdefault("KERAS_BACKEND", installed_keras_backend())  # Keras builds them on JAX or PyTorch

    rows = describe_models()
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    table = [[r["name"], r["title"], "x".join(map(str, r["input_shape"])), f"{r['params']:,}", r["default_dataset"]] for r in rows]
    print(format_columns(["name", "model", "input", "params", "default data"], table))
    for r in rows:
        print(f"  {r['name']}: {r['description']}")
    return EXIT_OK


PEAK_KEYS = ("device", "kind", "name", "matmul_flops", "bandwidth_bytes_per_s", "estimate_flops", "measured_at")


def cmd_peaks(args: argparse.Namespace) -> int:
    """This machine's measured ceilings (cached beside the history; measured in a child process when not cached)."""
    from core.diagnosis.ceilings import cached_peaks, machine_peaks, peaks_path

    report = None if args.remeasure else cached_peaks()
    if report is None:
        print(f"Measuring this machine's ceilings in a child process (a minute or two; cached in {peaks_path()})…", file=sys.stderr)
        with stop_on_signals() as stop_event:
            report = machine_peaks(remeasure=True, stop_event=stop_event, on_stage=_say_stage)
    if args.json:
        print(json.dumps(peaks_document(report, str(peaks_path())), indent=2))
    else:
        print(format_peaks(report, str(peaks_path())))
    if report.error:
        print(f"{'warning' if report.devices else 'error'}: {report.error}", file=sys.stderr)
    return EXIT_OK if report.devices else EXIT_RUN_FAILED


def _say_stage(stage: str) -> None:
    if stage != "done":
        print(f"  {stage}…", file=sys.stderr)


def peaks_document(report: PeaksReport, cache_file: str) -> dict[str, Any]:
    """`main.py peaks --json`: per device the PEAK_KEYS plus how each figure was found; the cache and any error."""
    devices = [{**{key: getattr(device, key) for key in PEAK_KEYS}, **_methods(device)} for device in report.devices]
    return {
        "devices": devices,
        "cached": report.cached,
        "cache_file": cache_file,
        "machine": report.machine,
        "error": report.error,
        "contended": report.contended,
        "contention": report.conditions.get("reason", ""),
        "implausible": report.implausible,
        "usable": report.trusted,
        "conditions": dict(report.conditions),
    }


def _methods(device: DevicePeaks) -> dict[str, Any]:
    return {
        "method": device.method,
        "not_measured": dict(device.not_measured),
        "estimate_method": device.estimate_method,
        "implausible": dict(device.implausible),
    }


def _engine(machine: dict[str, Any]) -> str:
    """What measured the ceilings: "TensorFlow 2.21.0", or "JAX" where TensorFlow is not installed."""
    engine = machine.get("engine", "tensorflow")
    if engine == "tensorflow":
        return f"TensorFlow {machine.get('tensorflow', '?')}"
    return {"jax": "JAX", "torch": "PyTorch"}.get(engine, engine)


def format_peaks(report: PeaksReport, cache_file: str) -> str:
    """A table of the measured ceilings beside the datasheet/ISA estimate, then how each was found."""
    precisions = [p for p in CEILING_PRECISIONS if any(p in d.matmul_flops for d in report.devices)]
    headers = ["device", "name", *(f"{p} matmul" for p in precisions), "bandwidth", "estimate (float32)"]
    rows = [
        [
            device.device,
            device.name,
            *(format_si(device.matmul_flops.get(p), "FLOP/s") for p in precisions),
            format_si(device.bandwidth_bytes_per_s, "B/s"),
            format_si(device.estimate_flops.get("float32"), "FLOP/s"),
        ]
        for device in report.devices
    ]
    lines = [format_columns(headers, rows)] if rows else ["No device was measured."]
    for device in report.devices:
        lines.append(f"\n{device.device} {device.name}, measured {device.measured_at} with {_engine(report.machine)}")
        how, *figures = (part.strip() for part in device.method.split(";"))
        lines.append(f"  method: {how}")
        lines.extend(f"    {figure}" for figure in figures)
        lines.extend(f"  {what}: {why}" for what, why in device.not_measured.items())
        lines.extend(f"  {what}: IMPLAUSIBLE, {why}" for what, why in device.implausible.items())
        lines.append(f"  estimate: {device.estimate_method or 'none'}")
    if report.contended:
        lines.append(f"\nCONTENDED: measured while {report.conditions.get('reason')}: these figures are low and noisy.")
    source = "read from the cache" if report.cached else "measured now, cached" if report.trusted else "measured now, NOT cached"
    lines.append(f"\n{source}: {cache_file} (main.py peaks --remeasure measures again)")
    if not report.cached and not report.trusted and report.devices:
        lines.append("No verdict divides by these figures; re-run `main.py peaks --remeasure` on a quiet machine.")
    return "\n".join(lines)
