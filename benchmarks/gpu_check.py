"""gpu_check: the app's own commands on a real GPU, each checked, in one call of at most 9 minutes.

    python benchmarks/gpu_check.py --out DIR              # a machine with an NVIDIA GPU and JAX (PyTorch too, if there)
    python benchmarks/gpu_check.py --dry-run --out DIR    # anywhere: the same commands on jax:CPU:0, smaller (CI runs it)

The GPU machines this project is lent have JAX and PyTorch with CUDA but no
TensorFlow, no Qt and no Keras (`gpu_wheels.sh` fetches Keras and what it
lacks), so every command runs on the CLI's TensorFlow-free path, as a user's
would there: `main.py devices --json` beside `nvidia-smi`, `peaks`, `run` of the
CNN on the GPU with its verdict, `compare` GPU against CPU in interleaved rounds,
a `sweep` of batch sizes on the digits with time to loss, `autotune` within a
budget, `max-batch` under a memory cap, a PyTorch `compare` where PyTorch is
installed, and `history --json`. Each command is a child process with a time
limit; its stdout (JSON), the end of its stderr and its exit code go to
DIR/NAME.json, and one check per command to DIR/summary.json and DIR/summary.md:
figures agree with nvidia-smi, a speed-up has its interval, a verdict names a
bound or says why not, autotune adopts only what its rounds showed faster; the runs'
energy per sample where a counter exists (NVML on the GPU, powercap on the host).
The history of the check's runs is DIR/history (DEVICE_LAB_DATA_DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = 540.0
"""The whole check: the GPU machine's command may run 10 minutes, and leaves time to read the summary."""
MIN_COMMAND_S = 30.0
"""A command is not started with less than this left: it would be cut off before it says anything."""
STDERR_TAIL = 3000
MIB = 2**20

Check = Callable[[Any, "Plan"], tuple[bool, str]]


@dataclass(frozen=True)
class Plan:
    """Where the check's jobs run: the GPU and its JAX/PyTorch names, or the CPU in a dry run."""

    dry_run: bool
    device: str  # "GPU:0", or "CPU:0" in a dry run
    torch: bool  # PyTorch is installed: its compare runs

    @property
    def jax_device(self) -> str:
        return f"jax:{self.device}"


@dataclass(frozen=True)
class Command:
    name: str
    argv: list[str]
    limit_s: float
    check: Check


def commands(plan: Plan) -> list[Command]:
    """The commands in the order they run, each with its time limit (seconds) and its check."""
    small = plan.dry_run
    device, jax_device = plan.device, plan.jax_device
    listed = [
        Command("devices", ["devices", "--json"], 60, check_devices),
        Command("peaks", ["peaks", "--json", "--remeasure"], 120, check_peaks),
        Command(
            "run",
            ["run", "--model", "cnn", "--backend", "jax", "--strategy", "one-device", "--devices", device]
            + ["--steps", "60" if small else "300", "--json"],
            150,
            check_run,
        ),
        Command(
            "compare",
            # the dry run compares the MLP on jax:CPU:0 against itself (the A/A); the GPU check the CNN, GPU against CPU
            [
                "compare",
                "--model",
                "mlp" if small else "cnn",
                "--targets",
                f"{jax_device};jax:CPU:0",
                "--steps",
                "100" if small else "300",
                "--json",
            ],
            150,
            check_compare,
        ),
        Command(
            "sweep",
            ["sweep", "--model", "mlp", "--backend", "jax", "--target", device, "--data", "digits", "--steps", "200"]
            + ["--batch-sizes", "32,256" if small else "64,512,4096", "--json"],
            120,
            check_sweep,
        ),
        Command(
            "autotune",
            ["autotune", "--model", "mlp", "--backend", "jax", "--target", device, "--budget-s", "40", "--json"],
            90,
            check_autotune,
        ),
        Command(
            "max-batch",
            # the GPU's search is the CNN's: on an H200 the MLP's peak grew 1.6 KiB a sample, so 4 GiB lies near a million, past
            # what a minute of 10-second probes reaches (2026-11-28); the CNN's lay at 5,410 on an H100 (6 probes, 114 s). The dry
            # run's MLP under 1 GiB takes 16 probes of about 3 s on 2 quiet cores; beside CI's other worker 60 s ran out (2026-11-28)
            ["max-batch", "--model", "mlp" if small else "cnn", "--backend", "jax", "--target", device]
            + ["--memory-limit", "1GiB" if small else "4GiB", "--budget-s", "130", "--json"],
            150,
            check_max_batch,
        ),
    ]
    if plan.torch:
        torch_device = f"torch:{device}"
        listed.append(
            Command(
                "compare-torch",
                ["compare", "--model", "cnn", "--targets", f"{torch_device};torch:CPU:0", "--steps", "60" if small else "200", "--json"],
                150,
                check_compare,
            )
        )
    listed.append(Command("history", ["history", "--json"], 30, check_history))
    return listed


def run_command(command: Command, out: Path, env: dict[str, str], limit_s: float) -> dict[str, Any]:
    """Run `main.py ARGV` under `limit_s` (`run_main`), also in OUT/NAME.json with the command line."""
    record = {"command": "main.py " + " ".join(command.argv), **run_main(command.argv, env, limit_s)}
    (out / f"{command.name}.json").write_text(json.dumps(record, indent=1))
    return record


@dataclass(frozen=True)
class Limited:
    """A child process run under a time limit: its exit code (None: stopped at `limit_s`), what it printed, its seconds."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    limit_s: float

    @property
    def ended(self) -> str:
        """ "exit 0", or "stopped at its limit of 120 s"."""
        return f"exit {self.returncode}" if self.returncode is not None else f"stopped at its limit of {self.limit_s:.0f} s"


def run_limited(command: Sequence[str], limit_s: float, cwd: Path | str = ROOT, env: dict[str, str] | None = None) -> Limited:
    """`command` in a child process under `limit_s`, what it printed kept even when it is stopped at the limit."""
    start = time.monotonic()
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, env=env, timeout=limit_s, cwd=cwd)
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        returncode = None
        stdout = (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        stderr = (expired.stderr or b"").decode() if isinstance(expired.stderr, bytes) else expired.stderr or ""
    return Limited(returncode, stdout, stderr, round(time.monotonic() - start, 1), limit_s)


def run_main(argv: Sequence[str], env: dict[str, str] | None, limit_s: float) -> dict[str, Any]:
    """`main.py ARGV` in a child process under `limit_s`: its JSON (or its stdout where none), exit code, seconds, stderr's end."""
    done = run_limited([sys.executable, str(ROOT / "main.py"), *argv], limit_s, env=env)
    stderr = done.stderr + (f"\n({done.ended})" if done.returncode is None else "")
    try:
        document: Any = json.loads(done.stdout) if done.stdout.strip() else None
    except ValueError:
        document = None
    return {
        "returncode": done.returncode,
        "seconds": done.seconds,
        "json": document,
        "stdout": "" if document is not None else done.stdout[-STDERR_TAIL:],
        "stderr_tail": stderr[-STDERR_TAIL:],
    }


def check_devices(document: Any, plan: Plan) -> tuple[bool, str]:
    """The GPUs the app lists agree with nvidia-smi: the same names and memory totals (within 1 MiB of rounding)."""
    if not isinstance(document, dict):
        return False, "no JSON"
    gpus = [row for row in document["devices"] if row["kind"] == "GPU"]
    smi = read_nvidia_smi()
    if plan.dry_run and smi is None:
        return True, f"{len(document['devices'])} device(s), no GPU expected and none listed" if not gpus else "GPUs listed"
    if smi is None:
        return False, "nvidia-smi could not be read"
    if len(gpus) != len(smi):
        return False, f"the app lists {len(gpus)} GPU(s), nvidia-smi {len(smi)}"
    for row, (name, total_mib) in zip(gpus, smi, strict=True):
        if row["name"] != name or row["memory_total"] is None or abs(row["memory_total"] / MIB - total_mib) > 1:
            return False, f"{row['name']} {row['memory_total']} B against nvidia-smi's {name} {total_mib} MiB"
    return True, ", ".join(f"{name}: {total_mib:,.0f} MiB, as nvidia-smi says" for name, total_mib in smi)


def read_nvidia_smi() -> list[tuple[str, float]] | None:
    """(name, total MiB) of each GPU from nvidia-smi; None where it is missing or fails."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        text = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = []
    for line in text.strip().splitlines():
        name, _, total = line.rpartition(",")
        rows.append((name.strip(), float(total)))
    return rows


def check_peaks(document: Any, plan: Plan) -> tuple[bool, str]:
    """The check's device was measured: a float32 matmul figure and a bandwidth."""
    if not isinstance(document, dict):
        return False, "no JSON"
    measured = {row["device"]: row for row in document["devices"]}
    row = measured.get(plan.device)
    if row is None or not row["matmul_flops"].get("float32"):
        return False, f"{plan.device} not measured ({document.get('error') or 'no figure'})"
    figures = ", ".join(f"{precision} {value / 1e12:.2f} TFLOP/s" for precision, value in row["matmul_flops"].items())
    return True, f"{row['name']}: {figures}; bandwidth {(row['bandwidth_bytes_per_s'] or 0) / 1e9:.0f} GB/s; usable: {document['usable']}"


def check_run(document: Any, plan: Plan) -> tuple[bool, str]:
    """The run completed on the device, and its verdict names a bound (with % of the measured ceiling) or says why not."""
    if not isinstance(document, dict) or document.get("status") != "completed":
        return False, f"not completed: {document.get('message') if isinstance(document, dict) else 'no JSON'}"
    bound, advice = document.get("bound"), document.get("advice") or ""
    if not bound:
        return False, "no verdict"
    percent = document.get("pct_of_measured_peak")
    share = f", {percent:.1f}% of the measured ceiling" if isinstance(percent, (int, float)) else ", no measured ceiling"
    said = bound != "unknown" or bool(document.get("bound_evidence"))
    return said, (
        f"{document['samples_per_s']:,.0f} samples/s; {bound}-bound{share}; {document.get('bound_evidence', '')[:160]}; "
        f"advice: {advice[:160]}; {energy_words(document)}"
    )


def energy_words(document: dict[str, Any]) -> str:
    """A run's measured energy (NVML on a GPU, powercap on the CPU), or why it was not measured."""
    energy = document.get("energy")
    if not energy:
        return f"energy not measured ({document.get('energy_reason') or 'no counter'})"
    return f"{energy['joules_per_sample'] * 1000:.3g} mJ/sample at {energy.get('watts') or 0:.0f} W ({', '.join(energy['counters'])})"


def check_compare(document: Any, plan: Plan) -> tuple[bool, str]:
    """Both rows completed in at least 6 interleaved rounds, and the speed-up has its interval."""
    if not isinstance(document, list) or len(document) != 2:
        return False, "no JSON rows"
    first, second = document
    if any(row["status"] != "completed" for row in document):
        return False, "; ".join(f"{row['label']}: {row['status']} {row.get('message', '')}" for row in document)
    if min(row["rounds"] for row in document) < 6:
        return False, f"rounds {[row['rounds'] for row in document]}: fewer than 6"
    interval = second.get("speedup_ci")
    if not interval:
        return False, "no interval for the speed-up"
    verdict = "beyond noise" if second.get("beyond_noise") else "not beyond noise"
    return True, (
        f"{first['label']} {first['samples_per_s']:,.0f} samples/s, {second['label']} {second['samples_per_s']:,.0f}: "
        f"{second['label']} {second['speedup']:.2f}x (95% {interval[0]:.2f}-{interval[1]:.2f}, {verdict}, {second['rounds']} rounds); "
        f"energy: {first['label']} {energy_words(first)}, {second['label']} {energy_words(second)}"
    )


def check_sweep(document: Any, plan: Plan) -> tuple[bool, str]:
    """Every point ran; a star goes only to a point better beyond noise, else the sweep says no point is."""
    if not isinstance(document, dict):
        return False, "no JSON"
    points = document.get("rows") or []
    failed = [point for point in points if point.get("status") != "completed"]
    if not points or failed:
        return False, f"{len(failed)} of {len(points)} points did not complete"
    if min(point["rounds"] for point in points) < 6:
        return False, f"rounds {[point['rounds'] for point in points]}: fewer than 6"
    best, beyond = document.get("best"), document.get("best_beyond_noise")
    rates = ", ".join(
        f"batch {p['settings'].get('batch_size')}: {p['samples_per_s']:,.0f}/s, {p.get('time_to_target_steady_s') or 0:.2f} s to loss"
        for p in points
    )
    return True, f"{rates}; best: {best} (beyond noise: {beyond}); {(document.get('best_why') or '')[:200]}"


def check_autotune(document: Any, plan: Plan) -> tuple[bool, str]:
    """A setting other than the start is adopted only where its rounds showed it faster beyond noise."""
    if not isinstance(document, dict):
        return False, "no JSON"
    changes = document.get("changes") or {}
    low = (document.get("gain_ci") or [None])[0]
    if changes and not (document.get("beyond_noise") and isinstance(low, (int, float)) and low > 1):
        return False, f"adopted {changes} with a gain interval starting at {low}"
    if not changes:
        ratio, interval = document.get("rival_ratio"), document.get("rival_ci")
        start = document.get("start") or {}
        rival = {key: value for key, value in (document.get("rival") or {}).items() if start.get(key) != value}  # what differs
        against = f"; against {rival}: {ratio:.2f}x (95% {interval[0]:.2f}-{interval[1]:.2f})" if rival and ratio and interval else ""
        return True, f"kept the start: {document.get('samples_per_s') or 0:,.0f} samples/s ({document.get('rounds')} rounds){against}"
    return True, (
        f"adopted {changes}: {document.get('samples_per_s') or 0:,.0f} samples/s, gain {document.get('gain') or 1:.2f}x "
        f"(interval {document.get('gain_ci')}, {document.get('rounds')} rounds)"
    )


def check_max_batch(document: Any, plan: Plan) -> tuple[bool, str]:
    """A largest batch was found under the cap."""
    if not isinstance(document, dict) or not document.get("max_batch"):
        return False, f"no largest batch: {document.get('message') if isinstance(document, dict) else 'no JSON'}"
    return True, f"largest batch {document['max_batch']:,} ({len(document.get('probes') or [])} probes)"


def check_history(document: Any, plan: Plan) -> tuple[bool, str]:
    """The history holds the check's runs."""
    if not isinstance(document, list) or not document:
        return False, "no runs in the history"
    return True, f"{len(document)} runs recorded"


def summary_markdown(plan: Plan, results: Sequence[dict[str, Any]], machine: str) -> str:
    lines = [
        f"# GPU check{' (dry run on the CPU)' if plan.dry_run else ''}: {machine}",
        "",
        "| command | exit | seconds | check | what it showed |",
        "|---|---|---|---|---|",
    ]
    for result in results:
        mark = "pass" if result["passed"] else "FAIL"
        lines.append(f"| `{result['command']}` | {result['returncode']} | {result['seconds']} | {mark} | {result['why']} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for each command's JSON and the summary")
    parser.add_argument("--dry-run", action="store_true", help="run on jax:CPU:0 with smaller jobs (no GPU needed)")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S)
    options = parser.parse_args(argv)
    out: Path = options.out
    out.mkdir(parents=True, exist_ok=True)
    plan = Plan(options.dry_run, "CPU:0" if options.dry_run else "GPU:0", torch=find_spec("torch") is not None)
    env = {**os.environ, "DEVICE_LAB_DATA_DIR": str(out / "history"), "PYTHONUNBUFFERED": "1"}
    deadline = time.monotonic() + options.budget_s
    results = []
    for command in commands(plan):
        left = deadline - time.monotonic()
        if left < MIN_COMMAND_S:
            record: dict[str, Any] = {"command": "main.py " + " ".join(command.argv), "returncode": None, "seconds": 0, "json": None}
            passed, why = False, f"not run: {left:.0f} s of the budget left"
        else:
            record = run_command(command, out, env, min(command.limit_s, left))
            try:
                passed, why = command.check(record["json"], plan)
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                passed, why = False, f"unexpected JSON ({type(exc).__name__}: {exc})"
            if record["returncode"] != 0:
                passed, why = False, f"exit {record['returncode']}: {record['stderr_tail'].strip().splitlines()[-1:] or why}"
        print(f"{'pass' if passed else 'FAIL'} {command.name}: {why}", flush=True)
        results.append({**{k: record[k] for k in ("command", "returncode", "seconds")}, "name": command.name, "passed": passed, "why": why})
    machine = ", ".join(name for name, _ in read_nvidia_smi() or []) or "no GPU"
    summary = {"dry_run": plan.dry_run, "machine": machine, "date": time.strftime("%Y-%m-%d"), "passed": all(r["passed"] for r in results)}
    (out / "summary.json").write_text(json.dumps({**summary, "commands": results}, indent=1))
    (out / "summary.md").write_text(summary_markdown(plan, results, machine))
    print(f"summary: {out / 'summary.md'}; {'all passed' if summary['passed'] else 'some FAILED'}")
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
