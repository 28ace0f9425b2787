"""The named tf.keras 2 fixes on configs as tf.keras 2 writes them (no TensorFlow needed)."""

from __future__ import annotations

from core.workloads.legacy_compat import fix_config, summary


def layer(class_name: str, **config) -> dict:
    return {"class_name": class_name, "config": {"name": class_name.lower(), **config}}


def functional(*layers: dict) -> dict:
    return {"class_name": "Functional", "config": {"name": "m", "layers": list(layers)}}


def test_neutral_legacy_arguments_are_dropped_and_named():
    config = functional(
        layer("DepthwiseConv2D", groups=1, kernel_size=[3, 3]),
        layer("DepthwiseConv2D", groups=1, kernel_size=[3, 3]),
        layer("Bidirectional", layer=layer("LSTM", units=3, time_major=False)),
    )
    fixed, fixes = fix_config(config)
    layers = fixed["config"]["layers"]
    assert "groups" not in layers[0]["config"] and layers[0]["config"]["kernel_size"] == [3, 3]
    assert "time_major" not in layers[2]["config"]["layer"]["config"]
    assert [(f.text, f.layers) for f in fixes] == [("DepthwiseConv2D: dropped groups=1", 2), ("LSTM: dropped time_major=False", 1)]
    said = summary(fixes)
    assert said.startswith("loaded with 2 legacy fixes") and all(str(f) in said for f in fixes) and "(2 layers)" in said
    assert config["config"]["layers"][0]["config"]["groups"] == 1  # the input is left as it was


def test_a_value_that_would_change_the_model_is_left_for_keras_to_refuse():
    fixed, fixes = fix_config(functional(layer("Conv2DTranspose", groups=2), layer("GRU", time_major=True)))
    assert fixes == ()
    assert fixed["config"]["layers"][0]["config"]["groups"] == 2 and fixed["config"]["layers"][1]["config"]["time_major"] is True


def test_a_keras_3_config_needs_no_fix():
    config = functional(layer("Dense", units=3), layer("DepthwiseConv2D", kernel_size=[3, 3]))
    assert fix_config(config) == (config, ())
    assert summary(()) == ""
