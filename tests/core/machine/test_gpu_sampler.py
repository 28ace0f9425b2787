"""The GPU sampler against `FakeNvml` (no GPU here): its pace, its mean, its stop; and the memory words."""

from __future__ import annotations

import math
import time

import pytest

from core.formatting import format_bytes
from core.machine import gpu, gpu_sampler
from core.machine.gpu_sampler import SAMPLE_INTERVAL_S, GpuSampler, MemoryView, memory_lines
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
        tf_in_use=int(1.5 * GIB),
        tf_peak=3 * GIB,
        process_reserved=78 * GIB,
        device_used=79 * GIB,
        device_total=80 * GIB,
        growth=False,
    )
    tf_line, driver_line, why = memory_lines(view)
    assert tf_line.startswith(view.device) and "TensorFlow" in tf_line
    assert [format_bytes(n) in tf_line for n in (view.tf_in_use, view.tf_peak)] == [True, True]
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
