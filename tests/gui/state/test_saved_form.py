"""The run form's state as settings keep it: a round trip, each saved value checked, the previous version's layout read."""

from __future__ import annotations

import json

from core.training.strategies import StrategyChoice
from gui.state.run_form import ModelFile, RunFormState
from gui.state.saved_form import PREVIOUS_KEYS, apply_saved, read_previous, read_saved, saved_values

# What the previous version saved (QSettings reads every value of an INI file back as text): one value per widget,
# by its objectName, and the logging box's own keys.
PREVIOUS = {
    "runForm/modelCombo": "cnn",
    "runForm/datasetCombo": "synthetic",
    "runForm/vocabEdit": "",
    "runForm/backendCombo": "tensorflow",
    "runForm/strategyCombo": "mirrored",
    "runForm/deviceCombo": "CPU:1",
    "runForm/deviceList": '["CPU:0", "CPU:1"]',
    "runForm/workersSpin": "3",
    "runForm/clusterTimeoutSpin": "120",
    "runForm/tpuAddressEdit": "grpc://10.0.0.9:8470",
    "runForm/tpuTimeoutSpin": "45",
    "runForm/batchSizeEdit": "32",
    "runForm/stepsEdit": "77",
    "runForm/stepsUnitCombo": "steps",
    "runForm/learningRateEdit": "0.01",
    "runForm/optimizerCombo": "sgd",
    "runForm/precisionCombo": "bfloat16",
    "runForm/xlaCheck": "true",
    "runForm/stepsPerCallEdit": "4",
    "runForm/allowNetworkWorkersCheck": "true",
    "logging/tensorboard": "true",
    "logging/tensorboard_dir": "/tmp/boards",
    "logging/profile": "true",
    "logging/profile_first": "2",
    "logging/profile_last": "4",
}


def test_the_user_s_choices_survive_a_round_trip_and_what_the_app_knows_is_never_saved(tmp_path):
    state = RunFormState(model="cnn", dataset="synthetic", strategy="mirrored", mirrored_devices=("CPU:0", "CPU:1"), batch_size="abc")
    state.tensorboard, state.profile_last = True, 9
    state.strategies = (StrategyChoice("mirrored", "Mirrored", True),)
    state.model_file = ModelFile(str(tmp_path / "m.keras"), "00", True)
    state.allow_network_workers, state.pending = True, "Opening m.keras…"
    saved = json.loads(json.dumps(saved_values(state)))
    assert not {"strategies", "model_file", "pending", "isolation_problem", "allow_network_workers"} & saved.keys()
    values, problems = read_saved(saved)
    assert problems == []
    restored = RunFormState()
    apply_saved(restored, values)
    assert saved_values(restored) == saved_values(state)
    assert restored.batch_size == "abc", "text is kept as typed: the form explains it"
    assert restored.mirrored_devices == ("CPU:0", "CPU:1") and not restored.allow_network_workers


def test_each_saved_value_is_checked_and_a_bad_one_is_said_while_the_others_are_restored():
    saved = {
        "batch_size": 5,
        "xla": "yes",
        "workers": 1000,
        "precision": "float64",
        "model": "no such model",
        "mirrored_devices": "CPU:0",
        "length": "12",
        "a_later_field": 1,
    }
    values, problems = read_saved(saved)
    assert values == {"length": "12"}, "a name the state lacks (a later version's) is left out quietly"
    assert {name: expected for name, _, expected in problems} == {
        "batch_size": "a text",
        "xla": "true or false",
        "workers": "a whole number from 1 to 64",
        "precision": "one of off, float16, bfloat16",
        "model": "a sample model (mlp, cnn, resnet, transformer) or a model file's path",
        "mirrored_devices": "a list of device names",
    }
    assert read_saved(["not", "an object"]) == ({}, [("", ["not", "an object"], "a JSON object of the run form's choices")])


def test_the_previous_version_s_layout_is_read_into_the_state():
    values, problems = read_previous(PREVIOUS)
    assert problems == []
    state = RunFormState()
    apply_saved(state, values)
    assert (state.model, state.dataset, state.strategy, state.device) == ("cnn", "synthetic", "mirrored", "CPU:1")
    assert state.mirrored_devices == ("CPU:0", "CPU:1") and (state.workers, state.cluster_timeout_s) == (3, 120)
    assert (state.tpu_address, state.tpu_timeout_s) == ("grpc://10.0.0.9:8470", 45)
    assert (state.batch_size, state.length, state.learning_rate, state.optimizer) == ("32", "77", "0.01", "sgd")
    assert (state.precision, state.xla, state.steps_per_call) == ("bfloat16", True, "4")
    assert (state.tensorboard, state.tensorboard_dir, state.profile, state.profile_first, state.profile_last) == (
        True,
        "/tmp/boards",
        True,
        2,
        4,
    )
    assert not state.allow_network_workers, "the network confirmation is asked for each session"
    assert set(PREVIOUS) - set(PREVIOUS_KEYS) == {"runForm/allowNetworkWorkersCheck"}


def test_a_previous_value_of_the_wrong_kind_is_said_under_its_own_key_and_an_empty_log_folder_gives_way():
    values, problems = read_previous(
        {"runForm/stepsEdit": ["a", " b"], "runForm/workersSpin": "two", "logging/tensorboard_dir": "", "runForm/batchSizeEdit": "12"}
    )
    assert values == {"batch_size": "12"}
    assert [(key, expected) for key, _, expected in problems] == [
        ("runForm/workersSpin", "a whole number from 1 to 64"),
        ("runForm/stepsEdit", "a text"),
    ]
