"""The memory estimate against the variables Keras really creates."""

from __future__ import annotations

import math

import pytest

from core.workloads.memory_estimate import MIXED_NOTE, estimate_memory


def _model():
    import keras

    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(16), keras.layers.BatchNormalization(), keras.layers.Dense(3)])


def _bytes(variables) -> int:
    return sum(math.prod(v.shape) * (2 if "16" in str(v.dtype) else 4) for v in variables if len(v.shape))


def _counts(model) -> tuple[int, int]:
    trainable = sum(math.prod(v.shape) for v in model.trainable_weights)
    return trainable, sum(math.prod(v.shape) for v in model.weights) - trainable


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("adam", {}),
        ("adamw", {}),
        ("adam", {"amsgrad": True}),
        ("rmsprop", {}),
        ("rmsprop", {"momentum": 0.9}),
        ("sgd", {}),
        ("sgd", {"momentum": 0.9}),
    ],
)
def test_estimate_matches_the_optimizer_state_keras_builds(name, config):
    import keras

    model = _model()
    optimizer = keras.optimizers.get({"class_name": name, "config": config})
    optimizer.build(model.trainable_variables)
    trainable, non_trainable = _counts(model)
    estimate = estimate_memory(trainable, non_trainable, name, optimizer_config=config)
    assert non_trainable > 0 and estimate.weight_bytes == _bytes(model.weights)
    assert estimate.gradient_bytes == _bytes(model.trainable_weights)
    assert estimate.optimizer_bytes == _bytes(optimizer.variables)
    assert estimate.total_bytes == estimate.weight_bytes + estimate.gradient_bytes + estimate.optimizer_bytes


def test_mixed_precision_keeps_float32_variables_so_the_estimate_holds():
    import keras
    import tensorflow as tf

    previous = keras.config.dtype_policy().name
    keras.config.set_dtype_policy("mixed_float16")
    try:
        model = _model()
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam())
        optimizer.build(model.trainable_variables)
        x = tf.random.normal((4, 6))
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
    finally:
        keras.config.set_dtype_policy(previous)
    trainable, non_trainable = _counts(model)
    estimate = estimate_memory(trainable, non_trainable, "adam", precision="float16")
    assert {g.dtype.name for g in gradients} == {"float32"}
    assert estimate.weight_bytes == _bytes(model.weights) and estimate.optimizer_bytes == _bytes(optimizer.variables)
    float32 = estimate_memory(trainable, non_trainable, "adam", precision="off")
    assert (estimate.weight_bytes, estimate.gradient_bytes, estimate.optimizer_bytes) == (
        float32.weight_bytes,
        float32.gradient_bytes,
        float32.optimizer_bytes,
    )
    assert MIXED_NOTE in estimate.note


def test_unknown_optimizer_is_assumed_like_adam_and_says_so():
    estimate = estimate_memory(10, 0, "shampoo")
    assert estimate.optimizer_slots == 2 and "shampoo" in estimate.note
