"""RunConfig validation: every bad value names its field, what was given and what is allowed.

A RunConfig checks what a plain value can; the model and data against the catalogue are `check_workload`'s,
which every front end calls (the job options, the window's form, `run_job`).
"""

import math

import pytest

from core.config import ConfigError, RunConfig
from core.workloads.workload import check_workload


@pytest.mark.parametrize(
    ("changes", "field", "allowed_fragment"),
    [
        ({"batch_size": 0}, "batch_size", "whole number from 1"),
        ({"batch_size": -8}, "batch_size", "whole number from 1"),
        ({"learning_rate": -0.1}, "learning_rate", "> 0"),
        ({"learning_rate": math.nan}, "learning_rate", "> 0"),
        ({"learning_rate": "abc"}, "learning_rate", "> 0"),
        ({"model": "gpt5"}, "model", "mlp"),
        ({"dataset": "imagenet"}, "dataset", "digits"),
        ({"strategy": "parameter-server"}, "strategy", "mirrored"),
        ({"precision": "float8"}, "precision", "bfloat16"),
        ({"optimizer": "lion"}, "optimizer", "adam"),
        ({"steps": 0}, "steps", "whole number"),
        ({"steps_per_call": 0}, "steps_per_call", "whole number"),
        ({"strategy": "one-device"}, "devices", "exactly one device"),
        ({"strategy": "mirrored", "devices": ("CPU:0", "GPU:0")}, "devices", "one kind"),
        ({"devices": ("not a device",)}, "devices", "CPU:0"),
        ({"model": "transformer", "dataset": "digits"}, "dataset", "imdb"),
        ({"strategy": "tpu"}, "tpu_address", "grpc://"),
    ],
)
def test_invalid_values_raise_config_error_naming_field(changes, field, allowed_fragment):
    with pytest.raises(ConfigError) as info:
        check_workload(RunConfig(**changes))
    error = info.value
    assert error.field == field
    message = str(error)
    assert message.startswith(f"{field}:")
    assert repr(error.given) in message
    assert allowed_fragment in message


def test_a_config_knows_no_catalogue_and_check_workload_refuses_what_it_lacks(tmp_path, monkeypatch):
    """A plain value takes any model name; the catalogue check names what exists. A bare folder here is a model file, made absolute."""
    plain = RunConfig(model="gpt5")
    with pytest.raises(ConfigError, match="model: got 'gpt5'; allowed: mlp"):
        check_workload(plain)
    assert check_workload(RunConfig(model="mlp")) == RunConfig(model="mlp")
    (tmp_path / "saved").mkdir()
    monkeypatch.chdir(tmp_path)
    assert check_workload(RunConfig(model="saved", optimizer="file")).model == str(tmp_path / "saved")
    with pytest.raises(ConfigError, match="optimizer: got 'file'"):
        check_workload(RunConfig(model="mlp", optimizer="file"))


def test_valid_config_round_trips_through_dict():
    config = RunConfig(model="cnn", strategy="mirrored", devices=("/device:CPU:0", "cpu:1"), batch_size=32, precision="bfloat16")
    assert config.devices == ("CPU:0", "CPU:1")
    assert RunConfig.from_dict(config.to_dict()) == config


def test_float16_on_cpu_is_allowed_but_warns():
    config = RunConfig(precision="float16")
    warnings = config.warnings(has_accelerator=False)
    assert any("50x slower" in w for w in warnings)
    assert config.warnings(has_accelerator=True) == []


def test_device_that_does_not_exist_is_refused(two_cpus):
    from core.training.engine import check_against_machine

    with pytest.raises(ConfigError) as info:
        check_against_machine(RunConfig(strategy="one-device", devices=("GPU:7",)))
    assert "GPU:7" in str(info.value) and "CPU:0" in str(info.value)


def test_whole_number_learning_rate_becomes_float_and_trains(two_cpus):
    from core.runner import run_training

    config = RunConfig(learning_rate=1, optimizer="sgd", steps=2)
    assert isinstance(config.learning_rate, float)
    assert run_training(config).status == "completed"


def test_custom_objects_for_a_sample_model_are_refused_and_an_old_stored_run_still_reads_back():
    """`--custom-objects` with `--model mlp` was silently ignored: it is refused, naming the field; a run stored that way still loads."""
    with pytest.raises(ConfigError) as caught:
        check_workload(RunConfig(model="mlp", custom_objects="/tmp/layers.py"))
    assert caught.value.field == "custom_objects" and "sample model" in caught.value.allowed
    stored = {**RunConfig(model="mlp").to_dict(), "custom_objects": "/tmp/layers.py"}
    assert RunConfig.from_dict(stored) == RunConfig(model="mlp")
