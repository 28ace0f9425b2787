"""Sample-model registry and data sets, including the offline path."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.workloads.data import DATASETS, load_arrays
from core.workloads.models import MODELS, describe_models

ROOT = Path(__file__).resolve().parents[3]


def test_registry_has_four_described_models_with_param_counts():
    rows = {row["name"]: row for row in describe_models()}
    assert {"mlp", "cnn", "resnet", "transformer"} <= set(rows)
    assert rows["cnn"]["input_shape"] == [28, 28, 1]
    assert rows["resnet"]["input_shape"] == [32, 32, 3]
    for row in rows.values():
        assert row["description"] and row["params"] > 1000
        assert row["default_dataset"] in DATASETS
    # The MLP on 8x8x1 input: 64*256+256 + 256*128+128 + 128*10+10 parameters.
    assert rows["mlp"]["params"] == 64 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10


def test_shipped_digits_load_offline_scaled_to_unit_range():
    x, y, classes = load_arrays("digits", MODELS["mlp"])
    assert x.shape == (1797, 8, 8, 1) and y.shape == (1797,)
    assert classes == 10 and set(np.unique(y)) == set(range(10))
    assert 0.0 <= x.min() and x.max() == 1.0


@pytest.mark.slow
def test_synthetic_data_matches_each_model_input():
    for spec in MODELS.values():
        x, y, classes = load_arrays("synthetic", spec)
        assert x.shape[1:] == spec.input_shape
        assert y.max() < classes == spec.num_classes


@pytest.mark.slow
def test_offline_download_gives_clear_message_naming_the_file(tmp_path):
    env = dict(
        os.environ,
        KERAS_HOME=str(tmp_path),
        HTTPS_PROXY="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        http_proxy="http://127.0.0.1:9",
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    script = (
        "from core.workloads.data import load_arrays, DataUnavailable\n"
        "from core.workloads.models import MODELS\n"
        "try:\n    load_arrays('mnist', MODELS['cnn'])\n"
        "except DataUnavailable as exc:\n    print('MESSAGE:', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    message = out.stdout.split("MESSAGE:", 1)[-1]
    assert "MESSAGE:" in out.stdout, out.stderr[-2000:]
    assert "mnist.npz" in message and str(tmp_path / "datasets") in message
    assert "digits" in message and "Traceback" not in out.stdout
