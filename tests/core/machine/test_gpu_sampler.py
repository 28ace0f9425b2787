"""The GPU sampler against `FakeNvml` (no GPU here): its pace, its mean, its stop; and the memory words."""

from __future__ import annotations

import math
import os
import time

import pytest

from core.formatting import format_bytes
from core.machine import gpu, gpu_sampler
from core.machine.gpu_sampler import SAMPLE_INTERVAL_S, GpuSampler, MemoryView, allocator_settings, memory_lines
from tests.fakes.fake_nvml import GIB, FakeGpu, FakeNvml
from tests.waiting import wait_until

UTILISATION = (20.0, 40.0, 60.0, 80.0)


def wait_for_readings(sampler: GpuSampler, count: int, timeout_s: float = 10.0) -> None:
    wait_until(lambda: len(sampler.readings()) >= count, f"{count} readings", timeout_s)


def test_samples_at_most_ten_times_a_second_averages_every_reading_and_stops():
    gpu = FakeGpu(utilization=lambda i: UTILISATION[i % len(UTILISATION)])
    nvml = FakeNvml(gpu)
    sampler = GpuSampler(nvml, [gpu])
    assert sampler.interval_s == SAMPLE_INTERVAL_S == 0.1
    started = time.perf_counter()
    sampler.start()
    wait_for_readings(sampler, 6)
    sampler.stop()
    elapsed = time.perf_counter() - started
    assert not sampler.running, "stop() waits for the sampling thread: no reading comes after it"
    readings = sampler.readings()
    gaps = [b.time_s - a.time_s for a, b in zip(readings, readings[1:], strict=False)]
    assert min(gaps) >= 0.95 * SAMPLE_INTERVAL_S, f"read faster than every {SAMPLE_INTERVAL_S} s: {gaps}"
    assert len(readings) <= elapsed / SAMPLE_INTERVAL_S + 1
    seen = [UTILISATION[i % len(UTILISATION)] for i in range(gpu.readings)]
    assert [r.utilization for r in readings] == [(value,) for value in seen]
    assert sampler.mean_utilization() == pytest.approx(sum(seen) / len(seen))
    assert nvml.process_queries == math.ceil(len(readings) / gpu_sampler.PROCESS_MEMORY_EVERY)
    assert readings[0].process_memory == (68 * GIB,) and readings[0].memory_used == (70 * GIB,)
    assert sampler.memory_total == (80 * GIB,)


def test_mean_restarts_and_skips_a_gpu_without_utilisation(monkeypatch):
    monkeypatch.setattr(gpu_sampler, "MAX_KEPT", 4)
    phase = {"value": 0.0}
    busy = FakeGpu(utilization=lambda i: phase["value"])
    silent = FakeGpu(bus="00000000:01:00.0", utilization=lambda i: None, processes={})
    sampler = GpuSampler(FakeNvml(busy, silent), [busy, silent], interval_s=0.002)
    sampler.start()
    wait_for_readings(sampler, 3)
    phase["value"] = 90.0
    sampler.restart_mean()
    deadline = time.monotonic() + 10
    while busy.readings < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert sampler.mean_utilization() == 90.0, "readings before the restart (0 %) are not counted; the silent GPU is skipped"
    readings = sampler.readings()
    assert len(readings) <= 4 < busy.readings, "older readings are thinned out, the mean still counts them all"
    assert all(r.utilization[1] is None and r.process_memory[1] is None for r in readings)


def test_stop_before_start_is_harmless():
    sampler = GpuSampler(FakeNvml(), [])
    sampler.stop()
    assert sampler.mean_utilization() is None and sampler.readings() == [] and not sampler.running


def test_memory_words_put_tensorflow_beside_the_driver_and_say_why_they_differ():
    view = MemoryView(
        "GPU:0",
        in_use=int(1.5 * GIB),
        peak=3 * GIB,
        process_reserved=78 * GIB,
        device_used=79 * GIB,
        device_total=80 * GIB,
        growth=False,
    )
    tf_line, driver_line, why = memory_lines(view)
    assert tf_line.startswith(view.device) and "TensorFlow" in tf_line
    assert [format_bytes(n) in tf_line for n in (view.in_use, view.peak)] == [True, True]
    assert "driver" in driver_line
    assert [format_bytes(n) in driver_line for n in (view.process_reserved, view.device_used, view.device_total)] == [True] * 3
    assert "Memory growth is off" in why and "Turn on memory growth in Settings" in why
    growing = memory_lines(MemoryView("GPU:1", 2 * GIB, 2 * GIB, 3 * GIB, 3 * GIB, 80 * GIB, growth=True))[2]
    assert "Memory growth is on" in growing and "high-water mark" in growing
    unknown = memory_lines(MemoryView("GPU:0", growth=None))
    assert "not reported" in unknown[0]
    assert "this process's share not reported" in unknown[1] and "container" in unknown[1]
    assert "with memory growth off it reserves nearly the whole GPU" in unknown[2]


class VersionOneNvml(FakeNvml):
    """An nvidia-ml-py or driver without version 2 of the memory info: `used` there counts the driver's reserve."""

    nvmlMemory_v2 = None  # type: ignore[assignment]


def test_memory_used_leaves_out_what_the_driver_reserves_where_nvml_says_it():
    idle = FakeGpu(used=0, reserved=480 * 2**20, processes={})
    [row] = gpu.read_driver_gpus(FakeNvml(idle))
    assert row.memory == (80 * GIB, 0, 80 * GIB - 480 * 2**20), "used as nvidia-smi gives it: 0 on an idle GPU"
    assert row.usage["Memory used"] == "0 B" and row.usage["Memory reserved by the driver"] == "480.0 MiB"
    [older] = gpu.read_driver_gpus(VersionOneNvml(idle))
    assert older.memory[1] == 480 * 2**20 and "Memory reserved by the driver" not in older.usage
    sampler = GpuSampler(FakeNvml(idle), [idle])
    sampler.start()
    wait_for_readings(sampler, 1)
    sampler.stop()
    assert sampler.readings()[0].memory_used == (0,)


def test_memory_words_of_a_jax_job_name_jax_its_process_and_the_preallocation_its_environment_sets():
    job = {
        "device": "GPU:0",
        "process_reserved": 105 * GIB,
        "device_used": 106 * GIB,
        "device_total": 140 * GIB,
        "backend": "jax",
        "pid": 4321,
    }
    jax_line, driver_line, why = memory_lines(MemoryView(**job, peak=int(1.5 * GIB)))
    assert jax_line == f"GPU:0 as JAX sees it: at most {format_bytes(int(1.5 * GIB))} in use by tensors (its allocator's peak)."
    assert driver_line.startswith(f"As the driver sees it: {format_bytes(105 * GIB)} reserved by the JAX job's process (PID 4321); ")
    assert "JAX's allocator reserved 75% (XLA's default) of the GPU's memory" in why and "XLA_PYTHON_CLIENT_PREALLOCATE=false" in why
    assert not any("TensorFlow" in line for line in (jax_line, driver_line, why)), "the run was JAX's"

    def why_with(**environ: str) -> str:
        return memory_lines(MemoryView(**job, allocator_settings=allocator_settings("jax", environ)))[2]

    assert "reserved 50% (XLA_PYTHON_CLIENT_MEM_FRACTION=.5)" in why_with(XLA_PYTHON_CLIENT_MEM_FRACTION=".5", HOME="/root")
    assert "reserved 30% (XLA_CLIENT_MEM_FRACTION=0.3)" in why_with(XLA_CLIENT_MEM_FRACTION="0.3")
    assert why_with(XLA_PYTHON_CLIENT_PREALLOCATE="false", XLA_CLIENT_MEM_FRACTION="0.3").startswith(
        "Preallocation is off (XLA_PYTHON_CLIENT_PREALLOCATE=false): JAX's allocator reserves memory as arrays need it"
    )
    assert "reserved 75%" in why_with(XLA_PYTHON_CLIENT_PREALLOCATE="FALSE"), "jaxlib turns it off for false, False and 0 only"
    assert "platform allocator" in why_with(XLA_PYTHON_CLIENT_ALLOCATOR="platform", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    unseen = memory_lines(MemoryView("GPU:1", backend="jax", pid=4321))
    assert unseen[0] == "GPU:1 as JAX sees it: not reported (JAX gave no memory figures for this device)."
    assert (
        unseen[1]
        == "As the driver sees it: the JAX job's share not reported (the driver lists no process with its PID 4321, as in a container)."
    )


def test_memory_words_of_a_pytorch_job_name_its_caching_allocator():
    view = MemoryView("GPU:0", peak=2 * GIB, process_reserved=3 * GIB, backend="torch", pid=77)
    torch_line, driver_line, why = memory_lines(view)
    assert torch_line.startswith("GPU:0 as PyTorch sees it: at most") and "PyTorch job's process (PID 77)" in driver_line
    assert "caching allocator keeps freed blocks" in why and "torch.cuda.max_memory_allocated" in why and "TensorFlow" not in why
    tuned = allocator_settings("torch", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "XLA_CLIENT_MEM_FRACTION": "0.3"})
    assert tuned == (("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),)
    assert (
        "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)"
        in memory_lines(MemoryView("GPU:0", backend="torch", allocator_settings=tuned))[2]
    )
    uncached = allocator_settings("torch", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    assert "caching is off" in memory_lines(MemoryView("GPU:0", backend="torch", allocator_settings=uncached))[2]


def test_the_driver_is_asked_about_the_process_the_sampler_is_given():
    child_pid = os.getpid() + 1  # a process the fake driver lists beside this one
    busy = FakeGpu(processes={os.getpid(): 1 * GIB, child_pid: 3 * GIB})
    sampler = GpuSampler(FakeNvml(busy), [busy], pid=child_pid)
    sampler.start()
    wait_for_readings(sampler, 1)
    sampler.stop()
    assert sampler.readings()[0].process_memory == (3 * GIB,)
