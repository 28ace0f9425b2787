"""Model files the CLI once refused or trained wrongly (issue 38): real files saved by Keras, real `main.py run` processes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.core.workloads.conftest import save_text_vectorization_model

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
NET_PY = """
import keras


@keras.saving.register_keras_serializable("issue38")
class Net(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(self.hidden(x))
"""


def cli(args: list[str], data_dir: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data_dir), DEVICE_LAB_LOG_DIR=str(data_dir / "logs"))
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_text_vectorization_model_on_jax_is_refused_at_once_in_one_line(tmp_path):
    path = save_text_vectorization_model(tmp_path / "text.keras")

    out = cli(["run", "--model", str(path), "--backend", "jax", "--steps", "2"], tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}: ") and "TextVectorization" in line and "TensorFlow backend only" in line, line
    assert "--backend tensorflow" in line and out.stdout == "" and not (tmp_path / "history.sqlite3").exists()


@pytest.fixture(scope="module")
def subclassed(tmp_path_factory) -> dict[str, Path]:
    """A subclassed model saved after fit (its build config holds its input shape), the same saved unbuilt, and data for it."""
    folder = tmp_path_factory.mktemp("subclassed")
    layers = folder / "net.py"
    layers.write_text(NET_PY)
    spec = importlib.util.spec_from_file_location("issue38_net", layers)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = module.Net()
    built.compile(optimizer="adam", loss=__import__("keras").losses.SparseCategoricalCrossentropy(from_logits=True))
    built.fit(np.zeros((8, 24), "float32"), np.zeros(8, "int32"), verbose=0)
    assert built.get_build_config() == {"input_shape": (None, 24)}
    built.save(folder / "built.keras")
    module.Net().save(folder / "unbuilt.keras")
    rng = np.random.default_rng(0)
    np.savez(folder / "data.npz", x=rng.normal(size=(64, 24)).astype("float32"), y=rng.integers(0, 3, 64).astype("int32"))
    return {"layers": layers, "built": folder / "built.keras", "unbuilt": folder / "unbuilt.keras", "data": folder / "data.npz"}


@pytest.mark.parametrize("name, data", [("built", False), ("unbuilt", True)])
def test_a_subclassed_model_trains_from_its_build_config_or_its_data(subclassed, tmp_path, name, data):
    args = ["run", "--model", str(subclassed[name]), "--custom-objects", str(subclassed["layers"]), "--trust", "--steps", "3"]
    args += ["--data", str(subclassed["data"])] if data else []
    out = cli(args + ["--batch-size", "16", "--no-save"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "inputs input_layer float32 (None, 24)" in out.stderr, out.stderr[-3000:]


def test_a_subclassed_model_unbuilt_and_without_data_is_refused_saying_what_builds_it(subclassed, tmp_path):
    args = ["run", "--model", str(subclassed["unbuilt"]), "--custom-objects", str(subclassed["layers"]), "--trust", "--steps", "2"]
    out = cli(args, tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    [line] = out.stderr.strip().splitlines()
    assert "no known inputs and outputs" in line and "--data" in line and "model.build" in line, line


def test_a_compressed_npz_says_its_file_size_and_what_it_inflates_to_before_training(tmp_path):
    import keras

    model = tmp_path / "wide.keras"
    keras.Sequential([keras.Input((256,)), keras.layers.Dense(3)]).save(model)
    data = tmp_path / "zeros.npz"
    np.savez_compressed(data, x=np.zeros((40_000, 256), "float32"), y=np.zeros(40_000, "int32"))
    out = cli(["run", "--model", str(model), "--data", str(data), "--steps", "2", "--no-save"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    first = out.stderr.splitlines()[0]
    assert "warning: the data file zeros.npz is " in first and "but its arrays take 39.2 MiB in memory once inflated" in first, first
