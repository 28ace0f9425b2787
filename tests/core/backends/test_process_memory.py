"""The one reader of a process's memory figures (/proc/PID/status): the job's peak, the probe's watch, RLIMIT_DATA's base."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.backends.job_setup import peak_rss_bytes, process_memory
from core.tuning.backend_probe import DATA_MARGIN, data_limit
from core.tuning.max_batch_probe import peak_resident_bytes

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc only: elsewhere the readers fall back")


def test_this_process_figures_are_bytes_and_its_peak_is_at_least_its_resident_size() -> None:
    sizes = process_memory()
    assert sizes["VmHWM"] >= sizes["VmRSS"] > 2**20 and sizes["VmData"] > 0
    assert sizes["VmHWM"] % 1024 == 0
    assert peak_rss_bytes() >= sizes["VmHWM"]
    assert data_limit(10**9) >= 10**9 + DATA_MARGIN


def test_another_process_is_read_by_its_pid_and_an_ended_one_gives_nothing() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert process_memory(child.pid)["VmRSS"] > 0 and peak_resident_bytes(child.pid) > 0
    finally:
        child.communicate(b"")
    assert process_memory(child.pid) == {} and peak_resident_bytes(child.pid) == 0
