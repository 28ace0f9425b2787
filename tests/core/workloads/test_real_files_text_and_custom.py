"""A corpus of real model files nobody on this project wrote, each described and trained for a few steps (2 of 2).

keras-hub GPT-2 and BERT backbones and task models (a BERT classifier, a GPT-2
causal LM) from tiny configs (no presets, no downloads), a keras.io-style model whose token input is float32, and a
custom-layer model opened with --custom-objects. The files are made once for
the module. keras.applications and tf.keras 2 files are in test_real_files.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunConfig
from core.results import RunStatus
from core.runner import run_training
from core.workloads.user_workload import open_user_workload
from tests.core.workloads.conftest import write_py
from tests.core.workloads.real_files import ROOT, STEPS, cli_run

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

SEQ = 16  # keras-hub backbones get sequences of UNKNOWN_DIM (32): their position tables must be at least that long
CUSTOM_LAYERS = """
import keras


@keras.saving.register_keras_serializable(package="corpus")
class Scale(keras.layers.Layer):
    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, two_cpus) -> dict[str, Path]:
    """Every file of this half of the corpus, saved once."""
    import keras
    import keras_hub

    folder = tmp_path_factory.mktemp("corpus")
    paths: dict[str, Path] = {}
    # No dropout: TensorFlow and JAX draw different masks, and the backends' losses are compared below.
    tiny = dict(vocabulary_size=60, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=64, dropout=0.0)
    paths["gpt2"] = folder / "gpt2_backbone.keras"
    keras_hub.models.GPT2Backbone(**tiny).save(paths["gpt2"])
    paths["bert"] = folder / "bert_backbone.keras"
    keras_hub.models.BertBackbone(**tiny, num_segments=2).save(paths["bert"])
    paths["bert_classifier"] = folder / "bert_classifier.keras"
    classifier_backbone = keras_hub.models.BertBackbone(**tiny, num_segments=2)
    keras_hub.models.BertTextClassifier(backbone=classifier_backbone, num_classes=3, preprocessor=None, dropout=0.0).save(
        paths["bert_classifier"]
    )
    paths["gpt2_lm"] = folder / "gpt2_causal_lm.keras"
    keras_hub.models.GPT2CausalLM(backbone=keras_hub.models.GPT2Backbone(**tiny), preprocessor=None).save(paths["gpt2_lm"])
    paths["keras_io"] = folder / "keras_io_text.keras"
    tokens = keras.Input((SEQ,))  # as keras.io writes it: float32 token ids
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(30, 8)(tokens))
    keras.Model(tokens, keras.layers.Dense(2, activation="softmax")(pooled)).save(paths["keras_io"])
    paths["layers_py"] = write_py(folder, "corpus_layers.py", CUSTOM_LAYERS)
    paths["custom"] = _custom_layer_model(folder, paths["layers_py"])
    return paths


def _custom_layer_model(folder: Path, layers_py: Path) -> Path:
    """A .keras using corpus>Scale, saved with the class registered, then unregistered (as in a fresh process)."""
    import keras

    namespace: dict = {}
    exec(compile(layers_py.read_text(), str(layers_py), "exec"), namespace)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3)(namespace["Scale"](3.0)(inputs)))
    model.compile(optimizer=keras.optimizers.RMSprop(0.005), loss="sparse_categorical_crossentropy")
    path = folder / "custom_layer.keras"
    model.save(path)
    keras.saving.get_custom_objects().pop("corpus>Scale")
    return path


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_keras_hub_backbones_train_without_flags(corpus, name, tmp_path):
    described = open_user_workload(corpus[name]).describe()
    inputs = {i["name"]: i for i in described["inputs"]}
    assert inputs["padding_mask"]["fill"] == "ones" and inputs["token_ids"]["vocab"] == 60
    assert "input 'padding_mask' is a mask: all ones in synthetic data (every position real)" in described["notes"]
    if name == "bert":
        assert inputs["segment_ids"]["vocab"] == 2
    result, stderr = cli_run(corpus[name], tmp_path)
    assert result["samples_per_s"] > 0 and "padding_mask" in stderr


@pytest.mark.parametrize("name", ["bert_classifier", "gpt2_lm"])
def test_keras_hub_task_models_train_on_tensorflow_and_on_jax_from_the_same_weights(corpus, name, tmp_path):
    """A BertTextClassifier head on a BertBackbone and a GPT-2 causal LM, with synthetic ids: each integer input's range comes
    from the embedding it feeds (segment_ids [0, 2), not the vocabulary's [0, 60)), and the model line says which.
    On JAX the task's own fit (a grain or tf.data pipeline for its preprocessor) is bypassed: the job feeds the model's inputs."""
    tf_result, stderr = cli_run(corpus[name], tmp_path / "tf")  # STEPS steps: the JAX run below the same
    assert tf_result["flops_per_step"] > 0 and tf_result["flops_uncounted"] == []  # a dict of inputs, open lengths at the data's
    assert "input 'token_ids': ids in [0, 60) (input_dim of ReversibleEmbedding 'token_embedding')" in stderr
    if name == "bert_classifier":
        assert "input 'segment_ids': ids in [0, 2) (input_dim of Embedding 'segment_embedding')" in stderr
    jax_result, _ = cli_run(corpus[name], tmp_path / "jax", "--backend", "jax")
    assert jax_result["backend"] == "jax" and jax_result["status"] == "completed" and jax_result["steps"] == STEPS
    # the file's weights, the same synthetic ids, no dropout: float32 rounding apart (1.5e-6 seen; 2e-3 with dropout's masks)
    assert jax_result["final_loss"] == pytest.approx(tf_result["final_loss"], rel=1e-5)


def test_keras_io_float_token_input_gets_integer_ids(corpus, tmp_path):
    described = open_user_workload(corpus["keras_io"]).describe()
    [tokens] = described["inputs"]
    assert tokens["dtype"] == "float32" and tokens["vocab"] == 30
    assert any("float32 but feeds an embedding: integer ids in [0, 30)" in note for note in described["notes"])
    result, _ = cli_run(corpus["keras_io"], tmp_path)
    assert any("integer ids in [0, 30)" in w for w in result["warnings"])


def test_custom_layer_model_needs_custom_objects_and_trust(corpus, tmp_path):
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path))
    base = [sys.executable, "main.py", "run", "--model", str(corpus["custom"]), "--steps", "1"]
    missing = subprocess.run(base, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and "Scale" in missing.stderr and "--custom-objects" in missing.stderr, missing.stderr[-2000:]
    untrusted = subprocess.run([*base, "--custom-objects", str(corpus["layers_py"])], cwd=ROOT, env=env, capture_output=True, text=True)
    assert untrusted.returncode == 2 and "--trust" in untrusted.stderr, untrusted.stderr[-2000:]
    result, stderr = cli_run(corpus["custom"], tmp_path, "--custom-objects", str(corpus["layers_py"]), "--trust")
    assert result["custom_objects"] == str(corpus["layers_py"]) and "optimizer rmsprop (the file's)" in stderr


def test_custom_objects_reach_local_multi_worker_workers(corpus):
    """Each worker process opens the file itself: the custom-objects path travels in the run's config."""
    config = RunConfig(
        model=str(corpus["custom"]),
        custom_objects=str(corpus["layers_py"]),
        trust=True,
        strategy="multi-worker",
        workers=2,
        batch_size=8,
        steps=STEPS,
    )
    result = run_training(config)
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.replicas == 2 and result.config["custom_objects"] == str(corpus["layers_py"])
