"""A corpus of real model files nobody on this project wrote, each described and trained for a few steps (1 of 2).

keras.applications models (weights=None, 32×32) and files saved by the real
tf.keras 2 (`tf-keras`, in a child Python with its own Keras). The files are
made once for the module. keras-hub backbones, a keras.io-style model and a
custom-layer model are in test_real_files_text_and_custom.py (a second module,
so the two halves can run on different test workers).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunConfig
from core.results import RunStatus
from core.runner import run_training
from core.workloads.user_workload import open_user_workload
from tests.core.workloads.real_files import STEPS, cli_run

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

TF_KERAS_SAVER = """
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tf_keras as k

folder = sys.argv[1]
net = k.applications.MobileNetV2(input_shape=(32, 32, 3), weights=None, classes=10)
net.compile(optimizer=k.optimizers.RMSprop(learning_rate=0.01), loss="sparse_categorical_crossentropy")
net.save(os.path.join(folder, "mobilenet_v2_tf_keras.h5"))
ids = k.Input((8,), dtype="int32")
hidden = k.layers.Bidirectional(k.layers.LSTM(4))(k.layers.Embedding(40, 4)(ids))
rnn = k.Model(ids, k.layers.Dense(3, activation="softmax")(hidden))
rnn.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
rnn.save(os.path.join(folder, "lstm_tf_keras.h5"))
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, two_cpus) -> dict[str, Path]:
    """Every file of this half of the corpus, saved once."""
    import keras

    folder = tmp_path_factory.mktemp("corpus")
    done = subprocess.run([sys.executable, "-c", TF_KERAS_SAVER, str(folder)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    paths = {name: folder / f"{name}.h5" for name in ("mobilenet_v2_tf_keras", "lstm_tf_keras")}
    small = keras.applications.MobileNetV2(input_shape=(32, 32, 3), weights=None, classes=10)
    for suffix in ("keras", "h5"):
        paths[f"mobilenet_v2.{suffix}"] = folder / f"mobilenet_v2.{suffix}"
        small.save(paths[f"mobilenet_v2.{suffix}"])
    paths["efficientnet_b0"] = folder / "efficientnet_b0.keras"
    keras.applications.EfficientNetB0(input_shape=(32, 32, 3), weights=None, classes=10).save(paths["efficientnet_b0"])
    return paths


@pytest.mark.parametrize("name", ["mobilenet_v2.keras", "mobilenet_v2.h5", "efficientnet_b0"])
def test_keras_applications_open_without_fixes(corpus, name):
    described = open_user_workload(corpus[name]).describe()
    assert described["inputs"][0]["shape"] == [None, 32, 32, 3] and described["outputs"][0]["shape"] == [None, 10]
    assert described["params"] > 100_000 and described["legacy_fixes"] == []
    assert described["losses"][0]["loss"] == "sparse_categorical_crossentropy"


@pytest.mark.parametrize("name", ["mobilenet_v2.h5", "efficientnet_b0"])
def test_keras_applications_train_a_few_steps(corpus, name):
    """In this process (one TensorFlow start): tracing these graphs takes one to two minutes on a busy 2-core machine."""
    result = run_training(RunConfig(model=str(corpus[name]), steps=STEPS, batch_size=4))
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.steps_done == STEPS and all(loss == loss for loss in result.losses)  # finite, not NaN


def test_tf_keras_mobilenet_h5_trains_with_its_legacy_fix_and_its_rmsprop(corpus, tmp_path):
    result, stderr = cli_run(corpus["mobilenet_v2_tf_keras"], tmp_path)
    assert "loaded with 1 legacy fix: DepthwiseConv2D: dropped groups=1 (17 layers)" in stderr
    assert "optimizer rmsprop (the file's)" in stderr
    assert any("legacy fix: DepthwiseConv2D: dropped groups=1" in w for w in result["warnings"]), result["warnings"]
    assert any(w.startswith("optimizer: the file's rmsprop (learning_rate 0.01") for w in result["warnings"]), result["warnings"]
    estimate = result["memory_estimate"]
    assert estimate["optimizer_slots"] == 1 and estimate["optimizer_bytes"] == estimate["gradient_bytes"]  # RMSprop: one slot


def test_tf_keras_lstm_h5_trains_and_a_picked_optimizer_replaces_the_files(corpus):
    path = str(corpus["lstm_tf_keras"])
    described = open_user_workload(path).describe()
    assert described["legacy_fixes"] == ["LSTM: dropped time_major=False"] and described["optimizer"] == "sgd"
    assert described["inputs"][0]["vocab"] == 40
    own = run_training(RunConfig(model=path, steps=STEPS, batch_size=4, optimizer="file"))
    assert own.status == RunStatus.COMPLETED, own.message
    assert own.memory_estimate["optimizer_slots"] == 0 and "optimizer: the file's sgd (learning_rate 0.01)" in own.warnings
    picked = run_training(RunConfig(model=path, steps=STEPS, batch_size=4, optimizer="adam"))
    assert picked.status == RunStatus.COMPLETED, picked.message
    assert picked.memory_estimate["optimizer_slots"] == 2
    assert "optimizer: adam (the run's choice) replaces the file's sgd (learning_rate 0.01)" in picked.warnings
