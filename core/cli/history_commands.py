"""`history` and `export`, and saving a run from the CLI."""

from __future__ import annotations

import argparse
import functools
import json
import sys

from core.cli.exits import EXIT_OK
from core.cli.output import format_columns
from core.config import ConfigError
from core.formatting import NA
from core.results import FIGURES, RunResult


def cmd_history(args: argparse.Namespace) -> int:
    runs = open_history().list_runs()
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


def cmd_export(args: argparse.Namespace) -> int:
    store = open_history()
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


def save(result: RunResult, skip: bool) -> None:
    if skip:
        return
    run_id = open_history().save(result)
    print(f"saved as run {run_id} in the history", file=sys.stderr)


@functools.cache
def open_history():
    """The run history, opened once per command (a comparison saves several runs)."""
    from core.history.store import RunStore

    store = RunStore.open()
    if store.notice:
        print(f"warning: {store.notice}", file=sys.stderr)
    return store
