"""The CLI where TensorFlow and Qt are not installed (a GPU server with JAX or PyTorch only): JAX jobs run, TensorFlow jobs are refused.

Each command is a real process tree with TensorFlow and Qt hidden (`tests/hidden_packages.py`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.history.store import FILE_NAME
from tests.hidden_packages import env_without_tensorflow_and_qt

ROOT = Path(__file__).resolve().parents[2]


def cli(args: list[str], data_dir: Path, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    env = env_without_tensorflow_and_qt(DEVICE_LAB_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)


def test_a_tensorflow_job_is_refused_in_one_line_naming_what_to_install(tmp_path: Path) -> None:
    began = time.monotonic()
    done = cli(["run", "--model", "mlp", "--steps", "5", "--no-verdict"], tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "needs TensorFlow" in line and "pip install tensorflow" in line and "--backend jax" in line
    assert time.monotonic() - began < 30  # refused before anything trains (a few seconds to start Python)
    assert not (tmp_path / FILE_NAME).exists() or cli(["history", "--json"], tmp_path).stdout.strip() == "[]"


def test_a_comparison_with_one_tensorflow_target_is_refused_before_any_target_runs(tmp_path: Path) -> None:
    done = cli(["compare", "--model", "mlp", "--targets", "jax:CPU:0;CPU:0", "--steps", "5"], tmp_path)
    assert done.returncode == 2 and "needs TensorFlow" in done.stderr and "run 1 of" not in done.stderr


@pytest.mark.slow
def test_devices_lists_the_cpu_from_the_os_jax_devices_and_why_tensorflow_lists_none(tmp_path: Path) -> None:
    done = cli(["devices", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    listing = json.loads(done.stdout)
    [cpu] = [row for row in listing["devices"] if row["kind"] == "CPU"]
    assert cpu["tf_name"] == "CPU:0" and cpu["memory_total"] > 0 and cpu["details"]["Logical cores"] != "n/a"
    assert any("TensorFlow is not installed" in note for note in listing["notes"])
    [jax] = [entry for entry in listing["backends"] if entry["backend"] == "jax"]
    assert jax["installed"] and any(device["name"] == "CPU:0" for device in jax["devices"])


@pytest.mark.slow
def test_a_jax_run_trains_is_recorded_and_exported_without_tensorflow(tmp_path: Path) -> None:
    done = cli(["run", "--model", "mlp", "--backend", "jax", "--steps", "30", "--no-verdict", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["steps"] == 30 and result["flops_per_step"] > 0
    history = json.loads(cli(["history", "--json"], tmp_path).stdout)
    assert [run["backend"] for run in history] == ["jax"]
    exported = tmp_path / "runs.csv"
    assert cli(["export", str(history[0]["id"]), "--csv", str(exported)], tmp_path).returncode == 0
    assert "jax" in exported.read_text()


@pytest.mark.slow
def test_models_are_listed_with_their_parameters_by_keras_on_jax(tmp_path: Path) -> None:
    done = cli(["models", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {row["name"]: row["params"] for row in json.loads(done.stdout)}["mlp"] > 0


@pytest.mark.slow
def test_a_model_file_trains_on_jax_without_tensorflow(tmp_path: Path) -> None:
    import keras

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.save(tmp_path / "small.keras")
    done = cli(["run", "--model", str(tmp_path / "small.keras"), "--backend", "jax", "--steps", "30", "--no-verdict", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["status"] == "completed"
