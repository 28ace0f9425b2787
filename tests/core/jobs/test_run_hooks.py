"""The run's hooks: every standard hook built from the config by the job service, and every one ended, whatever happens.

Real runs, real TensorBoard event files and profiler traces in tmp_path; GPU use samples `FakeNvml` (no GPU here).
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest
from tensorboard.backend.event_processing import event_accumulator

from core.config import ConfigError, RunConfig
from core.hooks import device_use
from core.hooks.conditions import ConditionsHook
from core.hooks.flops import FlopsCounter
from core.jobs import JobListener, JobOptions, RunHooks, run_job
from core.results import RunStatus
from core.training.hooks import RunHook
from tests.fakes.fake_nvml import FakeGpu, FakeNvml

ROOT = Path(__file__).resolve().parents[3]
STANDARD_HOOKS = {
    "TensorBoardWriter",
    "ProfilerCapture",
    "DeviceUseHook",
    "ConditionsHook",
    "EnergyHook",
    "FlopsCounter",
    "VerdictHook",
    "logging_hooks",
    "device_use_hook_for",
}
"""What builds a standard hook: the classes and the functions that make them."""


class Heard(JobListener):
    """The run's hooks as the listener is handed them, and every result it is told the run ended with."""

    def __init__(self) -> None:
        self.hooks: RunHooks | None = None
        self.ended: list = []

    def on_run_hooks(self, hooks: RunHooks) -> None:
        self.hooks = hooks

    def on_run_end(self, result) -> None:
        self.ended.append(result)


class InterruptAt(RunHook):
    """Raises KeyboardInterrupt as `step` ends, as Ctrl-C in the training thread does: past the engine, which catches Exception only."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_records(self, records) -> None:
        if records[-1].step >= self.step:
            raise KeyboardInterrupt


@pytest.fixture
def one_fake_gpu(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """NVML with one GPU (not here: `FakeNvml`), so that every run gets its GPU-use hook; the run's GPU:0 is it."""
    nvml = FakeNvml(FakeGpu())
    monkeypatch.setattr(device_use, "load_nvml", lambda: (nvml, ""))
    monkeypatch.setattr(device_use, "run_gpu_handles", lambda driver, names: [("GPU:0", driver.gpus[0])] if "GPU:0" in names else [])
    return nvml


def _profiler_stopped() -> bool:
    import tensorflow as tf

    try:
        tf.profiler.experimental.stop()
    except tf.errors.UnavailableError:
        return True
    return False


def _writer_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "tensorboard-writer"]


def test_the_standard_hooks_come_from_the_config_in_the_order_they_are_called(tmp_path, one_fake_gpu) -> None:
    listener, own = Heard(), RunHook()
    hooks = RunHooks(RunConfig(steps=10).with_hooks(tmp_path, (2, 4)), threading.Event(), [listener, own])
    assert hooks.tensorboard is not None and hooks.profiler is not None and hooks.device_use is not None
    assert hooks.tensorboard.directory is hooks.profiler.directory, "scalars and trace in one run folder"
    assert hooks.flops is not None and hooks.verdict is None and isinstance(hooks.conditions, ConditionsHook)
    standard = [hooks.tensorboard, hooks.profiler, hooks.device_use, hooks.energy, hooks.flops]
    assert list(hooks)[: 3 + len(standard)] == [hooks.conditions, listener, own, *standard]
    judged = RunHooks(RunConfig(steps=10), threading.Event(), diagnose=True)
    assert judged.flops is None and judged.verdict is not None and (judged.tensorboard, judged.profiler) == (None, None)
    assert list(judged)[-2] is judged.verdict, "the verdict judges the result every other hook completed"
    shared = FlopsCounter()
    assert RunHooks(RunConfig(), threading.Event(), [shared]).flops is None, "a comparison's own counter serves all its runs"
    cluster = RunHooks(RunConfig(strategy="multi-worker", workers=2), threading.Event())
    assert cluster.conditions is None and cluster.device_use is None, "the workers record their own conditions"
    with pytest.raises(ConfigError, match="10 steps"):
        RunHooks(RunConfig(steps=10).with_hooks(None, (5, 11)), threading.Event())


def test_a_run_that_fails_before_its_first_step_ends_every_hook_it_opened(two_cpus, tmp_path, one_fake_gpu) -> None:
    missing = RunConfig(model="mlp", steps=6, strategy="one-device", devices=("CPU:9",)).with_hooks(tmp_path / "tb", (1, 2))
    heard = Heard()
    recorded = run_job(missing, None, JobOptions(listener=heard))
    assert not recorded.started and recorded.result.status == RunStatus.FAILED and "CPU:9" in recorded.result.message
    assert heard.ended == [recorded.result], "told once, with the failed result"
    hooks = heard.hooks
    assert hooks is not None and hooks.device_use is not None and hooks.device_use.finished, "a watched GPU-use hook finishes"
    assert hooks.tensorboard is not None and hooks.tensorboard.run_dir is None and not (tmp_path / "tb").exists()
    assert _profiler_stopped() and not _writer_threads()
    refused = Heard()
    with pytest.raises(ConfigError, match="CPU:9"):  # the CLI's way: the refusal raised, the hooks ended all the same
        run_job(missing, None, JobOptions(listener=refused, raise_config_error=True))
    assert len(refused.ended) == 1 and refused.ended[0].status == RunStatus.FAILED
    assert refused.hooks is not None and refused.hooks.device_use is not None and refused.hooks.device_use.finished


@pytest.mark.slow
def test_a_run_interrupted_past_its_engine_still_closes_its_event_file_and_stops_the_profiler(two_cpus, tmp_path) -> None:
    config = RunConfig(model="mlp", dataset="synthetic", steps=6, batch_size=16).with_hooks(tmp_path, (1, 4))
    heard = Heard()
    with pytest.raises(KeyboardInterrupt):
        run_job(config, None, JobOptions(listener=heard, hooks=(InterruptAt(2),)))
    (ended,) = heard.ended
    assert ended.status == RunStatus.FAILED and "KeyboardInterrupt" in ended.message
    assert heard.hooks is not None and heard.hooks.profiler is not None and heard.hooks.profiler.captured == (1, 2)
    assert _profiler_stopped(), "the profiler was stopped, not left running in the process"
    assert list(heard.hooks.profiler.trace_dir.rglob("*.xplane.pb")), "and its trace written"
    assert not _writer_threads(), "the event file's writer thread was closed"
    (run_dir,) = [path for path in tmp_path.iterdir() if path.is_dir()]
    accumulator = event_accumulator.EventAccumulator(str(run_dir), size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    assert [event.step for event in accumulator.Tensors("loss")] == [1], "the steps it had were flushed to the file"


def _constructed(path: Path) -> set[str]:
    """The names `path` calls that build a standard hook."""
    called = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in STANDARD_HOOKS:
                called.add(name)
    return called


def test_front_ends_construct_no_standard_hook() -> None:
    """The CLI and the window pass `config.hooks` and their own listeners; the job service builds the run's hooks."""
    front_ends = [*sorted((ROOT / "core" / "cli").rglob("*.py")), *sorted((ROOT / "gui").rglob("*.py"))]
    assert len(front_ends) > 20
    found = {str(path.relative_to(ROOT)): names for path in front_ends if (names := _constructed(path))}
    assert found == {}
