"""A JAX job's GPU memory as its child's: a real job, a fake driver (`FakeNvml`: no GPU here) that lists the real child.

The job really trains, a tiny MLP on the CPU in `core.backends.child_job`. `JobOnGpuNvml` answers as the
driver would with that job on GPU 0: it lists every live process of the job beside this one, each with
the memory it would hold, and the whole GPU's use falls to a few MiB once the job has ended.
"""

from __future__ import annotations

import os

import psutil
import pytest

from core import RunConfig, RunStatus, run_training
from core.hooks.device_use import DeviceUseHook
from core.machine.gpu_sampler import memory_lines
from core.training.hooks import RunHook
from tests.fakes.fake_nvml import GIB, FakeGpu, FakeNvml

pytestmark = pytest.mark.slow

JOB_BYTES = 105 * GIB  # what the JAX child's allocator would reserve (75% of an H200)
APP_BYTES = 1 * GIB  # what this process would hold (TensorFlow's CUDA context)
IDLE_BYTES = 3 * 2**20


class JobOnGpuNvml(FakeNvml):
    """The driver with the JAX job on GPU 0: the live job child listed with JOB_BYTES, this process with APP_BYTES."""

    def __init__(self) -> None:
        super().__init__(FakeGpu(total=140 * GIB, used=IDLE_BYTES, processes={}))
        self.listed_jobs: set[int] = set()

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeGpu) -> list:
        jobs = _live_jobs()
        self.listed_jobs.update(jobs)
        handle.processes = {os.getpid(): APP_BYTES, **dict.fromkeys(jobs, JOB_BYTES)}
        return super().nvmlDeviceGetComputeRunningProcesses(handle)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu, version: int | None = None):
        handle.used = JOB_BYTES + APP_BYTES if _live_jobs() else IDLE_BYTES
        return super().nvmlDeviceGetMemoryInfo(handle, version)


def _live_jobs() -> list[int]:
    """The PIDs of this process's running backend job children, found from outside them."""
    pids = []
    for process in psutil.Process().children(recursive=True):
        try:
            if "core.backends.child_job" in " ".join(process.cmdline()) and process.status() != psutil.STATUS_ZOMBIE:
                pids.append(process.pid)
        except psutil.Error:  # it ended while being looked at
            continue
    return pids


class Context(RunHook):
    def __init__(self) -> None:
        self.context = None

    def on_run_start(self, context) -> None:
        self.context = context


def test_a_jax_job_s_gpu_memory_is_its_child_s_and_its_peak_on_the_cpu_the_host_rss(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".5")  # the job inherits this process's environment; the CPU ignores it
    nvml, heard = JobOnGpuNvml(), Context()
    device_use = DeviceUseHook(nvml, find_gpus=lambda driver, names: [("GPU:0", driver.gpus[0])], interval_s=0.02)
    result = run_training(RunConfig(model="mlp", backend="jax", steps=8, steps_per_call=2), hooks=[heard, device_use])
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.peak_memory_bytes > 0 and result.peak_memory_source == "host process RSS peak (JAX child)", "a CPU run's peak is its RSS"
    [view] = device_use.memory_views()
    [job] = nvml.listed_jobs
    assert view.pid == job == heard.context.process_id != os.getpid()
    assert view.process_reserved == JOB_BYTES, "the driver was asked about the job's child, and its share kept once it ended"
    assert view.device_used == JOB_BYTES + APP_BYTES, "the whole GPU as it was during the run, not idle after it"
    jax_line, driver_line, why = memory_lines(view)
    assert jax_line == "GPU:0 as JAX sees it: not reported (JAX gave no memory figures for this device)."  # on the CPU: no allocator peak
    assert f"reserved by the JAX job's process (PID {job}); " in driver_line
    assert "JAX's allocator reserved 50% (XLA_PYTHON_CLIENT_MEM_FRACTION=.5) of the GPU's memory" in why
    assert not any("TensorFlow" in line for line in (jax_line, driver_line, why)), "the run was JAX's"
