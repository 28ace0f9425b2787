"""Profiler captures of real runs: the trace lands in the run folder, and the profiler is always stopped."""

import pytest

from core.config import ConfigError, RunConfig
from core.hooks.profiler import ProfilerCapture, check_profile_steps, logging_hooks
from core.hooks.tensorboard import TensorBoardWriter
from core.results import RunStatus
from core.runner import run_training
from core.training.hooks import RunHook


def _assert_profiler_stopped():
    import tensorflow as tf

    with pytest.raises(tf.errors.UnavailableError):
        tf.profiler.experimental.stop()


@pytest.mark.slow
@pytest.mark.parametrize(("steps_per_call", "captured"), [(1, (3, 5)), (2, (3, 6))])
def test_profile_of_steps_3_to_5_writes_a_trace(tmp_path, two_cpus, steps_per_call, captured):
    capture = ProfilerCapture(tmp_path, 3, 5)
    result = run_training(RunConfig(model="mlp", steps=8, batch_size=16, steps_per_call=steps_per_call), hooks=[capture])
    assert result.status == RunStatus.COMPLETED, result.message
    assert capture.captured == captured
    assert capture.trace_dir == capture.directory.path / "plugins" / "profile"
    assert capture.trace_dir.parent.parent.parent == tmp_path
    assert list(capture.trace_dir.rglob("*.xplane.pb")), f"no trace under {capture.trace_dir}"
    _assert_profiler_stopped()
    text = capture.how_to_view()
    assert str(capture.trace_dir) in text and f"tensorboard --logdir {tmp_path}" in text and "Profile tab" in text
    assert "tensorboard-plugin-profile" in text
    assert ("whole calls" in text) == (steps_per_call > 1)


class FailAtStep(RunHook):
    def __init__(self, step: int):
        self.step = step

    def on_step_records(self, records):
        if records[-1].step >= self.step:
            raise RuntimeError(f"planned failure at step {self.step}")


@pytest.mark.slow
def test_a_run_that_fails_inside_the_range_still_stops_the_profiler(tmp_path, two_cpus):
    capture = ProfilerCapture(tmp_path, 3, 5)
    result = run_training(RunConfig(model="mlp", steps=8, batch_size=16), hooks=[capture, FailAtStep(4)])
    assert result.status == RunStatus.FAILED and "planned failure at step 4" in result.message
    assert capture.captured == (3, 4)
    assert list(capture.trace_dir.rglob("*.xplane.pb"))
    _assert_profiler_stopped()


def test_a_range_past_the_run_fails_the_run_before_any_step(tmp_path, two_cpus):
    result = run_training(RunConfig(model="mlp", steps=4, batch_size=16), hooks=[ProfilerCapture(tmp_path, 3, 9)])
    assert result.status == RunStatus.FAILED and result.steps_done == 0
    assert "profile_steps" in result.message and "4 steps" in result.message
    _assert_profiler_stopped()


@pytest.mark.parametrize(("first", "last", "words"), [(0, 3, "1 or more"), (5, 3, "at or after"), (2, 11, "10 steps")])
def test_invalid_ranges_are_config_errors(first, last, words):
    with pytest.raises(ConfigError, match=words) as error:
        check_profile_steps(first, last, total_steps=10)
    assert error.value.field == "profile_steps"


def test_capture_rejects_a_bad_range_when_made(tmp_path):
    with pytest.raises(ConfigError):
        ProfilerCapture(tmp_path, 0, 3)
    with pytest.raises(ConfigError):
        ProfilerCapture(tmp_path, 5, 3)


def test_logging_hooks_are_what_config_hooks_asks_for_sharing_one_run_folder(tmp_path, monkeypatch):
    config = RunConfig(steps=10)
    assert logging_hooks(config) == (None, None)
    writer, capture = logging_hooks(config.with_hooks(str(tmp_path), (2, 4)))
    assert isinstance(writer, TensorBoardWriter) and isinstance(capture, ProfilerCapture)
    assert writer.directory is capture.directory and writer.directory.base == tmp_path
    only_tensorboard, no_capture = logging_hooks(config.with_hooks(tmp_path))
    assert isinstance(only_tensorboard, TensorBoardWriter) and no_capture is None
    monkeypatch.setenv("DEVICE_LAB_LOG_DIR", str(tmp_path / "app-logs"))
    no_writer, only_profile = logging_hooks(config.with_hooks(None, (1, 1)))
    assert no_writer is None and only_profile is not None and only_profile.directory.base == tmp_path / "app-logs" / "profiles"
    with pytest.raises(ConfigError, match="10 steps"):
        logging_hooks(config.with_hooks(tmp_path, (5, 11)))
    with pytest.raises(ConfigError, match="multi-worker"):
        logging_hooks(RunConfig(strategy="multi-worker", steps=10).with_hooks(tmp_path, (2, 4)))
