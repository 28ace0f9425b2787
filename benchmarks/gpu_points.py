"""gpu_points: new GPU measurements for the projection's test set (issue 41), recorded through `main.py run`.

    python benchmarks/gpu_points.py --out DIR --budget-s 170             # on the lent GPU, after gpu_check.py
    python benchmarks/gpu_points.py --out DIR --device CPU:0 --steps 20  # anywhere: the same jobs on the CPU
    python benchmarks/gpu_points.py --out DIR --points jax:cnn:256,torch:mlp:64  # only these

Each point is one `main.py run --model M --backend B --strategy one-device --devices GPU:0
--batch-size N --json --no-verdict --no-save` in a child process with a time limit, synthetic
data, float32, one step per call: the settings of the points `core.projection.calibration` holds.
The points run in order of what they add until the budget runs out: the JAX models at batch 64
first (the H100's batch: their median step was 1.6-5.0 ms there on 2026-11-27, the CNN's 1.6 ms
on an H200 on 2026-11-28 — the machine's host or the app's version? `then_version.py` runs that
day's version beside them), then the recurrent files of benchmarks/recurrent/ (a GRU over 32 and
64 tokens, a JAX scan trip by trip; an LSTM over 64, cuDNN's on a GPU: what a loop's trip costs
against `core.projection.step_costs`' loop kernels), then 4,096 (where the
device's own rate shows; one batch an epoch of the 4,096 synthetic examples, so every step also
carries Keras's once-an-epoch work, the projection's `epoch_s`: the MLP's digits took 3.6 ms a
step at that batch, 1.1 at 64), then PyTorch, then 1,024 and 256 again (run-to-run spread). DIR/points.json holds every job's JSON (or
why none), the host probe's (HOST_PROBE, first), the machine's nvidia-smi line and the date;
`calibration.py` cites it point by point. The last `--bare-s` seconds of the budget go to
`benchmarks/bare_steps.py` over the JAX points that ran (one child process): each one's compiled
step alone on the device, DIR/points.json's `bare_steps`, to tell the device's share of a step
from the host's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: benchmarks.gpu_check runs each job as the GPU check does

from benchmarks.gpu_check import run_limited, run_main  # noqa: E402

MIN_JOB_S = 25.0
"""A job is not started with less than this left: it would be cut off while compiling."""
MIN_BARE_S = 15.0
"""`bare_steps` is not started with less than this left (JAX's start and the first compile)."""

PLAN: tuple[tuple[str, str, int], ...] = (
    ("jax", "mlp", 64),
    ("jax", "resnet", 64),
    ("jax", "transformer", 64),
    ("jax", "benchmarks/recurrent/gru_32.py", 64),
    ("jax", "benchmarks/recurrent/gru_64.py", 64),
    ("jax", "benchmarks/recurrent/lstm_64.py", 64),
    ("jax", "mlp", 4096),
    ("jax", "resnet", 4096),
    ("jax", "transformer", 4096),
    ("torch", "mlp", 64),
    ("torch", "resnet", 256),
    ("jax", "cnn", 1024),
    ("jax", "resnet", 1024),
    ("jax", "transformer", 1024),
    ("jax", "mlp", 1024),
    ("jax", "cnn", 256),
    ("torch", "cnn", 256),
)
"""(backend, sample model or model file, batch) in the order they run."""
HOST_PROBE = ("jax", "mlp", 8)
"""Run first on the host's CPU: a step of almost no work, so its time is Keras's and JAX's fixed cost per step on that
machine's CPU, which a projection's host term could be read from (the user's machine can time the same)."""


def parse_points(text: str) -> tuple[tuple[str, str, int], ...]:
    """ "jax:cnn:256,torch:mlp:64" -> (("jax", "cnn", 256), ("torch", "mlp", 64))."""
    points = []
    for item in text.split(","):
        backend, model, batch = item.split(":")
        points.append((backend, model, int(batch)))
    return tuple(points)


def job_argv(backend: str, model: str, batch: int, device: str, steps: int) -> list[str]:
    """`main.py run`'s arguments for one point; a `.py` model file (the recurrent points, this repository's) trusted."""
    return [
        *("run", "--model", model, "--backend", backend, "--strategy", "one-device", "--devices", device),
        *("--batch-size", str(batch), "--steps", str(steps), "--json", "--no-verdict", "--no-save"),
        *(["--trust"] if model.endswith(".py") else []),
    ]


def nvidia_smi_line() -> str:
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "no nvidia-smi"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", default="GPU:0")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--budget-s", type=float, default=170.0)
    parser.add_argument("--points", type=parse_points, default=PLAN, help="BACKEND:MODEL:BATCH,... (default: the plan)")
    parser.add_argument("--no-host-probe", action="store_true", help="skip the host's own step time (HOST_PROBE) first")
    parser.add_argument("--bare-s", type=float, default=40.0, help="seconds of the budget kept for bare_steps at the end (0: none)")
    options = parser.parse_args(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    end = time.monotonic() + options.budget_s
    deadline = end - options.bare_s
    host_probe = None
    if not options.no_host_probe:
        host_probe = run_main(job_argv(*HOST_PROBE, "CPU:0", options.steps), None, min(60.0, options.budget_s / 4))
        rate = (host_probe["json"] or {}).get("samples_per_s")
        print(f"host probe: {f'{HOST_PROBE[2] / rate * 1e3:.3f} ms a step' if rate else 'no figure'}", flush=True)
    points = []
    for backend, model, batch in options.points:
        left = deadline - time.monotonic()
        argv_ = job_argv(backend, model, batch, options.device, options.steps)
        if left < MIN_JOB_S:
            points.append(
                {
                    "backend": backend,
                    "model": model,
                    "batch": batch,
                    "command": "main.py " + " ".join(argv_),
                    "skipped": f"{left:.0f} s left",
                }
            )
            continue
        record = run_main(argv_, None, min(90.0, left))
        rate = (record["json"] or {}).get("samples_per_s")
        print(f"{backend} {model} b{batch}: {f'{rate:,.0f} samples/s' if rate else 'no figure'} ({record['seconds']} s)", flush=True)
        points.append({"backend": backend, "model": model, "batch": batch, "command": "main.py " + " ".join(argv_), **record})
    bare = [
        (point["model"], point["batch"])
        for point in points
        if point["backend"] == "jax" and point.get("returncode") == 0 and not point["model"].endswith(".py")  # sample models only
    ]
    document = {
        "machine": nvidia_smi_line(),
        "device": options.device,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host_probe": host_probe,
        "points": points,
        "bare_steps": bare_steps(list(dict.fromkeys(bare)), end - time.monotonic(), options.device) if options.bare_s > 0 else None,
    }
    (options.out / "points.json").write_text(json.dumps(document, indent=1))
    return 0


def bare_steps(points: list[tuple[str, int]], left_s: float, device: str) -> dict[str, Any]:
    """`benchmarks/bare_steps.py` over `points` in one child process within `left_s`, on the CPU where `device` is one: the points
    it measured before its limit."""
    if not points or left_s < MIN_BARE_S:
        return {"points": [], "skipped": f"{len(points)} JAX points, {left_s:.0f} s left"}
    command = [sys.executable, str(ROOT / "benchmarks" / "bare_steps.py"), "--points", ",".join(f"{m}:{b}" for m, b in points)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"} if device.startswith("CPU") else None
    done = run_limited(command, left_s, env=env)
    measured = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    for point in measured:
        print(f"bare jax {point['model']} b{point['batch']}: {point.get('step_ms', 0):.3f} ms a step {point.get('error', '')}", flush=True)
    return {"points": measured, "ended": done.ended, "seconds": done.seconds, "stderr_tail": done.stderr[-2000:]}


if __name__ == "__main__":
    sys.exit(main())
