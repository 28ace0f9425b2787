"""`history` and `export`: the stored runs listed, and exported to CSV or JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from core.cli.exits import EXIT_BAD_INPUT, EXIT_OK
from core.cli.job_options import open_history
from core.cli.output import format_columns
from core.compare.significance import CONTENDED_MARK
from core.config import ConfigError
from core.formatting import NA
from core.history.database import StoreError
from core.results import FIGURES

if TYPE_CHECKING:
    from core.history.store import RunSummary
    from core.workloads.model_file_states import ModelFileStates


def cmd_history(args: argparse.Namespace) -> int:
    """The stored runs, newest first; a run on a model file says whether that file changed since (or is gone)."""
    from core.workloads.model_file_states import ModelFileStates

    runs = _stored_runs()
    files = ModelFileStates()  # each model file hashed once for the whole listing
    if args.json:
        print(json.dumps([_run_dict(r, files) for r in runs], indent=2))
        return EXIT_OK
    headers = ["id", "started", "status", "model", "backend", "strategy", "devices", "steps", *(f.title for f in FIGURES)]
    table = [
        [
            r.id,
            r.started_at,
            f"{r.status} {CONTENDED_MARK}" if r.contended else r.status,
            files.title(r.model, r.model_sha256),
            r.backend,
            r.strategy,
            ",".join(r.devices) or "-",
            r.steps,
            *(f.format(r.figures[f.name], NA) for f in FIGURES),
        ]
        for r in runs
    ]
    print(format_columns(headers, table))
    return EXIT_OK


def _stored_runs() -> list[RunSummary]:
    """The stored runs; none, with a warning, when there is no history yet and it cannot be created (an unwritable folder)."""
    from core.history.store import default_path

    try:
        return open_history().list_runs()
    except StoreError as exc:
        path = default_path()
        # a history that is there, or no folder for one: a real problem (os.path's checks: False, not OSError, for a name too long)
        if os.path.lexists(path) or not os.path.isdir(path.parent):
            raise
        print(f"warning: {exc} No run is stored there yet.", file=sys.stderr)
        return []


def _run_dict(run: RunSummary, files: ModelFileStates) -> dict[str, Any]:
    """A run as `history --json` prints it: its summary, plus "model_file" (path, sha256, state) for a model file."""
    described = files.describe(run.model, run.model_sha256)
    return {**run.to_dict(), **({"model_file": described} if described else {})}


def cmd_export(args: argparse.Namespace) -> int:
    from core.history.export import ExportError

    as_csv = args.csv is not None
    target = args.csv if as_csv else args.json
    if not str(target).strip():
        raise ConfigError("--csv" if as_csv else "--json", target, "a file path to write, such as runs.csv")
    run_ids = list(dict.fromkeys(args.run_ids))  # a run named twice is exported once
    store = open_history()
    known = {r.id for r in store.list_runs()}
    missing = [i for i in run_ids if i not in known]
    if missing:
        raise ConfigError("RUN_ID", missing, "ids listed by `main.py history`")
    try:
        if as_csv:
            store.export_csv(run_ids, target)
        else:
            store.export_json(run_ids, target)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if as_csv:
        from core.history.export import metadata_path

        print(f"exported {len(run_ids)} run(s) to {target} (the system header and export time in {metadata_path(target)})", file=sys.stderr)
    else:
        print(f"exported {len(run_ids)} run(s) to {target}", file=sys.stderr)
    return EXIT_OK
