"""The user's own model file on the command line: run, compare, history, and one clear refusal per bad file.

The model files are real Keras saves made once for the module; every command
is a real `main.py` process (a model file is described in a child process before
TensorFlow loads there, so a run costs two TensorFlow imports: few of them here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.config import RunConfig
from core.history.store import RunStore
from core.results import RunResult, RunStatus
from core.runner import run_training
from core.workloads.model_file import file_sha256
from core.workloads.model_file_states import ModelFileStates
from tests.core.workloads.conftest import PY_MODEL, two_io_model, write_py

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STEPS = 4


@pytest.fixture(scope="module")
def files(tmp_path_factory, two_cpus) -> dict[str, Path]:
    """Every file the tests open, saved once: good models, a bad one of each kind, data that does not fit."""
    import keras
    import tensorflow as tf

    folder = tmp_path_factory.mktemp("model_files")
    paths = {"two_io": folder / "two_io.keras", "h5": folder / "compiled.h5", "lambda": folder / "lambda.keras"}
    two_io_model().save(paths["two_io"])
    h5 = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    h5.compile(optimizer="adam", loss="mean_absolute_error")
    h5.save(paths["h5"])
    inputs = keras.Input((4,))
    doubled = keras.layers.Lambda(lambda t: t * 2.0)(inputs)
    keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(doubled)).save(paths["lambda"])
    paths["py"] = write_py(folder, "my_model.py", PY_MODEL)
    paths["corrupt"] = folder / "corrupt.keras"
    paths["corrupt"].write_bytes(paths["two_io"].read_bytes()[:200])
    paths["savedmodel"] = folder / "exported"
    module = tf.Module()
    module.double = tf.function(lambda x: x * 2.0, input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(paths["savedmodel"]))
    paths["bad_npz"] = folder / "bad.npz"
    ids, feat = np.zeros((10, 7), "int32"), np.zeros((10, 3), "float32")
    np.savez(paths["bad_npz"], ids=ids, feat=feat, cls=np.zeros(10, "int32"), flag=np.zeros(10, "float32"))
    return paths


def cli(args: list[str], data_dir: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data_dir), DEVICE_LAB_LOG_DIR=str(data_dir / "logs"))
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def sample_summary_keys() -> set[str]:
    """The keys `run --json` prints for a sample model."""
    return set(RunResult(status=RunStatus.COMPLETED, config=RunConfig().to_dict()).summary())


def test_keras_file_trains_from_the_cli_and_the_history_keeps_its_hash(files, tmp_path):
    model = tmp_path / "mine.keras"
    shutil.copy(files["two_io"], model)
    sha = file_sha256(model)
    out = cli(["run", "--model", str(model), "--steps", str(STEPS), "--batch-size", "8", "--json", "--no-verdict"], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert set(result) - sample_summary_keys() == {"model_sha256"} and sample_summary_keys() <= set(result)
    assert result["status"] == "completed" and result["steps"] == STEPS and result["samples_per_s"] > 0
    assert result["model"] == str(model) and result["dataset"] == "synthetic" and result["model_sha256"] == sha
    weights = two_io_model().count_params() * 4
    assert result["memory_estimate"]["weight_bytes"] == result["memory_estimate"]["gradient_bytes"] == weights
    assert result["memory_estimate"]["optimizer_bytes"] == 2 * weights and result["peak_memory_bytes"] > 0
    assert "model file mine.keras: inputs ids int32 (None, 6), feat float32 (None, 3)" in out.stderr

    [stored] = json.loads(cli(["history", "--json"], tmp_path).stdout)
    assert stored["model_file"] == {"path": str(model), "sha256": sha, "state": "unchanged"}
    model.write_bytes(model.read_bytes() + b"changed")
    assert "mine.keras (changed)" in cli(["history"], tmp_path).stdout

    exported = tmp_path / "runs.json"
    with RunStore.open(tmp_path / "history.sqlite3") as store:
        [summary] = store.list_runs()
        store.export_json([summary.id], exported)
    config = json.loads(exported.read_text())["runs"][0]["config"]
    assert (config["model"], config["model_sha256"]) == (summary.model, summary.model_sha256) == (str(model), sha)
    model.unlink()
    assert ModelFileStates().describe(summary.model, summary.model_sha256)["state"] == "missing"


@pytest.mark.heavy  # two describe children and a compare; Mirrored from the CLI is in the default run
def test_python_file_compared_on_one_cpu_and_mirrored_over_two_logical_cpus(files, tmp_path):
    targets = "CPU:0;mirrored:CPU:0,CPU:1"
    args = ["compare", "--model", str(files["py"]), "--trust", "--targets", targets, "--logical-cpus", "2"]
    out = cli([*args, "--steps", str(STEPS), "--batch-size", "8", "--json", "--no-save"], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads(out.stdout)
    assert [(r["label"], r["status"], r["replicas"]) for r in rows] == [("CPU:0", "completed", 1), ("mirrored:CPU:0,CPU:1", "completed", 2)]
    assert {r["dataset"] for r in rows} == {"build_dataset"}  # a .py with build_dataset() trains on it unless told otherwise
    assert {r["model_sha256"] for r in rows} == {file_sha256(files["py"])}
    assert rows[0]["memory_estimate"]["optimizer_slots"] == 0  # the file's own optimizer = "sgd"
    assert "model file my_model.py:" in out.stderr and "data build_dataset" in out.stderr


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("missing", ["no such file"]),
        ("corrupt", ["not a readable .keras file"]),
        ("savedmodel", ["SavedModel", 'model.save("m.keras")']),
        ("lambda", ["Lambda layer", "--trust"]),
        ("py", ["runs its code", "--trust"]),
        ("bad_npz", ["the data does not fit the model", "input 'ids'", "shape (6,)", "gives (10, 7)"]),
    ],
)
def test_a_file_that_cannot_be_used_exits_2_with_one_message_and_records_nothing(files, tmp_path, name, fragments):
    model = {"missing": files["two_io"].with_name("missing.keras"), "bad_npz": files["two_io"]}.get(name) or files[name]
    data = ["--data", str(files["bad_npz"])] if name == "bad_npz" else []
    out = cli(["run", "--model", str(model), *data, "--steps", "2"], tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    [line] = out.stderr.strip().splitlines()
    named = files["bad_npz"] if name == "bad_npz" else model
    assert line.startswith(f"error: {named}: ") and all(fragment in line for fragment in fragments), line
    assert out.stdout == "" and not (tmp_path / "history.sqlite3").exists()


def test_h5_file_trains_in_this_process_with_the_memory_estimate_of_its_variables(files):
    import keras

    result = run_training(RunConfig(model=str(files["h5"]), steps=STEPS, batch_size=8, optimizer="sgd"))
    assert result.status == RunStatus.COMPLETED, result.message
    params = keras.saving.load_model(files["h5"], compile=False).count_params()
    assert result.memory_estimate["weight_bytes"] == params * 4 and result.memory_estimate["optimizer_bytes"] == 0
    assert result.config["model_sha256"] == file_sha256(files["h5"])


@pytest.fixture(scope="module")
def wide_data(tmp_path_factory, two_cpus) -> dict[str, Path]:
    """A model of 512 inputs, and two .npz for it: 1,000 examples, and 131,072 (256 MiB of float32 once loaded)."""
    import keras

    folder = tmp_path_factory.mktemp("wide")
    model = keras.Sequential([keras.Input((512,)), keras.layers.Dense(10)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    paths = {"model": folder / "wide.keras", "small": folder / "small.npz", "large": folder / "large.npz"}
    model.save(paths["model"])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((131_072, 512), dtype=np.float32)
    y = rng.integers(0, 10, 131_072).astype(np.int32)
    np.savez(paths["large"], x=x, y=y)
    np.savez(paths["small"], x=x[:1000], y=y[:1000])
    return paths


@pytest.mark.heavy  # four training processes, 256 MiB of data each for two
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_an_npz_that_fits_trains_with_at_most_about_twice_its_inflated_size_in_memory(wide_data, tmp_path, backend):
    """Its arrays are held once (JAX: the epochs are views of them) or twice (TensorFlow: the arrays and tf.data's copy), not ~5 times."""
    inflated = 131_072 * 512 * 4 + 131_072 * 4
    peaks = {}
    for name in ("small", "large"):
        args = ["run", "--model", str(wide_data["model"]), "--data", str(wide_data[name]), "--backend", backend]
        done = cli([*args, "--steps", "20", "--json", "--no-verdict", "--no-save"], tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        peaks[name] = json.loads(done.stdout)["peak_memory_bytes"]
    added = peaks["large"] - peaks["small"]
    assert added <= 2.2 * inflated, (backend, added / inflated)
    if backend == "jax":
        assert added <= 1.3 * inflated, added / inflated


def test_max_batch_refuses_a_memory_limit_the_data_alone_would_fill_before_any_probe(wide_data, tmp_path):
    """256 MiB of arrays, held twice by a TensorFlow probe, in a 400 MiB budget: every probe would fail, so none runs."""
    args = ["max-batch", "--model", str(wide_data["model"]), "--data", str(wide_data["large"]), "--memory-limit", "400MiB"]
    done = cli(args, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: --memory-limit: got '400.0 MiB'") and "large.npz's arrays take 256.5 MiB once loaded" in error
    assert "probe: batch" not in done.stderr
