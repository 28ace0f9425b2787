"""A JAX or PyTorch run on a GPU where TensorFlow is not installed: its GPUs are still found and sampled, its failures still explained.

Such a machine (the GPU machine of `benchmarks/gpu_check.py`: JAX and PyTorch with CUDA, no
TensorFlow) runs the app's backend jobs; the parent's conditions hook asks NVML about the run's
GPUs. "Not installed" is `sys.modules["tensorflow"] = None` here: `import tensorflow` then
raises ModuleNotFoundError, as it does there. The GPUs are `FakeNvml`'s (none is here).
"""

from __future__ import annotations

import os
import sys

import pytest

from core.config import RunConfig
from core.hooks.conditions import ConditionsHook
from core.hooks.device_use import DeviceUseHook
from core.machine import gpu as gpu_info
from core.results import RunResult, RunStatus, StepRecord
from core.training.failures import explain_failure
from core.training.hooks import RunContext
from tests.fakes.fake_nvml import GIB, FakeGpu, FakeNvml


@pytest.fixture
def no_tensorflow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", None)


def two_gpus() -> FakeNvml:
    """NVML lists GPUs in PCI order: 01 first, 41 second."""
    return FakeNvml(FakeGpu(bus="00000000:01:00.0"), FakeGpu(bus="00000000:41:00.0", sm_clock_mhz=1410))


@pytest.mark.usefixtures("no_tensorflow")
def test_a_run_gpu_is_cuda_device_i_where_tensorflow_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = two_gpus()
    monkeypatch.setattr(gpu_info, "cuda_bus_ids", lambda: {0: "0000:41:00.0", 1: "0000:01:00.0"})  # CUDA numbers them the other way round
    assert gpu_info.run_gpu_handles(nvml, ["GPU:0"]) == [("GPU:0", nvml.gpus[1])]
    assert gpu_info.run_gpu_handles(nvml, ["CPU:0", "GPU:1", "GPU:0"]) == [("GPU:1", nvml.gpus[0]), ("GPU:0", nvml.gpus[1])]
    monkeypatch.setattr(gpu_info, "cuda_bus_ids", dict)  # no CUDA driver library: NVML index order
    assert gpu_info.run_gpu_handles(nvml, ["GPU:1"]) == [("GPU:1", nvml.gpus[1])]
    assert gpu_info.run_gpu_handles(nvml, ["GPU:2"]) == []  # a GPU the driver does not list


@pytest.mark.usefixtures("no_tensorflow")
def test_the_conditions_of_a_jax_gpu_run_name_its_gpu_without_tensorflow(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = two_gpus()
    monkeypatch.setattr(gpu_info, "load_nvml", lambda: (nvml, ""))
    monkeypatch.setattr(gpu_info, "cuda_bus_ids", lambda: {0: "0000:41:00.0", 1: "0000:01:00.0"})
    config = RunConfig(model="mlp", backend="jax", strategy="one-device", devices=("GPU:0",))
    hook = ConditionsHook()
    hook.on_run_start(RunContext(config, 2, 1, ("GPU:0",), None))  # raised ModuleNotFoundError before: every such GPU job failed
    hook.on_step_records([StepRecord(1, 2.3, 0.5, True)])
    hook.on_step_records([StepRecord(2, 2.2, 0.01, False)])
    result = hook.amend_result(RunResult(status=RunStatus.COMPLETED, config=config.to_dict()))
    [gpu] = result.conditions["gpus"]
    assert gpu["device"] == "GPU:0" and gpu["sm_clock_mhz"] == 1410  # CUDA device 0: the GPU at bus 41


@pytest.mark.usefixtures("no_tensorflow")
def test_the_gpu_use_of_a_jax_gpu_run_is_sampled_without_tensorflow() -> None:
    config = RunConfig(model="mlp", backend="jax", strategy="one-device", devices=("GPU:0",))
    hook = DeviceUseHook(two_gpus(), find_gpus=lambda nvml, names: [("GPU:0", nvml.gpus[0])], interval_s=0.01)
    hook.on_run_start(RunContext(config, 2, 1, ("GPU:0",), None))  # read TensorFlow's memory settings before: ModuleNotFoundError
    hook.on_step_records([StepRecord(1, 2.3, 0.5, True)])
    hook.on_step_records([StepRecord(2, 2.2, 0.01, False)])
    hook.on_run_end(hook.amend_result(RunResult(status=RunStatus.COMPLETED, config=config.to_dict())))
    [view] = hook.memory_views()
    assert hook.finished and view.device == "GPU:0" and (view.in_use, view.peak, view.growth) == (None, None, None)


@pytest.mark.usefixtures("no_tensorflow")
def test_a_failure_is_explained_without_tensorflow() -> None:
    assert explain_failure(RuntimeError("the device went away\nmore detail")) == "RuntimeError: the device went away"
    assert explain_failure(ValueError("")) == "ValueError: ValueError"


@pytest.mark.usefixtures("no_tensorflow")
def test_the_memory_of_a_jax_gpu_run_is_its_child_s_with_the_allocator_peak_it_reported() -> None:
    config = RunConfig(model="mlp", backend="jax", strategy="one-device", devices=("GPU:0",))
    child = os.getpid() + 1  # the job's child, as the driver lists it beside this process
    nvml = FakeNvml(FakeGpu(processes={os.getpid(): 1 * GIB, child: 60 * GIB}))
    hook = DeviceUseHook(nvml, find_gpus=lambda nvml, names: [("GPU:0", nvml.gpus[0])], interval_s=0.01)
    hook.on_run_start(RunContext(config, 2, 1, ("GPU:0",), None, process_id=child))
    hook.on_step_records([StepRecord(1, 2.3, 0.5, True)])
    peak = {"peak_memory_bytes": 2 * GIB, "peak_memory_source": "JAX allocator peak on GPU:0 (device memory_stats)"}
    hook.on_run_end(hook.amend_result(RunResult(status=RunStatus.COMPLETED, config=config.to_dict(), **peak)))
    [view] = hook.memory_views()
    assert (view.backend, view.pid, view.process_reserved, view.peak, view.in_use) == ("jax", child, 60 * GIB, 2 * GIB, None)
    host = RunResult(
        status=RunStatus.COMPLETED, config=config.to_dict(), peak_memory_bytes=GIB, peak_memory_source="host process RSS peak (JAX child)"
    )
    other = DeviceUseHook(nvml, find_gpus=lambda nvml, names: [("GPU:0", nvml.gpus[0])], interval_s=0.01)
    other.on_run_start(RunContext(config, 2, 1, ("GPU:0",), None, process_id=child))
    other.on_run_end(other.amend_result(host))
    assert other.memory_views()[0].peak is None, "a host RSS peak is not the GPU's"
