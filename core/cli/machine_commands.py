"""`devices` and `models`, and the TensorFlow start-up every command that trains shares."""

from __future__ import annotations

import argparse
import json
import sys

from core.cli.exits import EXIT_OK
from core.cli.output import format_columns


def configure_tensorflow(logical_cpus: int, verbose: bool = False) -> None:
    """Import TF (its C++ start-up chatter to the log file unless --verbose) and split the CPU if asked."""
    from core.logs import import_tensorflow_quietly
    from core.machine.runtime import RuntimeSettings, configure_runtime

    if not verbose:
        import_tensorflow_quietly()

    for warning in configure_runtime(RuntimeSettings(logical_cpus=logical_cpus)):
        print(f"warning: {warning}", file=sys.stderr)


def cmd_devices(args: argparse.Namespace) -> int:
    configure_tensorflow(args.logical_cpus, getattr(args, "verbose", False))
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


def cmd_models(args: argparse.Namespace) -> int:
    from core.logs import import_tensorflow_quietly
    from core.workloads.models import describe_models

    import_tensorflow_quietly()  # counting parameters builds the models: TensorFlow's C++ start-up lines go to the log

    rows = describe_models()
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    table = [[r["name"], r["title"], "x".join(map(str, r["input_shape"])), f"{r['params']:,}", r["default_dataset"]] for r in rows]
    print(format_columns(["name", "model", "input", "params", "default data"], table))
    for r in rows:
        print(f"  {r['name']}: {r['description']}")
    return EXIT_OK
