"""RunConfig's grouped settings: the hooks (`HookSettings`, stored as `extra.hooks`) and the model (`ModelRef`)."""

from __future__ import annotations

import json
import os

import pytest

from core.config import ConfigError, HookSettings, ModelRef, RunConfig, hooks_in_words, recorded_hooks
from core.workloads.model_file import ModelFileError, file_sha256
from core.workloads.model_probe import describe_model_file
from core.workloads.workload import check_model_file
from tests.core.workloads.conftest import write_py

FLAT_KEYS = {
    "model", "dataset", "strategy", "devices", "batch_size", "steps", "epochs", "learning_rate", "optimizer", "precision",
    "xla", "steps_per_call", "seed", "workers", "tpu_address", "tpu_timeout_s", "cluster_hosts", "cluster_timeout_s",
    "allow_network_workers", "trust", "vocab", "custom_objects", "model_sha256", "backend", "extra",
}  # fmt: skip
"""The keys `to_dict()` wrote before the hooks had a type: stored runs, exports and `--json` carry them."""
ADDED_KEYS = {"vocab_by_input"}
"""Keys added since (the contract adds, never renames): named inputs' id ranges (`--vocab NAME=N`)."""


def legacy_dict(extra: dict | None) -> dict:
    """A config as runs stored it before `HookSettings` (the `extra` bag; None: a file older than `extra`)."""
    stored = RunConfig(batch_size=32, steps=7).to_dict()
    del stored["extra"]
    return stored if extra is None else {**stored, "extra": extra}


def test_legacy_extra_hooks_still_load():
    stored = legacy_dict({"hooks": {"tensorboard": "/tmp/tb", "profile": "3-5"}})
    config = RunConfig.from_dict(json.loads(json.dumps(stored)))
    assert config.hooks == HookSettings("/tmp/tb", (3, 5)) and config.batch_size == 32 and config.steps == 7
    assert config.to_dict() == stored, "read back, it is stored as it was"
    assert not RunConfig.from_dict(legacy_dict({})).hooks
    assert not RunConfig.from_dict(legacy_dict(None)).hooks, "a config older than `extra` loads with no hooks"


def test_to_dict_keeps_the_extra_shape_and_the_flat_keys():
    assert set(RunConfig().to_dict()) == FLAT_KEYS | ADDED_KEYS
    assert RunConfig().to_dict()["extra"] == {}
    logged = RunConfig().with_hooks("tb")
    assert logged.to_dict()["extra"] == {"hooks": {"tensorboard": os.path.abspath("tb")}}
    assert RunConfig().with_hooks(None, (3, 5)).to_dict()["extra"] == {"hooks": {"profile": "3-5"}}
    both = RunConfig().with_hooks("/tmp/tb", (2, 4)).to_dict()
    assert set(both) == FLAT_KEYS | ADDED_KEYS and both["extra"] == {"hooks": {"tensorboard": "/tmp/tb", "profile": "2-4"}}
    assert json.loads(json.dumps(both)) == both


def test_hook_settings_round_trip():
    for hooks in (HookSettings(), HookSettings("/tmp/tb"), HookSettings(profile=(1, 1)), HookSettings("/tmp/tb", (3, 5))):
        assert HookSettings.from_dict(hooks.to_dict()) == hooks
        config = RunConfig(hooks=hooks)
        assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))).hooks == hooks
    assert HookSettings("/tmp/tb", (3, 5)).profile_text == "3-5" and HookSettings().profile_text == ""
    assert HookSettings(profile=[3, 5]).profile == (3, 5), "a list (from JSON) becomes a tuple"


def test_hooks_are_recorded_but_do_not_make_another_job():
    plain = RunConfig(model="cnn")
    logged = plain.with_hooks("/tmp/tb", (3, 5))
    assert logged == plain and hash(logged) == hash(plain), "the same job, with or without TensorBoard"
    assert logged.hooks == HookSettings("/tmp/tb", (3, 5)) and not logged.with_hooks().hooks


@pytest.mark.parametrize(
    ("make", "allowed"),
    [
        (lambda: HookSettings(profile=(5, 3)), "at or after the first"),
        (lambda: HookSettings(profile=(0, 2)), "1 or more"),
        (lambda: HookSettings(profile=(3,)), "two whole step numbers"),
        (lambda: HookSettings(profile=(1.5, 2)), "two whole step numbers"),
        (lambda: HookSettings.from_dict({"profile": "3"}), "a step range such as 10-20"),
        (lambda: RunConfig(hooks={"tensorboard": "/tmp/tb"}), "HookSettings"),
    ],
)
def test_bad_hooks_are_refused(make, allowed):
    with pytest.raises(ConfigError, match=allowed):
        make()


def test_recorded_hooks_in_words():
    stored = RunConfig().with_hooks("/tmp/tb", (3, 5)).to_dict()
    assert recorded_hooks(stored) == {"tensorboard": "/tmp/tb", "profile": "3-5"}
    assert hooks_in_words(recorded_hooks(stored)) == "profiled 3-5, TensorBoard"
    assert hooks_in_words(recorded_hooks(legacy_dict(None))) == "no hooks"


def test_model_ref_is_the_configs_model_in_one_value(tmp_path):
    path = write_py(tmp_path, "model.py", "def build_model():\n    pass\n")
    layers = write_py(tmp_path, "layers.py", "")
    config = RunConfig(model=str(path), trust=True, vocab=9, custom_objects=str(layers), model_sha256="ab" * 32)
    assert config.model_ref == ModelRef(str(path), True, 9, str(layers), "ab" * 32)
    assert RunConfig().model_ref == ModelRef("mlp")
    assert RunConfig.from_dict(config.to_dict()).model_ref == config.model_ref


def test_a_model_ref_is_checked_against_its_content(tmp_path):
    path = write_py(tmp_path, "model.py", "def build_model():\n    pass\n")
    check_model_file(ModelRef(str(path), trust=True, sha256=file_sha256(path)))
    check_model_file(ModelRef(str(path), trust=True))  # no sha256 yet: nothing to compare
    check_model_file(ModelRef("mlp", sha256="0" * 64))  # a sample model has no file to check
    with pytest.raises(ModelFileError, match="changed since the run was set up"):
        check_model_file(ModelRef(str(path), trust=True, sha256="0" * 64))
    with pytest.raises(ModelFileError) as untrusted:
        check_model_file(ModelRef(str(path)))
    assert untrusted.value.needs_trust


def test_describing_a_model_ref_of_other_content_starts_no_child(tmp_path):
    marker = tmp_path / "ran.txt"
    path = write_py(tmp_path, "model.py", f"open({str(marker)!r}, 'w').close()\n")
    with pytest.raises(ModelFileError, match="changed since the run was set up"):
        describe_model_file(ModelRef(str(path), trust=True, sha256="0" * 64), timeout_s=60)
    assert not marker.exists()
