"""Run Device Lab's benchmarks and print measured figure, target and pass/fail for each.

    python benchmarks/run.py                      # all of them (a few minutes on 2 cores)
    python benchmarks/run.py truth startup        # some of them
    python benchmarks/run.py --quick              # fewer repeats and steps: a smoke test, not a result
    python benchmarks/run.py --json results.json  # also save the table and the machine
    python benchmarks/run.py --markdown           # end with the table in Markdown (for the README)

Exit code 0 when every benchmark met its target, 1 otherwise. Run on an idle
machine: other load shows up as noise in every figure (the load average is printed).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness  # noqa: E402

BENCHMARKS = (
    "engine_vs_fit",
    "truth",
    "gui_overhead",
    "startup",
    "responsiveness",
    "plot_scale",
    "stop_latency",
    "soak",
    "crash_loss",
    "peaks_agreement",
    "hook_overhead",
    "autotune_gain",
    "autotune_budget",
    "max_batch",
    "contention",
    "backend_overhead",
    "aa_drift",
    "ab_power",
    "rounds_cost",
    "time_to_loss",
    "projection_error",
    "worker_threads",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all): " + ", ".join(BENCHMARKS))
    parser.add_argument("--quick", action="store_true", help="fewer repeats and steps, for a smoke test")
    parser.add_argument("--json", metavar="FILE", help="save the machine and the table as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the final table as Markdown")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")

    machine = harness.machine_info()
    print(_machine_text(machine) + (" [--quick: smoke test, not a result]" if args.quick else ""), flush=True)
    rows: list[harness.Result] = []
    for name in args.names or BENCHMARKS:
        start = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        try:
            new_rows = module.run(args.quick)
        except Exception as exc:  # one broken benchmark must not hide the others' results
            if not isinstance(exc, harness.BenchmarkError):
                traceback.print_exc()
            new_rows = [harness.Result(name, None, "", module.TARGET, None, str(exc))]
        for row in new_rows:
            print(_row_text(row), flush=True)
        print(f"  ({name}: {time.perf_counter() - start:.0f} s)", flush=True)
        rows.extend(new_rows)

    machine["load_average_after"] = harness.machine_info()["load_average"]
    print("\n" + (_markdown(rows, machine) if args.markdown else _table(rows)))
    print(f"load average before {machine['load_average']}, after {machine['load_average_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "quick": args.quick, "results": [r.to_dict() for r in rows]}, indent=2))
    return 0 if all(r.passed for r in rows) else 1


def _machine_text(m: dict) -> str:
    return (
        f"{m['cpu']}, {m['cores_physical']} cores / {m['cores_logical']} threads, {m['memory_gib']} GiB | "
        f"TF {m['tensorflow']}, Keras {m['keras']}, PySide6 {m['pyside6']}, pyqtgraph {m['pyqtgraph']}, "
        f"Python {m['python']} | {m['platform']} | {m['date']} | load {m['load_average']}"
    )


def _row_text(row: harness.Result) -> str:
    return f"{row.verdict():5}  {row.name}: {row.measured_text()} (target {row.target})  {row.detail}"


def _cells(rows: list[harness.Result]) -> list[tuple[str, ...]]:
    return [("benchmark", "measured", "target", "result")] + [(r.name, r.measured_text(), r.target, r.verdict()) for r in rows]


def _table(rows: list[harness.Result]) -> str:
    cells = _cells(rows)
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def _markdown(rows: list[harness.Result], machine: dict) -> str:
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in _cells(rows)]
    lines.insert(1, "|---|---|---|---|")
    return "\n".join(lines) + "\n\nMeasured on: " + _machine_text(machine)


if __name__ == "__main__":
    sys.exit(main())
