"""`history` and `export`, and recording the CLI's runs in the history while they train."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import TYPE_CHECKING, Any

from core.cli.exits import EXIT_BAD_INPUT, EXIT_OK
from core.cli.output import format_columns
from core.compare.significance import CONTENDED_MARK
from core.config import ConfigError, RunConfig
from core.formatting import NA
from core.history.database import StoreError
from core.results import FIGURES

if TYPE_CHECKING:
    from core.history.model_files import ModelFileStates
    from core.history.recorder import HistoryRecorder
    from core.history.store import RunSummary


def cmd_history(args: argparse.Namespace) -> int:
    """The stored runs, newest first; a run on a model file says whether that file changed since (or is gone)."""
    from core.history.model_files import ModelFileStates

    runs = open_history().list_runs()
    files = ModelFileStates()  # each model file hashed once for the whole listing
    if args.json:
        print(json.dumps([_run_dict(r, files) for r in runs], indent=2))
        return EXIT_OK
    headers = ["id", "started", "status", "model", "strategy", "devices", "steps", *(f.title for f in FIGURES)]
    table = [
        [
            r.id,
            r.started_at,
            f"{r.status} {CONTENDED_MARK}" if r.contended else r.status,
            files.title(r.model, r.model_sha256),
            r.strategy,
            ",".join(r.devices) or "-",
            r.steps,
            *(f.format(r.figures[f.name], NA) for f in FIGURES),
        ]
        for r in runs
    ]
    print(format_columns(headers, table))
    return EXIT_OK


def _run_dict(run: RunSummary, files: ModelFileStates) -> dict[str, Any]:
    """A run as `history --json` prints it: its summary, plus "model_file" (path, sha256, state) for a model file."""
    described = files.describe(run.model, run.model_sha256)
    return {**run.to_dict(), **({"model_file": described} if described else {})}


def cmd_export(args: argparse.Namespace) -> int:
    from core.history.export import ExportError

    store = open_history()
    known = {r.id for r in store.list_runs()}
    missing = [i for i in args.run_ids if i not in known]
    if missing:
        raise ConfigError("RUN_ID", missing, "ids listed by `main.py history`")
    target = args.csv or args.json
    try:
        if args.csv:
            store.export_csv(args.run_ids, target)
        else:
            store.export_json(args.run_ids, target)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"exported {len(args.run_ids)} run(s) to {target}", file=sys.stderr)
    return EXIT_OK


class CliHistory:
    """The history as one command records its runs: opened once, each run recorded while it trains.

    A history that cannot be opened or written never stops a run nor its
    printed result: each distinct reason is said once on stderr.
    """

    def __init__(self, skip: bool):
        self.skip = skip
        self._said: set[str] = set()

    def recorder(self, config: RunConfig, label: str = "") -> HistoryRecorder | None:
        """A recorder for one run (None with --no-save)."""
        from core.history.recorder import HistoryRecorder

        if self.skip:
            return None
        try:
            return HistoryRecorder(open_history(for_recording=True), config, label)
        except StoreError as exc:
            return HistoryRecorder(None, config, label, error=f"The run history could not be opened: {exc} This run is not saved.")

    def begin(self, recorder: HistoryRecorder | None) -> None:
        """Record the run as started; say at once when the history cannot take it."""
        if recorder is not None:
            recorder.begin()
            self.say_error(recorder)

    def report(self, recorder: HistoryRecorder | None) -> None:
        """After a run: where it is saved, or why it is not (each reason once)."""
        if recorder is None:
            return
        if recorder.error:
            self.say_error(recorder)
        elif recorder.run_id is not None:
            print(f"saved as run {recorder.run_id} in the history", file=sys.stderr)

    def say_error(self, recorder: HistoryRecorder | None) -> None:
        """Say why `recorder`'s run is not (fully) saved, unless that was said already."""
        if recorder is not None and recorder.error and recorder.error not in self._said:
            self._said.add(recorder.error)
            print(f"warning: {recorder.error}", file=sys.stderr)


@functools.cache
def open_history(for_recording: bool = False):
    """The run history, opened once per command (a comparison records several runs), its notice said once.

    When recording, a read-only history's notice is left to the recorder's one message.
    """
    store = _open_store()
    if store.notice and not (for_recording and store.read_only):
        print(f"warning: {store.notice}", file=sys.stderr)
    return store


@functools.cache
def _open_store():
    from core.history.store import RunStore

    return RunStore.open()
