"""Backends from the command line, as a user meets them: real processes, real signals, a real history file."""

from __future__ import annotations

import json
import os
import signal
import time

import psutil
import pytest

from tests.core.test_cli_crash_safety import START_TIMEOUT_S, Running, cli, history

pytestmark = pytest.mark.slow


@pytest.fixture
def cli_env(tmp_path):
    return dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))


def test_compare_tensorflow_and_jax_gives_both_rows_with_samples_per_s(cli_env):
    # the digits, which the MLP learns within the run: time to a loss decides only where the loss fell beyond noise
    done = cli(
        ["compare", "--model", "mlp", "--data", "digits", "--targets", "CPU:0;jax:CPU:0", "--steps", "200", "--json"], cli_env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    tf_row, jax_row = json.loads(done.stdout)
    assert (tf_row["label"], tf_row["backend"]) == ("CPU:0", "tensorflow")
    assert (jax_row["label"], jax_row["backend"]) == ("jax:CPU:0", "jax")
    assert tf_row["samples_per_s"] > 0 and jax_row["samples_per_s"] > 0 and jax_row["speedup"] > 0
    # both timed to one loss, the higher of their smoothed final losses: each reached it
    assert tf_row["target_decides"], tf_row["target_undecided_why"]
    assert tf_row["target_loss"] == jax_row["target_loss"] is not None and tf_row["time_to_target_speedup"] == 1.0
    assert tf_row["steps_to_target"] <= 200 and jax_row["steps_to_target"] <= 200 and jax_row["time_to_target_s"] > 0
    assert jax_row["samples_to_target_ratio"] == jax_row["samples_to_target"] / tf_row["samples_to_target"]
    assert {row["backend"] for row in history(cli_env)} == {"tensorflow", "jax"}


@pytest.mark.heavy  # a describe child and a JAX child; the refusal's words are checked in the default run (test_backend_config)
def test_a_py_whose_default_data_is_its_build_dataset_trains_on_jax_with_synthetic_data_and_says_so(cli_env, tmp_path):
    """The plain command works: on JAX the file's tf.data pipeline cannot run, so its synthetic data is used, and the model line says why."""
    model_file = tmp_path / "with_data.py"
    model_file.write_text(
        "import keras\n"
        "def build_model():\n"
        "    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation='relu'), keras.layers.Dense(3)])\n"
        "loss = 'sparse_categorical_crossentropy'\n"
        "def build_dataset(batch_size):\n"
        "    import tensorflow as tf\n"
        "    return tf.data.Dataset.from_tensor_slices(([[0.0] * 4] * 8, [0] * 8)).batch(batch_size)\n"
    )
    done = cli(["run", "--model", str(model_file), "--trust", "--backend", "jax", "--steps", "6", "--json", "--no-verdict"], cli_env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["dataset"] == "synthetic" and result["backend"] == "jax"
    assert "synthetic data: its build_dataset() is a tf.data pipeline, which trains on TensorFlow only" in done.stderr


@pytest.mark.heavy  # two backends' processes; TensorFlow and JAX from one file's weights are in the default run's backend job tests
def test_compare_of_a_keras_file_on_tensorflow_and_jax_trains_the_files_weights_alike(cli_env, tmp_path):
    import keras

    model_file = tmp_path / "small.keras"
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.save(model_file)
    done = cli(["compare", "--model", str(model_file), "--targets", "CPU:0;jax:CPU:0", "--steps", "30", "--json", "--no-save"], cli_env)
    assert done.returncode == 0, done.stderr[-2000:]
    tf_row, jax_row = json.loads(done.stdout)
    assert tf_row["status"] == jax_row["status"] == "completed" and jax_row["samples_per_s"] > 0
    assert jax_row["final_loss"] == pytest.approx(tf_row["final_loss"], rel=1e-3)  # the file's weights, the same synthetic data


def test_devices_lists_jaxs_devices_beside_tensorflows(cli_env):
    done = cli(["devices", "--json"], cli_env)
    assert done.returncode == 0, done.stderr[-2000:]
    listed = {entry["backend"]: entry for entry in json.loads(done.stdout)["backends"]}
    assert "CPU:0" in [device["name"] for device in listed["jax"]["devices"]] and listed["jax"]["error"] == ""
    assert listed["torch"]["installed"] == bool(listed["torch"]["devices"]) != bool(listed["torch"]["error"])


def test_a_bad_backend_is_refused_with_exit_code_2_before_training(cli_env):
    done = cli(["run", "--model", "mlp", "--backend", "mxnet"], cli_env)
    assert done.returncode == 2 and "--backend" in done.stderr


def _backend_children(app: psutil.Process) -> list[psutil.Process]:
    return [p for p in app.children(recursive=True) if "core.backends.child_job" in " ".join(p.cmdline())]


def test_killing_the_app_mid_run_leaves_no_backend_child_and_the_run_reads_back_interrupted_with_its_steps(cli_env):
    run = Running(["run", "--model", "mlp", "--backend", "jax", "--steps", "1000000", "--no-verdict"], cli_env)
    try:
        run.wait_for_step(2)
        app = psutil.Process(run.process.pid)
        (child,) = _backend_children(app)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not [row for row in history(cli_env) if row["steps"] > 1]:  # the recorder appends about once a second
            assert time.monotonic() < deadline, "no steps recorded"
        run.process.send_signal(signal.SIGKILL)
    finally:
        code, _, _ = run.finish()
    assert code == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the JAX child outlived the app"
        time.sleep(0.05)
    (stored,) = history(cli_env)
    assert stored["status"] == "interrupted" and stored["backend"] == "jax"
    assert stored["steps"] > 1 and stored["samples_per_s"] > 0


@pytest.mark.heavy  # a TensorFlow and a JAX point; compare covers both backends in the default tier
def test_a_sweep_over_backends_runs_each_and_names_the_fastest(cli_env):
    done = cli(
        ["sweep", "--model", "mlp", "--target", "CPU:0", "--backends", "tensorflow,jax", "--steps", "30", "--json", "--no-save"], cli_env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    swept = json.loads(done.stdout)
    assert [axis["name"] for axis in swept["axes"]] == ["backend"]
    rows = swept["rows"]
    assert [row["settings"]["backend"] for row in rows] == ["tensorflow", "jax"]
    assert all(row["status"] == "completed" and row["samples_per_s"] > 0 for row in rows)
    fastest = max(range(len(rows)), key=lambda i: rows[i]["samples_per_s"])
    assert swept["best"] == fastest


@pytest.mark.heavy  # autotune with a JAX point; without --backends, saying how to ask for one is checked in the default run (test_tuning_cli)
def test_autotune_tries_jax_only_when_asked_and_says_so(cli_env):
    # The search ends at its budget or once its space is searched; 18 s reaches the backend stage, right after the start point (on a quiet
    # 2-core machine the JAX point and its precision point were measured within it), and the JAX point is measured or,
    # when too little time is left, a skipped row.
    asked = cli(
        ["autotune", "--model", "mlp", "--target", "CPU:0", "--backends", "jax", "--budget-s", "18", "--json"], cli_env, timeout=600
    )
    assert asked.returncode == 0, asked.stderr[-2000:]
    tuned = json.loads(asked.stdout)
    backend_points = [p for p in tuned["points"] if p["stage"] == "backend"]
    assert [p["settings"]["backend"] for p in backend_points] == ["jax"] and backend_points[0]["status"] in ("measured", "skipped")
    assert tuned["best"]["backend"] in ("tensorflow", "jax") and "backends tried: tensorflow, jax" in tuned["notes"]
