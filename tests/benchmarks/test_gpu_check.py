"""benchmarks/gpu_check.py: the app's own commands, run where TensorFlow and Qt are not installed (as on the GPU machines).

The dry run is the test of the script: the same commands on jax:CPU:0, every one checked, in a
process tree with TensorFlow and Qt hidden (`tests/hidden_packages.py`). Its checks are tested on
the JSON the commands really wrote, and against JSON that must fail them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_check
from main import CLI_PACKAGES, WINDOW_PACKAGES
from tests.hidden_packages import env_without_tensorflow_and_qt
from tests.project_metadata import runtime_dependencies

ROOT = Path(__file__).resolve().parents[2]
DRY = gpu_check.Plan(dry_run=True, device="CPU:0", torch=False)


def test_tensorflow_and_qt_are_refused_where_the_sitecustomize_is_on_the_path() -> None:
    script = "import importlib.util as u; print([n for n in ('tensorflow', 'tf_keras', 'PySide6', 'pyqtgraph') if u.find_spec(n)])"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env_without_tensorflow_and_qt(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def test_the_plan_runs_every_command_the_issue_names_on_the_gpu_and_pytorch_where_installed() -> None:
    names = [command.name for command in gpu_check.commands(gpu_check.Plan(False, "GPU:0", torch=True))]
    assert names == ["devices", "peaks", "run", "compare", "sweep", "autotune", "max-batch", "compare-torch", "history"]
    compare = next(c for c in gpu_check.commands(gpu_check.Plan(False, "GPU:0", torch=True)) if c.name == "compare")
    assert "jax:GPU:0;jax:CPU:0" in compare.argv
    assert sum(command.limit_s for command in gpu_check.commands(gpu_check.Plan(False, "GPU:0", torch=True))) >= gpu_check.BUDGET_S


def test_a_speed_up_without_its_interval_or_rounds_fails_the_compare_check() -> None:
    row = {"label": "jax:GPU:0", "status": "completed", "samples_per_s": 10.0, "rounds": 6, "speedup": 1.0, "speedup_ci": None}
    other = {**row, "label": "jax:CPU:0", "speedup": 3.0, "speedup_ci": [2.5, 3.5], "beyond_noise": True}
    assert gpu_check.check_compare([row, other], DRY)[0]
    assert not gpu_check.check_compare([row, {**other, "speedup_ci": None}], DRY)[0]
    assert not gpu_check.check_compare([row, {**other, "rounds": 1}], DRY)[0]


def test_autotune_adopting_a_change_without_a_gain_beyond_noise_fails_its_check() -> None:
    adopted = {"changes": {"steps_per_call": 16}, "gain_ci": [1.1, 1.3], "beyond_noise": True, "gain": 1.2, "rounds": 6}
    assert gpu_check.check_autotune(adopted, DRY)[0]
    assert not gpu_check.check_autotune({**adopted, "gain_ci": [0.9, 1.3], "beyond_noise": False}, DRY)[0]
    assert gpu_check.check_autotune({**adopted, "changes": {}, "gain_ci": [0.9, 1.3], "beyond_noise": False}, DRY)[0]
    start = {"steps_per_call": 1, "precision": "off", "xla": False, "batch_size": 64}
    kept = {"changes": {}, "gain_ci": None, "beyond_noise": None, "gain": 1.0, "rounds": 6, "samples_per_s": 47614.0, "start": start}
    rival = {**start, "precision": "float16"}
    passed, why = gpu_check.check_autotune({**kept, "rival": rival, "rival_ratio": 0.84, "rival_ci": [0.77, 0.92]}, DRY)
    assert passed and why == "kept the start: 47,614 samples/s (6 rounds); against {'precision': 'float16'}: 0.84x (95% 0.77-0.92)"


@pytest.mark.slow
@pytest.mark.heavy  # every command of the check (a few minutes on 2 cores)
def test_the_dry_run_passes_every_check_with_tensorflow_and_qt_hidden(tmp_path: Path) -> None:
    out = tmp_path / "check"
    command = [sys.executable, "benchmarks/gpu_check.py", "--dry-run", "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env_without_tensorflow_and_qt(), capture_output=True, text=True, timeout=800)
    summary = json.loads((out / "summary.json").read_text())
    failed = [f"{c['name']}: {c['why']}" for c in summary["commands"] if not c["passed"]]
    assert done.returncode == 0 and summary["passed"], "\n".join(failed) + done.stderr[-2000:]
    assert [c["name"] for c in summary["commands"]] == [c.name for c in gpu_check.commands(DRY)]
    run = json.loads((out / "run.json").read_text())["json"]
    assert run["backend"] == "jax" and run["bound"] and run["flops_per_step"] > 0
    compare = json.loads((out / "compare.json").read_text())["json"]
    assert all(row["rounds"] >= 6 for row in compare)
    assert "| `main.py devices --json` |" in (out / "summary.md").read_text()


GPU_MACHINE_HAS = {
    "numpy",
    "scipy",
    "psutil",
    "py-cpuinfo",
    "nvidia-ml-py",
    "jax",
    "torch",
    "h5py",
    "ml-dtypes",
    "absl-py",
    "rich",
    "packaging",
}
"""What the lent GPU machines have installed (benchmarks/gpu_wheels.sh's docstring; scipy comes with JAX)."""
WINDOW_ONLY = {"tensorflow", *(set(WINDOW_PACKAGES.values()) - set(CLI_PACKAGES.values()))}
"""Runtime dependencies the CLI's TensorFlow-free path never imports (TensorFlow and Qt, which the dry run hides; the run form's
psygnal): TensorFlow and the packages only `main.py`'s window checks for."""


def test_every_runtime_dependency_the_cli_needs_is_on_the_gpu_machine_or_among_the_carried_wheels() -> None:
    """On an H200 (2026-11-28) every command failed at once: platformdirs was neither installed there nor carried."""
    names = runtime_dependencies()
    wheels_line = next(line for line in (ROOT / "benchmarks/gpu_wheels.sh").read_text().splitlines() if line.startswith("WHEELS=("))
    carried = {wheel.split("==")[0] for wheel in wheels_line.removeprefix("WHEELS=(").removesuffix(")").split()}
    missing = names - GPU_MACHINE_HAS - carried - WINDOW_ONLY
    assert not missing, f"add to benchmarks/gpu_wheels.sh's WHEELS: {sorted(missing)}"
