"""The TPU probe's child process (this machine has no TPU): its time limit, a stop, and the reply it sends."""

import threading
import time

import psutil
import pytest

from core.machine.tpu import probe_tpu


def probe_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "TPUClusterResolver" in " ".join(p.cmdline())]


@pytest.mark.slow
def test_a_probe_that_overruns_its_limit_is_killed_and_says_where_it_was(silent_tpu_address):
    started = time.monotonic()
    probe = probe_tpu(silent_tpu_address, timeout_s=3.0)
    assert time.monotonic() - started < 3.0 + 10
    assert not probe.ok and probe.devices == ()
    assert "within 3 s" in probe.message
    assert probe_children() == []


def test_a_stop_ends_the_probe_at_once(silent_tpu_address):
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    probe = probe_tpu(silent_tpu_address, timeout_s=120, stop_event=stop)
    assert not probe.ok and probe.message.startswith(f"The TPU probe of {silent_tpu_address!r} was stopped after")
    assert probe.elapsed_s < 30
    assert probe_children() == []


@pytest.mark.slow
def test_the_child_replies_why_tensorflow_found_no_tpu_here():
    probe = probe_tpu("local", timeout_s=120)
    assert not probe.ok and probe.message.startswith("TPU at 'local' could not be initialised: ")
    assert "within 120 s" not in probe.message, "the child's own answer, not a time-out"
