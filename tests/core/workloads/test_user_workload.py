"""A user's model as a workload: its signature, the losses chosen, data from it, and real gradient steps."""

from __future__ import annotations

import resource
import zipfile

import numpy as np
import pytest

from core.workloads.model_data import TENSOR_ALIGNMENT, ModelDataError, aligned, aligned_empty, npz_array_bytes, tensor_view
from core.workloads.model_file import ModelFileError
from core.workloads.user_workload import PYTHON_DATA, SYNTHETIC, open_user_workload
from tests.core.workloads.conftest import CLASSES, VOCAB, two_io_model, write_py

BATCH = 8


def train_steps(workload, steps: int = 4, learning_rate: float = 0.05) -> tuple[list[float], int]:
    """Real SGD steps on one batch of the workload's data: the losses, and the per-example loss length."""
    import keras
    import tensorflow as tf

    model = workload.build_model(seed=0)
    x, y = next(iter(workload.make_dataset(BATCH, seed=0)))
    optimizer = keras.optimizers.SGD(learning_rate)
    losses, per_example_len = [], 0
    for _ in range(steps):
        with tf.GradientTape() as tape:
            per_example = workload.loss_fn(y, model(x, training=True))
            loss = tf.reduce_mean(per_example)
        gradients = tape.gradient(loss, model.trainable_variables)
        assert all(g is not None for g in gradients)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        losses.append(float(loss))
        per_example_len = int(per_example.shape[0])
    return losses, per_example_len


@pytest.mark.slow
def test_two_inputs_two_outputs_described_and_trained_on_synthetic_data(two_io_keras):
    workload = open_user_workload(two_io_keras)
    described = workload.describe()
    assert [(i["name"], i["shape"], i["dtype"], i["vocab"]) for i in described["inputs"]] == [
        ("ids", [None, 6], "int32", VOCAB),
        ("feat", [None, 3], "float32", None),
    ]
    assert described["inputs"][0]["vocab_source"].startswith("input_dim of Embedding")
    assert [(o["name"], o["shape"], o["activation"]) for o in described["outputs"]] == [
        ("cls", [None, 5], "linear"),
        ("flag", [None, 1], "sigmoid"),
    ]
    assert [(loss["loss"], loss["from_logits"]) for loss in described["losses"]] == [
        ("sparse_categorical_crossentropy", True),
        ("binary_crossentropy", False),
    ]
    assert described["params"] == two_io_model().count_params() and not described["compiled"]
    assert workload.num_examples is None and workload.data == SYNTHETIC

    x, y = next(iter(workload.make_dataset(BATCH, seed=0)))
    ids, feat = x
    assert ids.dtype.name == "int32" and 0 <= int(np.min(ids)) and int(np.max(ids)) < VOCAB and tuple(feat.shape) == (BATCH, 3)
    cls, flag = y
    assert tuple(cls.shape) == (BATCH,) and int(np.max(cls)) < CLASSES and set(np.unique(flag)) <= {0.0, 1.0}
    losses, per_example = train_steps(workload)
    assert per_example == BATCH and all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_dict_model_compiled_in_the_file_trains_with_its_compiled_losses(tmp_path):
    import keras

    model = two_io_model(as_dict=True)
    model.compile(
        "adam",
        loss={"cls": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "flag": "mean_squared_error"},
        loss_weights={"cls": 1.0, "flag": 0.5},
    )
    path = tmp_path / "compiled.keras"
    model.save(path)
    workload = open_user_workload(path)
    assert workload.describe()["compiled"]
    by_output = {c.output: c for c in workload.losses}
    assert (by_output["flag"].loss, by_output["flag"].weight) == ("mean_squared_error", 0.5)
    assert by_output["cls"].loss == "sparse_categorical_crossentropy" and by_output["cls"].from_logits
    assert "compiled loss in the file" in by_output["cls"].reason
    losses, per_example = train_steps(workload)
    assert per_example == BATCH and losses[-1] < losses[0]


def test_h5_file_uses_its_compiled_loss(compiled_h5):
    workload = open_user_workload(compiled_h5)
    (choice,) = workload.losses
    assert choice.loss == "mean_absolute_error" and choice.target == "values"
    x, y = next(iter(workload.make_dataset(BATCH)))
    assert tuple(y.shape) == (BATCH, 3) and y.dtype.name == "float32"
    losses, _ = train_steps(workload)
    assert losses[-1] < losses[0]


def test_python_file_with_build_model_and_build_dataset(py_model):
    workload = open_user_workload(py_model, trust=True)
    assert workload.data == PYTHON_DATA and workload.steps_per_epoch(16) == 3  # 40 examples: 16, 16, 8
    assert workload.losses[0].loss == "sparse_categorical_crossentropy" and "Python file" in workload.losses[0].reason
    assert workload.optimizer_name() == "sgd"
    optimizer = workload.make_optimizer(0.125)
    assert type(optimizer).__name__ == "SGD" and float(optimizer.learning_rate) == 0.125
    shapes = [tuple(x.shape) for x, _ in workload.make_dataset(16).take(4)]
    assert shapes == [(16, 4)] * 4  # repeated and re-cut into whole batches: no short last batch
    losses, per_example = train_steps(workload)
    assert per_example == BATCH and losses[-1] < losses[0]


def test_python_file_that_compiles_its_model_trains_with_that_loss_on_synthetic_data(tmp_path):
    body = """
        import keras

        def build_model():
            model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)])
            model.compile(optimizer="adam", loss="mean_absolute_error")
            return model
    """
    workload = open_user_workload(write_py(tmp_path, "compiled.py", body), trust=True)
    described = workload.describe()
    assert described["compiled"] and described["data"] == SYNTHETIC and not described["has_build_dataset"]
    assert described["losses"][0]["loss"] == "mean_absolute_error" and "build_model() compiled" in described["losses"][0]["reason"]
    assert workload.optimizer_name() is None and workload.make_optimizer(0.1, "adam") is None  # the run's setting
    losses, _ = train_steps(workload)
    assert losses[-1] < losses[0]


def test_lambda_model_trains_once_trusted(lambda_keras):
    workload = open_user_workload(lambda_keras, trust=True)
    assert workload.losses[0].loss == "sparse_categorical_crossentropy" and not workload.losses[0].from_logits
    losses, _ = train_steps(workload)
    assert losses[-1] < losses[0]


def test_npz_data_by_input_and_output_name(tmp_path, two_io_keras):
    rng = np.random.default_rng(0)
    path = tmp_path / "data.npz"
    np.savez(
        path,
        ids=rng.integers(0, VOCAB, (20, 6)),
        feat=rng.standard_normal((20, 3)),
        cls=rng.integers(0, CLASSES, 20),
        flag=rng.integers(0, 2, 20),
    )
    workload = open_user_workload(two_io_keras, data=str(path))
    assert workload.num_examples == 20 and workload.steps_per_epoch(BATCH) == 2
    _, (_, flag) = next(iter(workload.make_dataset(BATCH)))
    assert tuple(flag.shape) == (BATCH, 1)  # a flat 0/1 column fitted to the (None, 1) output
    losses, _ = train_steps(workload)
    assert losses[-1] < losses[0]


def _misaligned(values: np.ndarray, by: int) -> np.ndarray:
    """A copy of `values` that starts `by` bytes past a 64-byte boundary, wherever the allocator puts memory."""
    copy = aligned_empty((values.nbytes + by,), np.uint8)[by:].view(values.dtype).reshape(values.shape)
    copy[...] = values
    return copy


def test_loaded_arrays_are_aligned_for_tensorflow_and_become_tensors_over_the_same_memory():
    """An array NumPy allocates need not start on a 64-byte boundary; aligned, TensorFlow takes it without a copy."""
    plain = _misaligned(np.arange(1 << 20, dtype=np.float32).reshape(-1, 64), by=16)
    assert plain.ctypes.data % TENSOR_ALIGNMENT == 16
    ready = aligned(plain)
    assert ready.ctypes.data % TENSOR_ALIGNMENT == 0 and ready.dtype == plain.dtype and np.array_equal(ready, plain)
    assert aligned(ready) is ready, "no second copy"
    tensor = tensor_view(ready)
    assert tensor.shape == ready.shape and np.array_equal(tensor.numpy(), plain)
    ready[0, 0] = -1.0  # the tensor is a view of the array's memory, not a copy
    assert float(tensor[0, 0]) == -1.0
    text = np.array(["a review", "another"])
    assert aligned(text) is text and tensor_view(text) is text and tensor_view(plain) is plain


def test_npz_that_does_not_fit_names_the_input_and_both_shapes(tmp_path, two_io_keras, compiled_h5):
    rng = np.random.default_rng(0)
    wrong = tmp_path / "wrong.npz"
    np.savez(
        wrong,
        ids=rng.integers(0, VOCAB, (20, 6)),
        feat=rng.standard_normal((20, 4)),
        cls=rng.integers(0, CLASSES, 20),
        flag=rng.integers(0, 2, 20),
    )
    with pytest.raises(ModelDataError) as error:
        open_user_workload(two_io_keras, data=str(wrong))
    message = str(error.value)
    assert message.startswith(f"{wrong}: ") and "input 'feat'" in message and "(3,)" in message and "(20, 4)" in message
    assert "'ids'" not in message  # only what is wrong
    missing = tmp_path / "xy.npz"
    np.savez(missing, x=rng.standard_normal((20, 4)))
    with pytest.raises(ModelDataError, match="no array for the model's output"):
        open_user_workload(compiled_h5, data=str(missing))
    objects = tmp_path / "objects.npz"
    np.savez(objects, x=np.array([{"a": 1}] * 3, dtype=object), y=np.zeros((3, 3)))
    with pytest.raises(ModelDataError, match="never unpickled"):
        open_user_workload(compiled_h5, data=str(objects))
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not arrays")
    with pytest.raises(ModelDataError, match="not an .npz file"):
        open_user_workload(compiled_h5, data=str(garbage))
    ids_too_big = tmp_path / "ids.npz"
    np.savez(ids_too_big, ids=np.full((4, 6), VOCAB), feat=np.zeros((4, 3)), cls=np.zeros(4, int), flag=np.zeros(4))
    with pytest.raises(ModelDataError, match=rf"input 'ids' takes ids in \[0, {VOCAB}\)"):
        open_user_workload(two_io_keras, data=str(ids_too_big))


def test_an_npz_whose_arrays_would_not_fit_in_memory_is_refused_before_anything_is_inflated(tmp_path, compiled_h5):
    """A few KB of compressed zeros once took 22 GB to train: the arrays' sizes are read from their headers first."""
    real = tmp_path / "real.npz"
    x, y = np.zeros((20, 4), np.float32), np.zeros((20, 3), np.float64)
    np.savez_compressed(real, x=x, y=y)
    assert npz_array_bytes(str(real)) == {"x": x.nbytes, "y": y.nbytes}
    huge = tmp_path / "huge.npz"  # x claims 2**28 x 1024 float32 (1 TiB); only its header and 1 MiB of zeros are written
    with zipfile.ZipFile(huge, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("x.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False, "shape": (2**28, 1024)})
            member.write(bytes(1 << 20))
        with archive.open("y.npy", "w") as member:
            np.save(member, np.zeros((4, 3)))
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ModelDataError, match=r"its arrays take 1\.0 TiB once loaded \('x': 1\.0 TiB\), more than 25% of the .* available"):
        open_user_workload(compiled_h5, data=str(huge))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 512 * 1024  # KiB: nothing was inflated


def test_integer_input_without_embedding_needs_a_vocabulary(tmp_path):
    import keras

    ids = keras.Input((4,), dtype="int32", name="tokens")
    encoded = keras.layers.CategoryEncoding(num_tokens=7, output_mode="multi_hot")(ids)
    path = tmp_path / "counts.keras"
    keras.Model(ids, keras.layers.Dense(1)(encoded)).save(path)
    workload = open_user_workload(path)
    assert workload.describe()["inputs"][0]["vocab"] is None
    with pytest.raises(ModelDataError) as error:
        workload.make_dataset(BATCH)
    assert "input 'tokens'" in str(error.value) and "--vocab" in str(error.value)
    with_vocab = open_user_workload(path, vocab=7)
    x, _ = next(iter(with_vocab.make_dataset(BATCH)))
    assert int(np.max(x)) < 7
    losses, _ = train_steps(with_vocab)
    assert np.isfinite(losses).all()


@pytest.mark.slow
def test_mixed_precision_reaches_a_loaded_model_but_not_its_outputs(two_io_keras):
    import keras

    workload = open_user_workload(two_io_keras)
    previous = keras.config.dtype_policy().name
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = workload.build_model()
        assert model.get_layer("hidden").compute_dtype == "bfloat16"
        assert model.get_layer("cls").compute_dtype == "float32" and model.get_layer("flag").compute_dtype == "float32"
        assert {str(v.dtype) for v in model.weights} == {"float32"}
        losses, _ = train_steps(workload)
    finally:
        keras.config.set_dtype_policy(previous)
    assert np.isfinite(losses).all()


def test_open_sequence_length_gets_a_fixed_synthetic_length(tmp_path):
    import keras

    tokens = keras.Input((None,), dtype="int32", name="tokens")
    per_token = keras.layers.Dense(CLASSES)(keras.layers.Embedding(VOCAB, 4)(tokens))
    path = tmp_path / "tagger.keras"
    keras.Model(tokens, per_token).save(path)
    workload = open_user_workload(path)
    x, y = next(iter(workload.make_dataset(BATCH)))
    assert tuple(x.shape) == (BATCH, 32) and tuple(y.shape) == (BATCH, 32)
    losses, per_example = train_steps(workload)
    assert per_example == BATCH and losses[-1] < losses[0]


@pytest.mark.slow
def test_mirrored_on_two_logical_cpus_builds_in_scope_and_trains_like_the_engine(two_io_keras, two_cpus):
    """The engine's pattern: build_model() in strategy.scope(), distributed batches, per-replica average loss."""
    import keras
    import tensorflow as tf

    workload = open_user_workload(two_io_keras)
    strategy = tf.distribute.MirroredStrategy([f"/device:{d}" for d in two_cpus], cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        model = workload.build_model(seed=0)
        optimizer = keras.optimizers.Adam(0.01)
        optimizer.build(model.trainable_variables)
    assert all(isinstance(v.value, tf.distribute.DistributedValues) for v in model.trainable_variables)  # mirrored on both CPUs
    iterator = iter(strategy.experimental_distribute_dataset(workload.make_dataset(BATCH, seed=0)))

    def step(batch):
        x, y = batch
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(workload.loss_fn(y, model(x, training=True)), global_batch_size=BATCH)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(iterator):
        return strategy.reduce("SUM", strategy.run(step, args=(next(iterator),)), axis=None)

    losses = [float(train_step(iterator)) for _ in range(3)]
    assert strategy.num_replicas_in_sync == 2 and all(np.isfinite(losses))


def test_vocab_applies_only_where_the_model_says_no_range_and_masks_are_all_ones(tmp_path):
    import keras

    ids = keras.Input((6,), dtype="int32", name="token_ids")
    loose = keras.Input((6,), dtype="int32", name="bucket")
    mask = keras.Input((6,), dtype="int32", name="padding_mask")
    embedded = keras.layers.Embedding(VOCAB, 4)(ids)
    masked = embedded * keras.ops.expand_dims(keras.ops.cast(mask, "float32"), -1)
    loose_feature = keras.ops.cast(loose, "float32")
    pooled = keras.layers.Concatenate()([keras.layers.GlobalAveragePooling1D()(masked), loose_feature])
    path = tmp_path / "masked.keras"
    keras.Model([ids, loose, mask], keras.layers.Dense(3)(pooled)).save(path)
    workload = open_user_workload(path, vocab=5)
    inputs = {i.name: i for i in workload.signature.inputs}
    assert inputs["token_ids"].vocab == VOCAB, "--vocab must not cap a range the Embedding gives"
    assert (inputs["bucket"].vocab, inputs["bucket"].vocab_source) == (5, "--vocab")
    assert inputs["padding_mask"].fill == "ones" and inputs["padding_mask"].vocab is None
    mask_note = inputs["padding_mask"].note()
    assert "mask" in mask_note and "all ones" in mask_note and mask_note in workload.describe()["notes"]
    x, _ = next(iter(workload.make_dataset(BATCH)))
    by_name = dict(zip([i.name for i in workload.signature.inputs], x, strict=True))
    assert np.all(by_name["padding_mask"].numpy() == 1) and by_name["token_ids"].numpy().max() < VOCAB
    assert by_name["bucket"].numpy().max() < 5
    losses, _ = train_steps(workload)
    assert np.all(np.isfinite(losses))


@pytest.fixture(scope="module")
def text_model(tmp_path_factory, two_cpus):
    """A model that takes raw text: a string input, TextVectorization adapted to a few sentences, an Embedding, two classes."""
    import keras

    vectorize = keras.layers.TextVectorization(max_tokens=100, output_sequence_length=12)
    vectorize.adapt(["the cat sat on the mat", "dogs bark loudly at night", "a quick brown fox jumps over the lazy dog"])
    inputs = keras.Input((1,), dtype="string", name="review")
    hidden = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(100, 8)(vectorize(inputs)))
    model = keras.Model(inputs, keras.layers.Dense(2)(hidden))
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    path = tmp_path_factory.mktemp("text") / "text_classifier.keras"
    model.save(path)
    return path, vectorize.get_vocabulary()


@pytest.mark.slow
def test_a_text_vectorization_model_trains_on_synthetic_sentences_of_its_own_words_and_on_a_string_npz(text_model, tmp_path):
    from core import RunConfig, RunStatus, run_training

    path, vocabulary = text_model
    workload = open_user_workload(str(path), data=SYNTHETIC)
    (review,) = workload.signature.inputs
    assert review.is_text and set(review.words) == set(vocabulary) - {"", "[UNK]"}
    assert "TextVectorization" in review.vocab_source and "synthetic sentences" in review.note() and review.vocab_source in review.note()
    x, _ = next(iter(workload.make_dataset(BATCH, seed=0)))
    assert x.dtype.name == "string" and all(word in review.words for word in x.numpy()[0, 0].decode().split())
    synthetic = run_training(RunConfig(model=str(path), steps=6))
    assert synthetic.status == RunStatus.COMPLETED and synthetic.samples_per_s > 0, synthetic.message

    data = tmp_path / "reviews.npz"
    sentences = np.array(["the cat sat on the mat", "a lazy dog", "dogs bark at the fox"] * 20)  # <U22, one per example
    np.savez(data, x=sentences, y=np.arange(60) % 2)
    from_file = run_training(RunConfig(model=str(path), dataset=str(data), steps=6))
    assert from_file.status == RunStatus.COMPLETED and from_file.samples_per_s > 0, from_file.message
    numbers = tmp_path / "numbers.npz"
    np.savez(numbers, x=np.zeros((60, 1)), y=np.arange(60) % 2)
    with pytest.raises(ModelDataError, match=r"input 'review' takes text \(strings\), the file gives float64"):
        open_user_workload(str(path), data=str(numbers))


@pytest.mark.slow
def test_ids_past_the_range_of_the_embedding_they_feed_fail_with_the_ops_own_message_not_a_guess(tmp_path, two_cpus):
    """The ids reach Embedding(2) through a float layer, so their range is unknown and --vocab 50 is believed: TensorFlow's
    error reads "Graph execution error:" on its first line; the run's message names the node and the op's own words."""
    import keras

    from core import RunConfig, RunStatus, run_training

    ids = keras.Input((8,), dtype="int32", name="ids")
    hidden = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(2, 4)(keras.layers.Rescaling(1.0)(ids)))
    model = keras.Model(ids, keras.layers.Dense(3)(hidden))
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    path = tmp_path / "hidden_range.keras"
    model.save(path)
    result = run_training(RunConfig(model=str(path), vocab=50, steps=3))
    assert result.status == RunStatus.FAILED
    assert "TensorFlow rejected the computation at " in result.message and "GatherV2: indices[" in result.message
    assert "is not in [0, 2)" in result.message and "--vocab N" in result.message and "replicas" not in result.message
    # --vocab NAME=N sets that input's range over anything the model says: the run trains
    named = run_training(RunConfig(model=str(path), vocab=50, vocab_by_input=(("ids", 2),), steps=3))
    assert named.status == RunStatus.COMPLETED, named.message
    assert "input 'ids': ids in [0, 2) (--vocab ids=2)" in named.warnings
    with pytest.raises(ModelFileError, match="--vocab names no input idz: its inputs are ids"):
        open_user_workload(str(path), vocab_by_input=(("idz", 2),))
