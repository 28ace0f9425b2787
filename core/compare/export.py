"""Export of a comparison as shown: every row with its speed-up, efficiency, FLOP/s and verdict, to CSV or JSON.

The History panel exports stored runs (`RunStore.export_csv/json`); a comparison
adds figures no single run has (speed-up against the chosen baseline, scaling
efficiency, achieved FLOP/s against the measured ceiling and the estimate, the
verdict of rows whose run had none), so it is written from
`Comparison.to_rows_dict()` under the same system header. No Qt here.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from core.compare.table import Comparison, ceiling_notes
from core.formatting import utc_now
from core.history.export import StoredRun, system_info


def write_comparison(comparison: Comparison, path: str | Path) -> Path:
    """Write CSV or JSON by the file's suffix (JSON unless it ends in .csv); returns the path."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        write_comparison_csv(comparison, path)
    else:
        write_comparison_json(comparison, path)
    return path


def comparison_document(comparison: Comparison) -> dict[str, Any]:
    """{"system", "exported_at", "baseline", "flops_per_step", "flops_method", "ceilings", "warnings", "rows"}.

    Each row carries its verdict (bound, bound_evidence, advice) and % of peak
    against the measured ceiling (pct_of_measured_peak, fraction_of_peak) with
    the estimate beside it (estimate_flops, fraction_of_estimate); "ceilings"
    says what each divides by.
    """
    baseline = comparison.baseline
    return {
        "system": _system(comparison),
        "exported_at": utc_now(),
        "baseline": baseline.label if baseline is not None else None,
        "flops_per_step": comparison.flops_per_step,
        "flops_method": comparison.flops_method,
        "ceilings": ceiling_notes(comparison),
        "warnings": list(comparison.warnings),
        "rows": comparison.to_rows_dict(),
    }


def write_comparison_json(comparison: Comparison, path: str | Path) -> None:
    Path(path).write_text(json.dumps(comparison_document(comparison), indent=1), encoding="utf-8")


def write_comparison_csv(comparison: Comparison, path: str | Path) -> None:
    """`#` header lines (system, baseline, FLOPs per step, warnings), then one row per target."""
    document = comparison_document(comparison)
    rows = [{key: _cell(value) for key, value in row.items()} for row in document["rows"]]
    header = [f"Device Lab comparison, {document['exported_at']}, baseline: {document['baseline']}"]
    header += [f"{key}: {_cell(value)}" for key, value in document["system"].items()]
    if comparison.flops_per_step is not None:
        header.append(f"FLOPs per training step: {comparison.flops_per_step:.6g} ({comparison.flops_method})")
    header += document["ceilings"]
    header += [f"warning: {warning}" for warning in comparison.warnings]
    with open(path, "w", newline="", encoding="utf-8") as file:
        file.write("".join(f"# {line}\n" for line in header))
        writer = csv.DictWriter(file, fieldnames=list(rows[0]) if rows else ["label"])
        writer.writeheader()
        writer.writerows(rows)


def _system(comparison: Comparison) -> dict[str, Any]:
    return system_info([StoredRun(index, row.label, "", row.result) for index, row in enumerate(comparison.rows)])


def _cell(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return "; ".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return value
