"""then_version: the H100's JAX jobs of 2026-11-27 again, run by that day's version of the app on the machine at hand (issue 41).

    bash benchmarks/gpu_wheels.sh                                           # here: also writes the archive (git archive)
    python benchmarks/then_version.py --out DIR --budget-s 180              # on the lent GPU, the archive carried in gpu_wheels/
    python benchmarks/then_version.py --out DIR --cpu-only --models mlp     # anywhere: its CPU jobs only (a dry run)

The H100's JAX points (JAX_RECORD) took 1.6-5.0 ms a step at batch 64; an H200 ran the CNN's in 1.59 ms
on 2026-11-28. Two things differed: the machine (its host and its GPU) and the app's version (THEN_COMMIT,
whose clock also synced the model's state every call). The projection's leave-one-out puts those two
H100 points outside their range, and only a measurement can say which. This runs THEN_COMMIT's own
`benchmarks/gpu_check.py` (its JAX jobs, each model on the GPU and on the host's CPU, at batch 64,
200 GPU steps, in a child process under the budget) from the archive `gpu_wheels.sh` writes with `git
archive`, and sets each job's median step beside the H100 record's: DIR/then_version.json holds that
check's JSON and the rows. The same version on the same jobs: a GPU ratio near 1 says the H100's
steps were the version's (the H200's current version ran the same jobs faster); near the H200's own
figures, the H100's machine. The CPU rows compare the two hosts' own speed on the same jobs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: run_limited comes from benchmarks.gpu_check

from benchmarks.gpu_check import run_limited  # noqa: E402

THEN_COMMIT = "c4a2cd1"
"""The version that ran the H100's GPU check (its commit recorded that check's figures)."""
ARCHIVE = ROOT / "gpu_wheels" / f"then-{THEN_COMMIT}.tar"
JAX_RECORD = ROOT / "benchmarks" / "records" / "gpu_check-2026-11-27-h100-jax.json"
MODELS = ("mlp", "cnn", "resnet", "transformer")


def write_archive(archive: Path = ARCHIVE, commit: str = THEN_COMMIT) -> Path:
    """`git archive` of `commit` into `archive` (this repository's history must hold it: not a shallow clone)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), commit], cwd=ROOT, check=True, capture_output=True, text=True)
    return archive


def run_then_check(archive: Path, out: Path, budget_s: float, models: Sequence[str], cpu_only: bool) -> dict[str, Any]:
    """That version's gpu_check (JAX jobs only, no largest-batch search) unpacked in a scratch folder, in a child under `budget_s`."""
    with tempfile.TemporaryDirectory(prefix="then-version-") as folder:
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")
        json_path = out / "then_gpu_check.json"
        command = [
            *(sys.executable, "benchmarks/gpu_check.py", "--out", str(json_path.resolve())),
            *("--backends", "jax", "--models", ",".join(models), "--max-batch-s", "0", "--budget-s", str(max(30.0, budget_s - 20))),
            *(["--cpu-only"] if cpu_only else []),
        ]
        done = run_limited(command, budget_s, cwd=folder)
    document = json.loads(json_path.read_text()) if json_path.exists() else None
    return {
        "ended": done.ended,
        "seconds": done.seconds,
        "json": document,
        "stdout_tail": done.stdout[-3000:],
        "stderr_tail": done.stderr[-2000:],
    }


def median_steps(check: dict[str, Any]) -> dict[tuple[str, str], float]:
    """(model, device) -> median step (ms) of a gpu_check JSON's completed JAX jobs."""
    runs = (check.get("jobs") or {}).get("runs") or []
    return {
        (run["model"], run["device"]): run["step_time_median_ms"]
        for run in runs
        if run.get("backend") == "jax" and run.get("status") == "completed" and run.get("step_time_median_ms")
    }


def comparison(here: dict[str, Any], record: dict[str, Any]) -> list[dict[str, Any]]:
    """Per job of the record: the median step here, on the H100's machine, and here ÷ there (None where a side has no figure)."""
    ours, theirs = median_steps(here), median_steps(record)
    rows = []
    for (model, device), there in theirs.items():
        mine = ours.get((model, device))
        rows.append(
            {
                "model": model,
                "device": device,
                "median_step_ms_here": mine,
                "median_step_ms_h100_machine": there,
                "here_over_h100_machine": None if mine is None else mine / there,
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--archive", type=Path, default=ARCHIVE, help="THEN_COMMIT's `git archive` (default: %(default)s)")
    parser.add_argument("--budget-s", type=float, default=180.0, help="the whole run (its check took 148 s on the H100)")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated sample models (default: the four)")
    parser.add_argument("--cpu-only", action="store_true", help="its CPU jobs only: a dry run anywhere")
    options = parser.parse_args(argv)
    if not options.archive.exists():
        print(f"{options.archive} is missing: write it with `bash benchmarks/gpu_wheels.sh` (or `git archive {THEN_COMMIT}`)")
        return 2
    options.out.mkdir(parents=True, exist_ok=True)
    models = [name for name in options.models.split(",") if name]
    run = run_then_check(options.archive, options.out, options.budget_s, models, options.cpu_only)
    rows = comparison(run["json"] or {}, json.loads(JAX_RECORD.read_text()))
    for row in rows:
        ratio = row["here_over_h100_machine"]
        print(
            f"{row['model']} {row['device']}: {row['median_step_ms_here'] or 0:.3f} ms here, "
            f"{row['median_step_ms_h100_machine']:.3f} on the H100's machine" + (f" ({ratio:.2f}x)" if ratio else ""),
            flush=True,
        )
    document = {"commit": THEN_COMMIT, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows, **run}
    (options.out / "then_version.json").write_text(json.dumps(document, indent=1))
    return 0 if run["json"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
