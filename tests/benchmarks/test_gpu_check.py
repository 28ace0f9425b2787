"""benchmarks/gpu_check.py keeps working where there is no GPU, and keeps TensorFlow and Qt out of everything it runs.

The GPU machine it is written for has neither TensorFlow nor Qt: `without_tf_qt/sitecustomize.py`
on PYTHONPATH makes a Python process (and the app's children of it) run as if they were not
installed. The CPU dry run is the test of the script; the GPU figures it summarises are checked
here from `FakeNvml` (the project's fake NVML: no GPU is here), named as such.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import gpu_check
from core.config import RunConfig
from core.machine.gpu import DriverGpu
from core.machine.gpu_sampler import GpuSampler
from core.results import StepRecord
from core.training.callbacks import RunContext
from tests.fakes.fake_nvml import GIB, FakeGpu, FakeNvml

ROOT = Path(__file__).resolve().parents[2]
WITHOUT_TF_QT = Path(__file__).resolve().parent / "without_tf_qt"
CHILD_MODULES = (
    # what the script's children run: a backend job, a device listing, a max-batch probe (`python -m ...`)
    "core.backends.child_job",
    "core.backends.fit_job",
    "core.backends.job_setup",
    "core.backends.job_data",
    "core.backends.step_flops",
    "core.backends.devices_child",
    "core.tuning.max_batch_probe",
    "core.tuning.backend_probe",
)


def env_without_tf_qt() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(WITHOUT_TF_QT), env.get("PYTHONPATH", "")) if p)
    return env


def core_modules_of(path: Path) -> list[str]:
    """Every `core` module the file imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "core":
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "core")
    return sorted(found)


def test_the_check_and_every_core_module_it_uses_import_without_tensorflow_and_qt() -> None:
    modules = core_modules_of(ROOT / "benchmarks" / "gpu_check.py")
    assert {"core.jobs", "core.machine.gpu", "core.machine.gpu_sampler", "core.tuning.max_batch"} <= set(modules)
    script = (
        "import importlib, importlib.util, json, sys\n"
        "refused = [n for n in ('tensorflow', 'PySide6') if importlib.util.find_spec(n) is not None]\n"
        "assert not refused, f'not refused: {refused}'\n"
        "import benchmarks.gpu_check\n"
        f"for name in {[*modules, *CHILD_MODULES]!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.partition('.')[0] in ('tensorflow', 'PySide6', 'jax', 'torch'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env_without_tf_qt(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []  # nor JAX or PyTorch: they load in the children only


def test_tensorflow_is_refused_where_the_sitecustomize_is_on_the_path() -> None:
    script = "import tensorflow"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env_without_tf_qt(), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "No module named 'tensorflow'" in done.stderr


# --- the figures of a GPU, from the project's FakeNvml ---------------------------------------------------


def wait_for_readings(sampler: GpuSampler, count: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(sampler.readings()) < count:
        assert time.monotonic() < deadline, f"only {len(sampler.readings())} readings after {timeout_s} s"
        time.sleep(0.02)


def test_nvidia_smi_rows_parse_and_agree_with_the_apps_reading_within_the_stated_tolerance() -> None:
    row = gpu_check.parse_smi_row("NVIDIA H100 80GB HBM3, 81559, 1, 81004, 0, 31, [N/A], 345")
    assert row == {
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81559.0,
        "memory_used_mib": 1.0,
        "memory_free_mib": 81004.0,
        "utilization_gpu_pct": 0.0,
        "temperature_c": 31.0,
        "power_draw_w": None,
        "clocks_sm_mhz": 345.0,
    }
    total = 81559 * 2**20
    used, free = 555 * 2**20 + 12345, 81004 * 2**20
    gpu = DriverGpu("0000:41:00.0", "NVIDIA H100 80GB HBM3", (total, used, free), "9.0", {})
    reserved = 554 * 2**20
    compared = gpu_check._compare_gpu(0, gpu, gpu, row, reserved)
    agree = compared["agree"]
    assert agree["name"] and agree["total"] and agree["free"] and not agree["used"] and not agree["all"]
    assert "reserves 554 MiB" in agree["why"]  # the app's used counts what NVML's v2 info calls reserved; nvidia-smi's does not
    moved = DriverGpu(gpu.bus_id, gpu.name, (total, 2**20, free), "9.0", {})  # the app reading what nvidia-smi reads
    assert gpu_check._compare_gpu(0, moved, moved, row, reserved)["agree"]["all"]
    assert not gpu_check._compare_gpu(0, moved, moved, row | {"memory_total_mib": 81560.0}, reserved)["agree"]["total"]


def test_the_sampler_and_conditions_parts_summarise_what_was_read_during_a_job_on_a_fake_gpu() -> None:
    gpu = FakeGpu(utilization=lambda reading: 0.0 if reading < 2 else 87.0, used=10 * GIB, throttle_reasons=0x4)
    nvml = FakeNvml(gpu)
    handles = [("GPU:0", gpu)]
    watch = gpu_check.JobWatch(nvml, handles)
    sampler = GpuSampler(nvml, [gpu])
    power = gpu_check.PowerClock(nvml, gpu, sampler.interval_s)  # FakeNvml has no power query: read as None
    context = RunContext(RunConfig(model="mlp", backend="jax", strategy="one-device", devices=("GPU:0",)), 3, 1, ("GPU:0",), None)
    sampler.start()
    power.start()
    watch.on_run_start(context)
    wait_for_readings(sampler, 4)
    watch.on_steps([StepRecord(1, 2.3, 0.3, True)])
    wait_for_readings(sampler, 7)
    watch.on_steps([StepRecord(2, 2.2, 0.01, False), StepRecord(3, 2.1, 0.01, False)])
    sampler.stop()
    power.stop()
    row = {"backend": "jax", "model": "mlp", "device": "GPU:0", "status": "completed", "steps_done": 3}
    shared = gpu_check.Shared(deadline=time.monotonic() + 60)
    shared.sampled.append(gpu_check.sampled_figures(row, watch, sampler, power))
    figures = shared.sampled[0]
    assert figures["samples_in_run"] >= 5 and figures["samples_in_steady_state"] >= 2 and figures["job_steps"] == 3
    assert figures["utilisation_max"] == 87.0 and figures["memory_used_max_bytes"] == 10 * GIB
    assert figures["power_w_max"] is None and figures["sm_clock_mhz_max"] == 1755.0
    part = gpu_check.sampler_part(gpu_check.Options(), shared, {}, "")
    assert part["check"]["passed"] and part["utilisation_max"] == 87.0 and part["gpu_busy_during_cpu_jobs"] == []
    assert gpu_check.sampler_part(gpu_check.Options(), shared, {}, "no NVIDIA driver")["skipped"].endswith("no NVIDIA driver")
    idle = dict(figures, utilisation_max=0.0)
    assert not gpu_check.sampler_part(gpu_check.Options(), gpu_check.Shared(0, sampled=[idle]), {}, "")["check"]["passed"]

    other = os.getppid()  # a process that is not this one nor its child: "another process on the GPU"
    gpu.processes[other] = GIB
    watch.during = None
    watch.on_steps([StepRecord(4, 2.0, 0.01, False)])
    shared.conditions.append({**row, "run_record": {"gpus": [], "contended": False}, "during_first_steady_call": watch.during})
    conditions = gpu_check.conditions_part(gpu_check.Options(), shared, {})
    assert conditions["other_processes_on_gpu"] == [other]
    assert conditions["throttle_reasons"] == ["software power cap"]


# --- the dry run -------------------------------------------------------------------------------------------


def no_nvidia_driver_here() -> bool:
    return shutil.which("nvidia-smi") is None and not gpu_check._nvml_library_present()


@pytest.mark.slow
@pytest.mark.heavy  # the whole GPU check on the CPU; the import test stays in the default tier
def test_the_cpu_dry_run_writes_every_part_with_figures_or_a_reason_and_a_jax_job_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "dry.json"
    command = [sys.executable, "benchmarks/gpu_check.py", "--cpu-only", "--models", "mlp", "--steps", "20", "--out", str(out)]
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env_without_tf_qt(), capture_output=True, text=True, timeout=240)
    seconds = time.monotonic() - began
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    parts = json.loads(out.read_text())
    assert list(parts) == list(gpu_check.PARTS)
    for name, part in parts.items():
        assert "error" not in part, f"{name}: {part['error']}"
        reason = part.get("skipped")
        assert (isinstance(reason, str) and reason) or len(set(part) - {"seconds", "skipped"}) >= 2, (
            f"{name} has neither figures nor a reason"
        )
    [jax_cpu] = [r for r in parts["jobs"]["runs"] if r.get("backend") == "jax" and r.get("device") == "CPU:0" and r.get("model") == "mlp"]
    assert jax_cpu["status"] == "completed" and jax_cpu["samples_per_s"] > 0 and jax_cpu["steps_done"] == 20
    assert jax_cpu["tensorflow_imported"] is False
    assert not any(r.get("device") == "GPU:0" for r in parts["jobs"]["runs"])
    assert parts["ceilings"]["ceilings"]["float32 default"]["ceiling_flops"] > 0
    assert parts["conditions"]["jobs"][0]["run_record"]["window"]  # the run's own conditions record
    if no_nvidia_driver_here():
        assert "no NVIDIA driver" in parts["inventory"]["skipped"]
    assert "jobs:   jax mlp CPU:0: completed" in done.stdout and f"wrote {out}" in done.stdout
    assert seconds < 120, f"the dry run took {seconds:.0f} s"
