"""The conditions a measurement was made in: other processes' CPU share read from Linux, the threshold, GPUs via FakeNvml.

The busy tests start real busy-loop processes (tests/busy.py). "No false alarm
on a quiet machine" is the `contention` benchmark's: the suite runs with two
workers, so another test may be using a core at any moment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from core.machine.conditions import (
    CONTENDED_OTHER_SHARE,
    Conditions,
    ConditionsSampler,
    Snapshot,
    between,
    contention_warning,
    gpu_conditions,
)
from tests.busy import busy_cores
from tests.fakes.fake_nvml import FakeGpu, FakeNvml
from tests.waiting import became_true


def _snapshot(at: float, busy: float, total: float, own: float, steal: float = 0.0, pressure: float | None = None) -> Snapshot:
    return Snapshot(at, busy, total, steal, own, pressure)


def test_other_processes_share_is_the_machines_busy_time_less_this_processes():
    start = _snapshot(0.0, busy=100.0, total=1000.0, own=10.0, pressure=0.0)
    # 2 s on 2 cores = 4 s of CPU time: 3 s busy, of which 1 s this process's, 0.4 s stolen
    end = _snapshot(2.0, busy=103.0, total=1004.0, own=11.0, steal=0.4, pressure=1.0e6)
    found = between(start, end, "steady state")
    assert found.other_cpu_share == pytest.approx(0.5) and found.steal_share == pytest.approx(0.1)
    assert found.cpu_pressure == pytest.approx(0.5) and found.window_s == 2.0
    assert found.contended and found.reason == "other processes used 50% of the CPU"
    warning = contention_warning(found)
    assert found.reason in warning and "re-run on a quiet machine" in warning  # why, and what to do


def test_under_the_threshold_is_not_contended_and_the_record_reads_back_identically():
    start = _snapshot(0.0, busy=0.0, total=0.0, own=0.0)
    just_under = (CONTENDED_OTHER_SHARE - 0.01) * 100
    found = between(start, _snapshot(1.0, busy=50.0 + just_under, total=100.0, own=50.0), "whole run")
    assert not found.contended and found.reason == "" and contention_warning(found) == ""
    assert Conditions.from_dict(found.to_dict()) == found
    assert Conditions.from_dict({}) is None


def test_two_busy_loops_make_a_measurement_contended():
    sampler = ConditionsSampler()
    with busy_cores(limit_s=60):
        sampler.start()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            time.sleep(0.05)  # this process idles: whatever is busy is someone else
        sampler.stop()
    found = sampler.conditions()
    assert found is not None and found.window == "whole run" and found.window_s >= 1.0
    assert found.other_cpu_share >= 0.5 and found.contended, found
    assert found.cpus == os.cpu_count() and len(found.load_average) == 3


def test_this_processes_own_work_is_never_counted_as_other_processes():
    sampler = ConditionsSampler()
    sampler.start()
    own_before = os.times()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        pass  # a core busy with this process (as much as the machine lets it)
    sampler.stop()
    own = os.times()
    found = sampler.conditions()
    spent = own.user + own.system - own_before.user - own_before.system
    assert sampler.end.own_s - sampler.run_start.own_s >= spent - 0.02  # the snapshots hold this process's time
    own_share = spent / (found.window_s * os.cpu_count())
    # the machine's busy time minus this process's: own work and others' add up to at most all the cores' time
    assert own_share > 0 and found.other_cpu_share + own_share <= 1.05, (found, own_share)


BURN = "import sys, time\nwhile time.process_time() < 0.5:\n    pass\nprint('done', flush=True)\nsys.stdin.read()\n"


def test_a_live_child_s_work_is_the_app_s_own_not_other_processes():
    """A backend job's child or a cluster worker is the run: its CPU time counts as the app's while it still runs."""
    sampler = ConditionsSampler()
    sampler.start()
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "done"  # it has used 0.5 s of CPU and waits, not yet waited for
        sampler.stop()
    finally:
        child.communicate("")
    assert sampler.end.own_s - sampler.run_start.own_s >= 0.45  # /proc counts in clock ticks (10 ms), the child its own clock


def test_gpu_conditions_name_other_processes_clocks_and_throttle_reasons_from_fake_nvml():
    # FakeNvml stands in for a GPU, which this machine does not have.
    gpu = FakeGpu(processes={os.getpid(): None, 4242: 2**30}, sm_clock_mhz=1200, throttle_reasons=0x4 | 0x20)
    [found] = gpu_conditions(FakeNvml(gpu), [("GPU:0", gpu)], [os.getpid()])
    assert found == {
        "device": "GPU:0",
        "other_processes": [4242],
        "sm_clock_mhz": 1200,
        "sm_max_clock_mhz": 1980,
        "throttle_reasons": ["software power cap", "software thermal slowdown"],
    }
    start = _snapshot(0.0, busy=0.0, total=0.0, own=0.0)
    conditions = between(start, _snapshot(1.0, busy=1.0, total=100.0, own=1.0), "steady state", [found])
    assert conditions.contended and conditions.reason == "1 other process(es) used GPU:0"


def test_the_apps_own_processes_are_every_live_descendant_read_from_proc_as_psutil_finds_them():
    """A run's helpers count as its own work: children and grandchildren, read from /proc's per-thread children lists
    (a snapshot falls between two calls, inside a step's time) and the same set psutil's full scan finds."""
    import psutil

    from core.machine.conditions import own_pids

    grandparent = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    children = [subprocess.Popen([sys.executable, "-c", grandparent]) for _ in range(2)]
    try:
        became_true(lambda: all(psutil.Process(c.pid).children() for c in children), every_s=0.05)  # until both grandchildren have started
        grandchildren = {g.pid for c in children for g in psutil.Process(c.pid).children()}
        expected = {p.pid for p in psutil.Process().children(recursive=True)}
        assert len(grandchildren) == 2 and {c.pid for c in children} | grandchildren <= expected
        assert set(own_pids()[1:]) == expected and own_pids()[0] == os.getpid()
    finally:
        for child in children:
            for grandchild in psutil.Process(child.pid).children():
                grandchild.kill()
            child.kill()
            child.wait()
