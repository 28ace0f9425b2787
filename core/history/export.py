"""Exports of stored runs: CSV and JSON, with a system header like benchmark tools print.

The header comes from the runs' `environment` dicts, taking whatever keys are there
(well-known ones first), and each run's backend. A key whose value differs between runs
shows the list of its distinct values. Each run in the JSON keeps its own environment.
The header's `peak_flops` is the measured ceiling the runs' "% of peak" divides by
(None where no run had one); the datasheet/ISA estimate the runs recorded under that
key is shown beside it as `estimate_peak_flops`. `logical_devices` lists every device
TensorFlow had, `devices` those the runs used.

A CSV export's first line is its column header (`csv.DictReader` reads it as it is);
its metadata (when, which runs, the system header) is a JSON file beside it,
`FILE.csv.meta.json` (`metadata_path`). A run measured in interleaved rounds adds
`rounds_*` columns (its rounds' id, count, seed, spans, places and other processes'
CPU share); the other rows leave them empty.

Every export is written through `core.files.write_all_atomically`: temporary files in
the target's folder, renamed over the targets only once all are complete, so a failure
(a full disk, a bad path) never leaves half a file; a symbolic link is written through,
and a target that is not a regular file (a folder, a device, a FIFO) is refused and
left as it is. It raises ExportError naming the path and the reason.
"""

from __future__ import annotations

import csv
import errno
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from core import files
from core.formatting import utc_now
from core.machine.peak_estimates import PEAK_FLOPS, PEAK_FLOPS_HOW
from core.results import RunResult

ESTIMATE_PEAK_FLOPS = "estimate_peak_flops"
ESTIMATE_PEAK_FLOPS_HOW = "estimate_peak_flops_how"
MEASURED_HOW = "measured matmul ceiling of the run's devices, the one its % of peak divides by"
META_SUFFIX = ".meta.json"
_HEADER_ORDER = (
    "backend",
    "tensorflow",
    "keras",
    "python",
    "platform",
    "host",
    "cpu",
    "gpus",
    "driver",
    "cuda",
    "cudnn",
    "devices",
    "logical_devices",
    PEAK_FLOPS,
    PEAK_FLOPS_HOW,
    ESTIMATE_PEAK_FLOPS,
    ESTIMATE_PEAK_FLOPS_HOW,
)


class ExportError(OSError):
    """An export could not be written; the message names the file and the reason."""


@dataclass(frozen=True)
class StoredRun:
    """A result as the history holds it: with its id, label and group."""

    id: int
    label: str
    group: str
    result: RunResult


def system_info(runs: Sequence[StoredRun]) -> dict[str, Any]:
    """The machine the runs were measured on: each environment key with its value, or its distinct values."""
    return {key: seen[0] if len(seen) == 1 else seen for key, seen in _distinct_values(runs).items()}


def _distinct_values(runs: Sequence[StoredRun]) -> dict[str, list[Any]]:
    values: dict[str, list[Any]] = {}
    for run in runs:
        for key, value in _header_entries(run.result).items():
            seen = values.setdefault(key, [])
            if value not in seen:
                seen.append(value)
    known = [key for key in _HEADER_ORDER if key in values]
    return {key: values[key] for key in known + sorted(key for key in values if key not in known)}


def _header_entries(result: RunResult) -> dict[str, Any]:
    """The run's environment for the header, its backend the one it trained with, its peak the measured ceiling and the recorded
    estimate beside it.

    The backend is the run's own (`RunResult.backend`): only a JAX or PyTorch run's environment names one, so a TensorFlow
    run beside them would otherwise leave "backend: jax" as the whole export's.
    """
    entries = {**result.environment, "backend": result.backend}
    if PEAK_FLOPS_HOW not in entries:
        return entries
    entries[ESTIMATE_PEAK_FLOPS] = entries.pop(PEAK_FLOPS, None)
    entries[ESTIMATE_PEAK_FLOPS_HOW] = entries.pop(PEAK_FLOPS_HOW)
    measured = result.measured_peak_flops
    entries[PEAK_FLOPS] = measured
    entries[PEAK_FLOPS_HOW] = MEASURED_HOW if measured is not None else "no measured ceiling (main.py peaks measures it)"
    return entries


def metadata_path(path: str | Path) -> Path:
    """The JSON file beside a CSV export that holds its metadata: `runs.csv` -> `runs.csv.meta.json`."""
    target = Path(path).expanduser()
    return target.with_name(target.name + META_SUFFIX)


def write_runs_csv(runs: Sequence[StoredRun], path: str | Path) -> None:
    """One row per run: id, label, group, `RunResult.summary()` and, for a run measured in rounds, `rounds_*`.

    The first line is the column header; the metadata is in `metadata_path(path)`.
    The figure columns are the summary's, that is `core.results.FIGURES`: a new figure is a new column here.
    """
    rows = [_csv_row(run) for run in runs]
    columns = list(dict.fromkeys(key for row in rows for key in row)) or ["id", "label", "group"]  # a model file's run adds model_sha256

    def write(file: IO[str]) -> None:
        writer = csv.DictWriter(file, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)

    _export(path, write, _metadata(runs, path))


def write_runs_json(runs: Sequence[StoredRun], path: str | Path) -> None:
    """{"system": system_info, "exported_at": ..., "runs": [result.to_dict() with id, label, group]}."""
    document = {
        "system": system_info(runs),
        "exported_at": utc_now(),
        "runs": [{"id": run.id, "label": run.label, "group": run.group, **run.result.to_dict()} for run in runs],
    }
    _export(path, lambda file: file.write(json.dumps(document, indent=1)))


def _export(path: str | Path, write: Callable[[IO[str]], Any], metadata: dict[str, Any] | None = None) -> None:
    """Write `path` (and its metadata file, when given) whole or not at all; ExportError naming the path and the reason."""
    target = Path(path).expanduser()
    items: list[tuple[str | Path, Callable[[IO[str]], Any]]] = [(target, write)]
    if metadata is not None:
        items.append((metadata_path(target), lambda file: file.write(json.dumps(metadata, indent=1))))
    try:
        files.write_all_atomically(items)
    except files.NotARegularFile as exc:
        named = Path(exc.filename or target)
        advice = "give a file name" if exc.is_folder else "give the path of a file to write"
        raise ExportError(f"Can not export to {named}: it is {exc.kind}, not a regular file; {advice}.") from exc
    except OSError as exc:
        named = next((Path(path) for path, _ in items if exc.filename is not None and str(path) == str(exc.filename)), target)
        raise ExportError(f"Can not export to {named}: {_reason(exc, named)}.") from exc


def _metadata(runs: Sequence[StoredRun], path: str | Path) -> dict[str, Any]:
    """What a CSV export's metadata file holds: the export it describes, when, which runs, and the system header."""
    return {
        "export": Path(path).name,
        "exported_at": utc_now(),
        "runs": [run.id for run in runs],
        "system": system_info(runs),
    }


def _reason(exc: OSError, target: Path) -> str:
    """An OS error in words, without the temporary file's name."""
    folder = target.parent
    if exc.errno == errno.ENOENT:
        return f"the folder {folder} does not exist" if not _is_folder(folder) else f"no file can be made in {folder} ({exc.strerror})"
    if exc.errno == errno.ENOTDIR:
        return f"{folder} is not a folder"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{(exc.strerror or 'not allowed').lower()}: the folder {folder} can not be written"
    if exc.errno == errno.ENAMETOOLONG:
        return f"{files.os_error_words(exc, target)}; give a shorter file name"
    return files.os_error_words(exc)


def _is_folder(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _csv_row(run: StoredRun) -> dict[str, Any]:
    """A run's CSV row: id, label, group, its summary, and its rounds (`rounds_id`, `rounds_count`, …) when it was measured in rounds."""
    rounds = {f"rounds_{key}": value for key, value in run.result.rounds.items()}
    return {"id": run.id, "label": run.label, "group": run.group, **_flat(run.result.summary()), **_flat(rounds)}


def _flat(summary: dict[str, Any]) -> dict[str, Any]:
    """Lists as text and dicts as JSON (the memory estimate, the hooks), so each value fits one CSV cell."""
    return {
        key: "; ".join(map(_text, value)) if isinstance(value, list) else _text(value) if isinstance(value, dict) else value
        for key, value in summary.items()
    }


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(_text, value))
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)
