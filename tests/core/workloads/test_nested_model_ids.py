"""Id ranges through nested models, and a NaN loss from ids past a table said as that (issue 38, item 20).

A functional classifier wrapping a backbone (token_ids and segment_ids into an Embedding of 1000 and one of 2)
once gave segment_ids no range (plain Keras: synthetic data refused) or the backbone's vocabulary_size, 1000
(keras-hub: JAX read "the loss became nan at step 1: training diverged. Lower the learning rate"). Real
.keras files, real training on TensorFlow in this process and on JAX in a real `main.py run`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.config import RunConfig
from core.results import RunStatus, StepRecord
from core.runner import run_training
from core.training.failures import divergence_message
from core.workloads.model_data import IDS_PAST_TABLE
from core.workloads.user_workload import open_user_workload

ROOT = Path(__file__).resolve().parents[3]
SEQ, TOKENS, SEGMENTS, EXAMPLES = 8, 1000, 2, 64


def _cli(args: list[str], data_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data_dir), DEVICE_LAB_LOG_DIR=str(data_dir / "logs"))
    command = [sys.executable, "main.py", "run", *args, "--batch-size", "8", "--no-verdict", "--no-save"]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def nested_keras(tmp_path_factory, two_cpus) -> Path:
    """A functional classifier whose own inputs feed a nested functional backbone (token and segment embeddings), saved as .keras."""
    import keras

    keras.utils.set_random_seed(0)
    token_ids = keras.Input((SEQ,), dtype="int32", name="token_ids")
    segment_ids = keras.Input((SEQ,), dtype="int32", name="segment_ids")
    summed = keras.layers.Add()(
        [
            keras.layers.Embedding(TOKENS, 8, name="token_embedding")(token_ids),
            keras.layers.Embedding(SEGMENTS, 8, name="segment_embedding")(segment_ids),
        ]
    )
    backbone = keras.Model(
        {"token_ids": token_ids, "segment_ids": segment_ids}, keras.layers.GlobalAveragePooling1D()(summed), name="backbone"
    )
    inputs = {name: keras.Input((SEQ,), dtype="int32", name=name) for name in ("token_ids", "segment_ids")}
    path = tmp_path_factory.mktemp("nested") / "classifier.keras"
    keras.Model(inputs, keras.layers.Dense(3, name="logits")(backbone(inputs)), name="classifier").save(path)
    return path


def _ranges(path: Path, **options) -> dict[str, tuple[int | None, str]]:
    described = open_user_workload(path, **options).describe()
    return {i["name"]: (i["vocab"], i["vocab_source"]) for i in described["inputs"]}


@pytest.mark.slow
def test_an_input_of_a_nested_model_gets_the_range_of_the_embedding_inside_it(nested_keras):
    ranges = _ranges(nested_keras)
    assert ranges["segment_ids"] == (SEGMENTS, "input_dim of Embedding 'segment_embedding'")
    assert ranges["token_ids"] == (TOKENS, "input_dim of Embedding 'token_embedding'")


@pytest.mark.slow
def test_a_keras_hub_backbone_in_a_functional_classifier_gives_segment_ids_its_own_table(tmp_path):
    """keras-hub's BertBackbone has a vocabulary_size (its token table's): segment_ids once got [0, 1000) from it."""
    keras_hub = pytest.importorskip("keras_hub")
    import keras

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=TOKENS, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=SEQ
    )
    inputs = {name: keras.Input((SEQ,), dtype="int32", name=name) for name in ("token_ids", "segment_ids", "padding_mask")}
    path = tmp_path / "bert_classifier.keras"
    keras.Model(inputs, keras.layers.Dense(3)(backbone(inputs)["pooled_output"])).save(path)
    ranges = _ranges(path)
    assert ranges["segment_ids"] == (SEGMENTS, "input_dim of Embedding 'segment_embedding'")
    assert ranges["token_ids"] == (TOKENS, "input_dim of ReversibleEmbedding 'token_embedding'")


@pytest.mark.slow
def test_the_nested_classifier_trains_on_tensorflow_with_a_finite_loss(nested_keras):
    result = run_training(RunConfig(model=str(nested_keras), steps=4, batch_size=8))
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.steps_done == 4 and all(np.isfinite(result.losses))


@pytest.mark.slow
def test_the_nested_classifier_trains_on_jax_with_a_finite_loss(nested_keras, tmp_path):
    out = _cli(["--model", str(nested_keras), "--backend", "jax", "--steps", "4"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "input 'segment_ids': ids in [0, 2)" in out.stderr and "final loss" in out.stdout


def _past_table_npz(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, TOKENS, (EXAMPLES, SEQ)).astype("int32")
    tokens[:, 0] = 1500  # every example: the first batch reaches past the 1000-row table
    path = folder / "past.npz"
    np.savez(path, token_ids=tokens, segment_ids=rng.integers(0, SEGMENTS, (EXAMPLES, SEQ)).astype("int32"), y=rng.integers(0, 3, EXAMPLES))
    return path


@pytest.mark.slow
def test_ids_past_the_table_are_noted_on_opening_whatever_vocab_says(nested_keras, tmp_path):
    """--vocab NAME=N sets a range over the table's (a wrong guess once needed it): the data's ids past the table are said."""
    data = _past_table_npz(tmp_path)
    notes = open_user_workload(nested_keras, data=str(data), vocab_by_input=[("token_ids", 2000)]).describe()["notes"]
    [past] = [note for note in notes if note.startswith(IDS_PAST_TABLE)]
    assert "'token_ids'" in past and "up to 1500" in past and f"the {TOKENS} rows" in past and "token_embedding" in past
    synthetic = open_user_workload(nested_keras, vocab_by_input=[("token_ids", 2000)]).describe()["notes"]
    assert any(note.startswith(IDS_PAST_TABLE) and "up to 1999" in note and "--vocab token_ids=2000" in note for note in synthetic)
    assert not any(note.startswith(IDS_PAST_TABLE) for note in open_user_workload(nested_keras).describe()["notes"])


@pytest.mark.slow
def test_a_nan_loss_on_jax_from_ids_past_the_table_is_said_as_that_not_as_divergence(nested_keras, tmp_path):
    data = _past_table_npz(tmp_path)
    args = ["--model", str(nested_keras), "--data", str(data), "--vocab", "token_ids=2000", "--backend", "jax", "--steps", "4"]
    out = _cli(args, tmp_path)
    assert out.returncode == 1, out.stderr[-3000:]
    [failed] = [line for line in out.stderr.splitlines() if line.startswith("failed: ")]
    assert "at step 1" in failed and "'token_ids'" in failed and "up to 1500" in failed and f"{TOKENS} rows" in failed, failed
    assert "Lower the learning rate" not in failed and "diverged" not in failed


def test_the_divergence_message_names_ids_past_a_table_when_the_run_noted_them():
    records = [StepRecord(1, float("nan"), 0.01, True)]
    config = RunConfig(learning_rate=0.001, backend="jax")
    plain = divergence_message(records, config, ["optimizer: adam (the run's)"])
    assert "training diverged" in plain and "Lower the learning rate (now 0.001)" in plain
    note = f"{IDS_PAST_TABLE}input 'ids' holds ids up to 1500 (the data's), past the 1000 rows of the table it feeds"
    said = divergence_message(records, config, [note])
    assert said.startswith("The loss became nan at step 1") and IDS_PAST_TABLE in said and note.removeprefix(IDS_PAST_TABLE) in said
    assert "diverged" not in said and "Lower the learning rate" not in said
    assert divergence_message([StepRecord(1, 0.5, 0.01, True)], config, [note]) == ""
