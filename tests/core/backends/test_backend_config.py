"""The backend as a setting: validated in RunConfig, named by compare targets, listed as installed or not (no training here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.backends.available import backends, installed_backends
from core.compare.targets import parse_target, parse_targets
from core.config import ConfigError, RunConfig


def test_the_backend_defaults_to_tensorflow_and_is_kept_in_the_config_dict():
    assert RunConfig().backend == "tensorflow"
    config = RunConfig(backend="jax")
    assert RunConfig.from_dict(config.to_dict()).backend == "jax"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"backend": "mxnet"}, "backend"),
        ({"backend": "jax", "strategy": "multi-worker"}, "strategy"),
        ({"backend": "torch", "strategy": "tpu", "tpu_address": "local"}, "strategy"),
        ({"backend": "torch", "strategy": "mirrored", "devices": ("CPU:0", "CPU:1")}, "strategy"),
    ],
)
def test_settings_another_backend_cannot_run_are_refused_naming_the_field(changes, field):
    with pytest.raises(ConfigError) as caught:
        RunConfig(**changes)
    assert caught.value.field == field


def test_a_py_files_build_dataset_is_refused_on_jax_in_plain_words(tmp_path):
    model_file = tmp_path / "model.py"
    model_file.write_text("def build_model():\n    pass\n")
    with pytest.raises(ConfigError) as caught:
        RunConfig(model=str(model_file), dataset="build_dataset", trust=True, backend="jax")
    assert caught.value.field == "dataset" and "tf.data" in str(caught.value) and "TensorFlow backend only" in str(caught.value)
    assert "--data synthetic" in caught.value.allowed and "--backend tensorflow" in caught.value.allowed  # what to type


def test_compare_targets_may_name_a_backend_before_the_place():
    plain, jax_cpu, torch_cpu, data_parallel, jax_default = parse_targets("CPU:0; jax:CPU:0; torch:CPU:0; jax:mirrored:CPU:0,CPU:1; jax")
    assert (plain.backend, plain.label) == ("", "CPU:0")
    assert (jax_cpu.backend, jax_cpu.strategy, jax_cpu.devices, jax_cpu.label) == ("jax", "one-device", ("CPU:0",), "jax:CPU:0")
    assert (torch_cpu.backend, torch_cpu.label) == ("torch", "torch:CPU:0")
    assert (data_parallel.strategy, data_parallel.devices) == ("mirrored", ("CPU:0", "CPU:1"))
    assert (jax_default.strategy, jax_default.label) == ("default", "jax:default")
    base = RunConfig(backend="tensorflow")
    assert jax_cpu.config_for(base).backend == "jax" and plain.config_for(base.with_changes(backend="jax")).backend == "jax"


def test_a_backend_before_a_bad_place_is_still_a_bad_target():
    with pytest.raises(ConfigError):
        parse_target("jax:GPU:x")


def test_every_backend_is_listed_with_how_to_install_it_when_missing():
    listed = {info.name: info for info in backends()}
    assert set(listed) == {"tensorflow", "jax", "torch"}
    assert listed["jax"].installed and listed["tensorflow"].installed  # the test extra installs both
    for info in listed.values():
        assert (info.note == "") == info.installed and (info.installed or "pip install" in info.note)
    assert set(installed_backends()) <= set(listed)


def test_a_cpu_index_past_the_host_devices_xla_makes_is_refused_before_any_backend_starts():
    """`jax:mirrored:CPU:0,CPU:99999` once asked XLA for 100,000 host devices and hung: the target, the config and the CLI refuse it."""
    with pytest.raises(ConfigError) as past_the_host:
        parse_target("jax:mirrored:CPU:0,CPU:99999")
    assert "CPU:0 to CPU:15" in past_the_host.value.allowed
    with pytest.raises(ConfigError) as caught:
        RunConfig(backend="jax", strategy="mirrored", devices=("CPU:0", "CPU:16"))
    assert caught.value.field == "devices"
    assert parse_target("jax:mirrored:CPU:0,CPU:15").devices[-1] == "CPU:15"
    out = subprocess.run(
        [sys.executable, "main.py", "compare", "--model", "mlp", "--targets", "jax:mirrored:CPU:0,CPU:99999"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [f"error: {past_the_host.value}"]  # the same refusal, one line
