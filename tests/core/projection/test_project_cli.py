"""`main.py project`: real CLI processes, XLA counting the step in a real child; the answer labelled a projection, never recorded.

An unknown device is refused in one line before anything starts; a .keras file saved here is
projected like a sample; with TensorFlow hidden (`tests/hidden_packages.py`) a JAX job projects; with
JAX hidden, one line says what to install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.history.store import FILE_NAME
from core.projection.catalogue import device_names
from core.projection.model import COMPUTE, FIXED, MEMORY
from core.projection.project import LABEL
from tests.hidden_packages import JAX, env_without, env_without_tensorflow_and_qt

ROOT = Path(__file__).resolve().parents[3]
REGIMES = {FIXED, COMPUTE, MEMORY}


def project(args: list[str], data_dir: Path, env: dict[str, str] | None = None, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(env or os.environ, DEVICE_LAB_DATA_DIR=str(data_dir))
    return subprocess.run(
        [sys.executable, "main.py", "project", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s
    )


def check_document(document: dict, batch: int) -> None:
    assert document["projection"] is True and document["label"].startswith(LABEL)
    assert [row["batch"] for row in document["rows"]][0] == batch and len(document["rows"]) >= 2
    for row in document["rows"]:
        for figure in ("step_s", "samples_per_s"):
            assert 0 < row[figure]["low"] <= row[figure]["mid"] <= row[figure]["high"] <= 2.0001 * row[figure]["low"]
        assert row["samples_per_s"]["mid"] == pytest.approx(row["batch"] / row["step_s"]["mid"])
        assert row["regime"] in REGIMES and row["why"]
        assert row["fits"]["fits"] in (True, False) and row["fits"]["need_bytes"] > 0 and row["fits"]["usable_bytes"] > 0
        assert row["flops"] > 0 and row["bytes"] > 0 and row["kernels"] > 0
    points = document["calibration"]["points"]
    assert len(points) >= 4 and all(p["samples_per_s"] > 0 and "benchmarks/records/" in p["source"] for p in points)
    assert document["caveats"], "a projection from one card at one batch always says what it leans on"


@pytest.mark.slow
def test_the_cnn_on_an_h100_per_batch_a_range_a_regime_a_memory_fit_flops_and_bytes_and_nothing_recorded(tmp_path: Path) -> None:
    done = project(["--model", "cnn", "--device", "H100", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    check_document(document, 64)
    assert document["device"]["name"] == "H100-SXM" and document["device"]["ceiling_how"].startswith("measured")
    rows = {row["batch"]: row for row in document["rows"]}
    assert set(rows) == {64, 256, 1024, 4096} and rows[64]["regime"] == FIXED  # the H100 point says so: host-bound at 64
    assert rows[256]["flops"] == pytest.approx(4 * rows[64]["flops"], rel=0.01)
    assert any("TensorFlow" in caveat for caveat in document["caveats"])  # the default backend: calibrated on JAX, said
    assert all(row["batches_per_epoch"] is None and row["terms_s"]["epoch"] == 0 for row in rows.values())  # its loop has no epochs
    # its two max poolings' gradients scatter elements that grow with the batch; TensorFlow without XLA runs its own
    # pooling kernels, not XLA's atomic ones: no scatter term, said
    assert rows[4096]["scattered"] == 64 * rows[64]["scattered"] > 0 and rows[4096]["terms_s"]["scatter"] == 0
    assert any("without XLA its scatters" in caveat for caveat in document["caveats"])
    on_jax = json.loads(project(["--model", "cnn", "--device", "H100", "--backend", "jax", "--json"], tmp_path).stdout)
    jax_rows = {row["batch"]: row for row in on_jax["rows"]}  # on JAX each scattered element is an atomic write
    assert jax_rows[64]["terms_s"]["scatter"] > 0
    assert jax_rows[4096]["terms_s"]["scatter"] == pytest.approx(64 * jax_rows[64]["terms_s"]["scatter"])
    assert "elements scattered" in jax_rows[4096]["why"] and not any("without XLA" in caveat for caveat in on_jax["caveats"])
    assert not (tmp_path / FILE_NAME).exists()


def test_without_jax_it_says_what_to_install_before_any_model_is_opened(tmp_path: Path) -> None:
    """JAX's XLA counts the step: where JAX is missing (an install from before it came with Device Lab), one line says so."""
    model_file = tmp_path / "never-opened.keras"  # not a model: the refusal comes before a model file is described
    model_file.write_text("not a model")
    began = time.monotonic()
    done = project(["--model", str(model_file), "--device", "H100", "--json"], tmp_path, env_without(JAX))
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: counting the step's costs needs JAX") and "pip install jax" in line, done.stderr
    assert "Traceback" not in done.stderr and "never-opened" not in done.stderr
    assert time.monotonic() - began < 60  # said before TensorFlow, Keras or any child starts (seconds on a busy machine)


@pytest.mark.slow
def test_a_keras_file_saved_here_projects_with_tensorflow_hidden_on_jax(tmp_path: Path) -> None:
    model_file = tmp_path / "small.keras"
    script = (
        "import keras; m = keras.Sequential([keras.Input((20,)), keras.layers.Dense(32, activation='relu'), keras.layers.Dense(3)]); "
        "m.compile(optimizer='adam', loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)); "
        f"m.save({str(model_file)!r})"
    )
    made = subprocess.run(
        [sys.executable, "-c", script], env=dict(os.environ, KERAS_BACKEND="jax"), capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr[-2000:]
    hidden = env_without_tensorflow_and_qt()
    args = [
        "--model",
        str(model_file),
        "--device",
        "L4",
        "--backend",
        "jax",
        "--batch-size",
        "32",
        "--samples-to-target",
        "100000",
        "--json",
    ]
    done = project(args, tmp_path, hidden)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    check_document(document, 32)
    assert document["model"] == "small.keras" and document["step_costs"]["params"] == 20 * 32 + 32 + 32 * 3 + 3
    first = document["rows"][0]
    assert first["time_to_target_s"]["low"] == pytest.approx(100000 / first["samples_per_s"]["high"])
    # a JAX job is Keras's fit: each step carries its share of the epoch's work, an epoch the data's whole batches
    examples = document["step_costs"]["examples"]
    assert examples > 0 and first["batches_per_epoch"] == examples // 32
    assert first["terms_s"]["epoch"] == pytest.approx(document["calibration"]["constants"]["epoch_s"] / first["batches_per_epoch"])
    heavy = [row["batch"] for row in document["rows"] if row["terms_s"]["epoch"] >= 0.25 * row["step_s"]["mid"]]
    assert heavy and all(f"{batch:,} ({examples // batch} per epoch)" in " ".join(document["caveats"]) for batch in heavy)
    assert any("calibrated on H100-SXM, H200 only" in caveat for caveat in document["caveats"])
    assert any("hosts differ: the same job (jax cnn, batch 64)" in caveat for caveat in document["caveats"])


@pytest.mark.slow
def test_a_sample_projects_as_text_without_tensorflow_labelled_a_projection_with_its_points(tmp_path: Path) -> None:
    done = project(
        ["--model", "mlp", "--device", "tpu-v5e", "--backend", "jax", "--precision", "bfloat16"], tmp_path, env_without_tensorflow_and_qt()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(LABEL) and "(nothing is recorded)" in done.stdout
    assert "calibrated on" in done.stdout and "39,432 samples/s measured (its median step)" in done.stdout
    assert "ms per epoch" in done.stdout and "batch 4096, digits: 1,123,540 samples/s" in done.stdout
    assert "no TPU point" in done.stdout and "0 of the 19 points ran in bfloat16, the others in float32" in done.stdout


def test_an_unknown_device_exits_2_at_once_with_the_known_names_in_one_line(tmp_path: Path) -> None:
    began = time.monotonic()
    done = project(["--model", "cnn", "--device", "GTX-480"], tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert "GTX-480" in line and all(name in line for name in device_names())
    assert time.monotonic() - began < 30  # refused as the options are parsed: no child, no Keras
    done = project(["--model", "cnn", "--device", "a100"], tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert "got 'a100'; it names A100-80GB and A100-40GB: say which; known devices:" in line


def test_a_precision_the_device_lacks_and_pytorch_on_a_tpu_are_refused_before_anything_is_counted(tmp_path: Path) -> None:
    done = project(["--model", "cnn", "--device", "T4", "--precision", "bfloat16"], tmp_path)
    assert done.returncode == 2 and "T4 cannot run --precision bfloat16" in done.stderr and "counting" not in done.stderr
    done = project(["--model", "cnn", "--device", "TPU-v4", "--backend", "torch"], tmp_path)
    assert done.returncode == 2 and "does not train on TPUs" in done.stderr
