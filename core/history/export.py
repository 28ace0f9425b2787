"""Exports of stored runs: CSV and JSON, under a system header like benchmark tools print.

The header comes from the runs' `environment` dicts, taking whatever keys are there
(well-known ones first). A key whose value differs between runs shows every distinct
value: a list in JSON, "a | b" in CSV. Each run in the JSON keeps its own environment.
The header's `peak_flops` is the measured ceiling the runs' "% of peak" divides by
(None where no run had one); the datasheet/ISA estimate the runs recorded under that
key is shown beside it as `estimate_peak_flops`. `logical_devices` lists every device
TensorFlow had, `devices` those the runs used.

Every export is written to a temporary file in the target's folder and renamed
over the target only once complete, so a failure (a full disk, a bad path) never
leaves half a file; it raises ExportError naming the path and the reason.
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
_HEADER_ORDER = (
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
    """The run's environment for the header, its peak the measured ceiling and the recorded estimate beside it."""
    entries = dict(result.environment)
    if PEAK_FLOPS_HOW not in entries:
        return entries
    entries[ESTIMATE_PEAK_FLOPS] = entries.pop(PEAK_FLOPS, None)
    entries[ESTIMATE_PEAK_FLOPS_HOW] = entries.pop(PEAK_FLOPS_HOW)
    measured = result.measured_peak_flops
    entries[PEAK_FLOPS] = measured
    entries[PEAK_FLOPS_HOW] = MEASURED_HOW if measured is not None else "no measured ceiling (main.py peaks measures it)"
    return entries


def write_runs_csv(runs: Sequence[StoredRun], path: str | Path) -> None:
    """`#` header lines, then one row per run: id, label, group and `RunResult.summary()`.

    The figure columns are the summary's, that is `core.results.FIGURES`: a new figure is a new column here.
    """
    rows = [{"id": run.id, "label": run.label, "group": run.group, **_flat(run.result.summary())} for run in runs]
    columns = list(dict.fromkeys(key for row in rows for key in row)) or ["id", "label", "group"]  # a model file's run adds model_sha256

    def write(file: IO[str]) -> None:
        _write_header(file, runs)
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)

    write_atomically(path, write)


def write_runs_json(runs: Sequence[StoredRun], path: str | Path) -> None:
    """{"system": system_info, "exported_at": ..., "runs": [result.to_dict() with id, label, group]}."""
    document = {
        "system": system_info(runs),
        "exported_at": utc_now(),
        "runs": [{"id": run.id, "label": run.label, "group": run.group, **run.result.to_dict()} for run in runs],
    }
    write_atomically(path, lambda file: file.write(json.dumps(document, indent=1)))


def write_steps_csv(run: StoredRun, path: str | Path) -> None:
    """`#` header lines, then step, loss, step_time_s, warmup: one row per step."""
    result = run.result

    def write(file: IO[str]) -> None:
        _write_header(file, [run])
        writer = csv.writer(file)
        writer.writerow(("step", "loss", "step_time_s", "warmup"))
        warmup = result.warmup_steps
        writer.writerows(
            (step, loss, seconds, int(step <= warmup))
            for step, (loss, seconds) in enumerate(zip(result.losses, result.step_times_s, strict=True), start=1)
        )

    write_atomically(path, write)


def write_atomically(path: str | Path, write: Callable[[IO[str]], Any]) -> None:
    """`core.files.write_atomically` for an export: `path` is the whole export or as it was; ExportError on failure."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise ExportError(f"Can not export to {target}: it is a folder; give a file name.")
    try:
        files.write_atomically(target, write)
    except OSError as exc:
        raise ExportError(f"Can not export to {target}: {_reason(exc, target)}.") from exc


def _reason(exc: OSError, target: Path) -> str:
    """An OS error in words, without the temporary file's name."""
    folder = target.parent
    if exc.errno == errno.ENOENT:
        return f"the folder {folder} does not exist" if not folder.is_dir() else f"no file can be made in {folder} ({exc.strerror})"
    if exc.errno == errno.ENOTDIR:
        return f"{folder} is not a folder"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{(exc.strerror or 'not allowed').lower()}: the folder {folder} can not be written"
    return exc.strerror or str(exc)


def _write_header(file: Any, runs: Sequence[StoredRun]) -> None:
    ids = ", ".join(str(run.id) for run in runs)
    lines = [f"Device Lab export, {utc_now()}, runs: {ids}"]
    lines += [f"{key}: {' | '.join(map(_text, seen))}" for key, seen in _distinct_values(runs).items()]
    file.write("".join(f"# {line}\n" for line in lines))


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
