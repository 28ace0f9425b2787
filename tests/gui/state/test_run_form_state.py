"""The run form's state without a widget: its change events, the fields that follow others, the run it describes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunConfig
from core.training.strategies import StrategyChoice
from gui.state.run_form import ModelFile, RunFormState

ROOT = Path(__file__).resolve().parents[3]
MIRRORED = StrategyChoice("mirrored", "Mirrored", False, "Needs two or more GPUs.")
NO_QT_SCRIPT = """
import importlib.abc, json, sys, types

class NoQt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("PySide6", "shiboken6", "pyqtgraph"):
            raise ImportError(f"{name} is not installed here")

sys.meta_path.insert(0, NoQt())
gui = types.ModuleType("gui")  # the package's __init__ installs a PySide6 import hook: the state's modules are loaded alone
gui.__path__ = ["gui"]
sys.modules["gui"] = gui
from gui.state.run_form import RunFormState
from gui.state.saved_form import read_saved, saved_values

state = RunFormState()
state.batch_size = "32"
values, problems = read_saved(json.loads(json.dumps(saved_values(state))))
print(json.dumps([state.config().batch_size, values["batch_size"], problems]))
"""


def test_the_state_and_its_saved_form_work_where_qt_cannot_be_imported():
    done = subprocess.run([sys.executable, "-c", NO_QT_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [32, "32", []]


def test_a_change_emits_its_field_s_event_once_and_the_same_value_emits_nothing():
    state = RunFormState()
    seen: list[tuple[str, object]] = []
    state.events.batch_size.connect(lambda value: seen.append(("batch_size", value)))
    state.events.all.connect(lambda info: seen.append(("all", info.signal.name)))
    state.batch_size = "32"
    state.batch_size = "32"
    state.xla = True
    assert seen == [("batch_size", "32"), ("all", "batch_size"), ("all", "xla")]


def test_the_defaults_describe_the_cli_s_run():
    config, errors = RunFormState().check()
    assert errors == [] and config is not None
    assert (config.model, config.dataset, config.strategy) == ("mlp", "digits", "default")
    cli = RunConfig()
    assert (config.batch_size, config.steps, config.learning_rate, config.optimizer, config.precision) == (
        cli.batch_size,
        cli.steps,
        cli.learning_rate,
        cli.optimizer,
        cli.precision,
    )
    assert not config.hooks


def test_text_as_typed_is_explained_field_by_field_and_read_once_valid():
    state = RunFormState(batch_size="abc", learning_rate="nan", steps_per_call="0")
    config, errors = state.check()
    assert config is None
    assert errors == [
        "Batch size: 'abc' is not a whole number; use e.g. 64",
        "Learning rate: 'nan' is not a number; use e.g. 0.001",
        "Steps per call: 0 is out of range; use a whole number from 1 to 10,000, e.g. 1",
    ]
    state.batch_size, state.learning_rate, state.steps_per_call = "1,024", "1e-2", "5"
    state.length_unit, state.length = "epochs", "3"
    config = state.config()
    assert config is not None and (config.batch_size, config.learning_rate, config.steps_per_call, config.epochs) == (1024, 0.01, 5, 3)
    state.length = "200000"
    assert state.errors() == ["Epochs: 200000 is out of range; use a whole number from 1 to 100,000, e.g. 1"]


def test_steps_per_call_follows_the_strategy_until_the_user_types_their_own():
    state = RunFormState()
    state.strategy = "tpu"
    assert state.steps_per_call == "100", "a TPU step is launched from the host: many steps per call"
    state.strategy = "default"
    assert state.steps_per_call == "1"
    state.steps_per_call = "7"
    state.strategy = "tpu"
    assert state.steps_per_call == "7", "the user's own value stays"


def test_where_it_trains_is_checked_against_the_strategies_the_machine_offers():
    state = RunFormState(strategy="mirrored", mirrored_devices=("CPU:0",))
    assert state.errors() == ["Devices: tick two or more devices of one kind for mirrored."], "strategies not known yet"
    state.strategies = (MIRRORED,)
    assert state.errors()[0] == "Strategy Mirrored: Needs two or more GPUs."
    state.strategy = "one-device"
    assert state.errors() == ["Devices: pick the device to train on."]
    state.device = "CPU:0"
    assert state.config().devices == ("CPU:0",)


def test_a_cluster_of_hosts_and_local_workers_that_cannot_be_isolated():
    state = RunFormState(strategy="multi-worker", use_hosts=True, hosts="10.0.0.1:2222, nonsense")
    [error] = state.errors()
    assert error.startswith("Cluster: 'nonsense' is not host:port; use host:port addresses such as 10.0.0.2:2222")
    state.hosts = "10.0.0.1:2222\n10.0.0.2:2222"
    config = state.config()
    assert config.cluster_hosts == ("10.0.0.1:2222", "10.0.0.2:2222") and config.workers == 2
    state.use_hosts, state.isolation_problem = False, "no user namespaces"
    assert "cannot be isolated from the network here (no user namespaces)" in state.errors()[0]
    state.allow_network_workers = True
    config = state.config()
    assert config.allow_network_workers and config.workers == 2 and config.cluster_hosts == ()


def test_a_model_file_is_read_with_what_the_form_knows_of_it(tmp_path):
    path = str(tmp_path / "model.keras")
    state = RunFormState(model=path, dataset="synthetic", pending="Opening model.keras…")
    assert state.errors() == ["Opening model.keras…"]
    state.pending = ""
    assert state.errors() == ["Model: model.keras is not read yet: choose it again in the Model menu."]
    state.model_file = ModelFile(path, "ab" * 32, False, open_ranges=("tokens",), tf_only_layers=("TextVectorization",))
    [error] = state.errors()
    assert error.startswith("Vocabulary: input 'tokens' takes integer ids that feed no Embedding")
    state.vocab = "1"
    assert state.errors() == ["Vocabulary: 1 is out of range; use a whole number from 2 to 2,147,483,647, e.g. 1000"]
    state.vocab = "7"
    state.backend = "jax"
    assert state.errors() == [
        "Backend: TextVectorization trains on the TensorFlow backend only (Keras builds it on TensorFlow ops): pick Backend TensorFlow."
    ]
    state.backend = "tensorflow"
    fields = state._model_fields()
    assert fields == {"model": path, "dataset": "synthetic", "trust": False, "vocab": 7, "model_sha256": "ab" * 32, "custom_objects": ""}


def test_the_hooks_are_recorded_in_the_config(tmp_path):
    state = RunFormState(tensorboard=True, tensorboard_dir=str(tmp_path / "tb"), profile=True, profile_first=2, profile_last=4)
    assert state.config().hooks.to_dict() == {"tensorboard": str(tmp_path / "tb"), "profile": "2-4"}
    state.tensorboard = False
    assert state.config().hooks.to_dict() == {"profile": "2-4"}


def test_apply_fills_the_fields_a_search_found_and_refuses_before_changing_anything():
    state = RunFormState()
    state.apply({"batch_size": 256, "precision": "bfloat16", "xla": True, "steps_per_call": 20, "learning_rate": 5e-4, "optimizer": None})
    config = state.config()
    assert (config.batch_size, config.precision, config.xla, config.steps_per_call, config.learning_rate) == (
        256,
        "bfloat16",
        True,
        20,
        5e-4,
    )
    assert state.optimizer == "adam", "None leaves a field as it is"
    with pytest.raises(ValueError, match="no field for seed"):
        state.apply({"seed": 3, "batch_size": 8})
    with pytest.raises(ValueError, match="precision 'float64'"):
        state.apply({"precision": "float64", "batch_size": 8})
    assert state.batch_size == "256"
    state.apply({"epochs": 4})
    assert (state.length_unit, state.length) == ("epochs", "4")
