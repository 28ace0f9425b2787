"""TensorBoard event files from a real run, read back with TensorBoard's own reader; a real TensorBoard server."""

import json
import re
import sys
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

from core.config import RunConfig
from core.hooks.tensorboard import (
    HOST_MEMORY_TAG,
    TENSORBOARD_MISSING,
    RunDirectory,
    TensorBoardMissing,
    TensorBoardWriter,
    find_tensorboard,
    launch_tensorboard,
    memory_scalars,
)
from core.results import RunStatus, StepRecord
from core.runner import run_training
from core.training.hooks import RunContext
from tests.waiting import wait_until


def _read_tensors(run_dir):
    accumulator = event_accumulator.EventAccumulator(str(run_dir), size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    tags = accumulator.Tags()["tensors"]
    return {tag: [(e.step, tensor_util.make_ndarray(e.tensor_proto)) for e in accumulator.Tensors(tag)] for tag in tags}


def _get(url: str, timeout: float = 10) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return response.read()


@pytest.mark.slow
def test_a_real_run_writes_every_step_and_memory_at_each_flush(tmp_path, two_cpus):
    writer = TensorBoardWriter(tmp_path)
    config = RunConfig(model="mlp", steps=10, batch_size=16, steps_per_call=2)
    result = run_training(config, hooks=[writer])
    assert result.status == RunStatus.COMPLETED, result.message

    assert writer.run_dir.parent == tmp_path
    assert re.fullmatch(r"\d{8}-\d{6}-mlp-default", writer.run_dir.name)
    tensors = _read_tensors(writer.run_dir)
    assert {"loss", "step_time_ms", "samples_per_s", HOST_MEMORY_TAG, "config"} <= set(tensors)
    for tag in ("loss", "step_time_ms", "samples_per_s"):
        assert [step for step, _ in tensors[tag]] == list(range(1, 11)), tag
    np.testing.assert_allclose([float(v) for _, v in tensors["loss"]], result.losses, rtol=1e-6)
    step_ms = np.array([float(v) for _, v in tensors["step_time_ms"]])
    np.testing.assert_allclose(step_ms, np.array(result.step_times_s) * 1000, rtol=1e-6)
    np.testing.assert_allclose([float(v) for _, v in tensors["samples_per_s"]], 16 / (step_ms / 1000), rtol=1e-5)
    # Memory at the latest step each time the writer thread flushes, and at the run's last step;
    # CPU runs report the process RSS.
    memory_steps = [step for step, _ in tensors[HOST_MEMORY_TAG]]
    assert memory_steps[-1] == 10 and memory_steps == sorted(memory_steps) and set(memory_steps) <= set(range(1, 11))
    assert not any(t.name == "tensorboard-writer" for t in threading.enumerate())
    assert all(float(v) > 10 * 2**20 for _, v in tensors[HOST_MEMORY_TAG])
    config_text = tensors["config"][0][1].item().decode()
    assert '"batch_size": 16' in config_text


def test_steps_reach_the_file_from_the_writer_thread_while_the_run_goes_on(tmp_path):
    writer = TensorBoardWriter(tmp_path, flush_s=0.05)
    # model None: a multi-worker run relayed from its workers, so no memory scalar from this process.
    writer.on_run_start(RunContext(RunConfig(batch_size=32), 10, 1, ("CPU:0",), None))
    writer.on_step_records([StepRecord(1, 2.5, 0.5, True), StepRecord(2, 2.0, 0.25, False)])
    wait_until(lambda: "loss" in _read_tensors(writer.run_dir), "the loss in the event file", every_s=0.05)
    tensors = _read_tensors(writer.run_dir)
    writer.on_run_end(None)
    assert [(step, float(value)) for step, value in tensors["loss"]] == [(1, 2.5), (2, 2.0)]
    assert [float(value) for _, value in tensors["samples_per_s"]] == [64.0, 128.0]
    assert HOST_MEMORY_TAG not in _read_tensors(writer.run_dir)


def test_run_folders_are_one_per_run_and_shared_within_a_run(tmp_path):
    directory = RunDirectory(tmp_path / "logs")
    first = RunContext(RunConfig(), 10, 1, ("CPU:0",), None)
    second = RunContext(RunConfig(model="cnn"), 10, 1, ("CPU:0",), None)
    a = directory.resolve(first)
    assert directory.resolve(first) == a, "callbacks of one run must share its folder"
    b = directory.resolve(second)
    c = directory.resolve(RunContext(RunConfig(), 10, 1, ("CPU:0",), None))
    assert len({a, b, c}) == 3 and all(p.is_dir() and p.parent == tmp_path / "logs" for p in (a, b, c))
    assert b.name.endswith("-cnn-default")


class FakeGpuMemoryInfo:
    """Stands in for tf.config.experimental.get_memory_info on GPUs this machine does not have."""

    def __init__(self, current: dict[str, int]):
        self.current = current

    def __call__(self, device: str) -> dict[str, int]:
        if device not in self.current:
            raise ValueError(f"No matching devices found for '{device}'")
        return {"current": self.current[device], "peak": self.current[device]}


def test_memory_on_accelerators_comes_from_the_tf_allocator_per_device(monkeypatch):
    import tensorflow as tf

    monkeypatch.setattr(tf.config.experimental, "get_memory_info", FakeGpuMemoryInfo({"GPU:0": 1000, "GPU:1": 2000}))
    assert memory_scalars(("GPU:0", "GPU:1")) == {"device_memory_bytes/GPU_0": 1000, "device_memory_bytes/GPU_1": 2000}
    # A device whose allocator reports nothing falls back to the host's RSS, tagged as such.
    fallback = memory_scalars(("GPU:7",))
    assert list(fallback) == [HOST_MEMORY_TAG] and fallback[HOST_MEMORY_TAG] > 0


@pytest.mark.slow
def test_launch_tensorboard_serves_the_log_dir_on_localhost_and_stops(tmp_path):
    assert find_tensorboard() is not None, "tensorboard is part of the [test] extra"
    with launch_tensorboard(tmp_path, timeout_s=120) as server:
        assert server.url.startswith("http://127.0.0.1:")
        environment = json.loads(_get(server.url + "data/environment"))
        assert environment["data_location"] == str(tmp_path)
        assert server.running
    assert not server.running
    with pytest.raises((urllib.error.URLError, OSError)):
        _get(server.url, timeout=2)


def test_launch_without_tensorboard_says_how_to_install_it(tmp_path, monkeypatch):
    bare = tmp_path / "bare-env" / "bin"
    bare.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bare / "python"))
    monkeypatch.setenv("PATH", str(bare))
    assert find_tensorboard() is None
    with pytest.raises(TensorBoardMissing) as error:
        launch_tensorboard(tmp_path)
    assert str(error.value) == TENSORBOARD_MISSING
    assert "pip install 'device-lab[tensorboard]'" in str(error.value)
