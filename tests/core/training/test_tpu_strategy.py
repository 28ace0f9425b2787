"""A TPU run is probed in a child process first: a bogus address fails within its limit, never hangs here.

No TPU on this machine: these runs use the real probe against addresses where no TPU answers.
"""

import socket
import threading
import time

import psutil
import pytest

from core.compare.runner import run_comparison
from core.compare.table import format_table
from core.compare.targets import parse_targets
from core.config import RunConfig
from core.results import RunStatus
from core.runner import run_training

_SILENT = socket.create_server(("127.0.0.1", 0))  # accepts connections and never answers: the probe waits out its limit
BOGUS = f"grpc://127.0.0.1:{_SILENT.getsockname()[1]}"  # (a refused port fails at once: tests/core/machine/test_tpu_refused.py)
LIMIT_S = 10
MARGIN_S = 8  # start-up of the child and killing it


def _no_probe_left() -> bool:
    return not [p for p in psutil.Process().children(recursive=True) if "@@tpu-probe" in " ".join(p.cmdline())]


def _probe_message(message: str, address: str = BOGUS) -> bool:
    """The probe's own time-out wording (it may still be importing TensorFlow on a loaded machine)."""
    answered = f"No TPU answered at {address!r} within {LIMIT_S} s" in message
    importing = f"did not finish importing TensorFlow within {LIMIT_S} s" in message
    return answered or importing


@pytest.mark.slow
def test_bogus_tpu_address_fails_within_its_limit_with_the_probes_message(two_cpus):
    start = time.monotonic()
    result = run_training(RunConfig(model="mlp", strategy="tpu", tpu_address=BOGUS, tpu_timeout_s=LIMIT_S, steps=3))
    elapsed = time.monotonic() - start
    assert result.status == RunStatus.FAILED and result.steps_done == 0
    assert _probe_message(result.message), result.message
    assert result.peak_memory_bytes is None, "a run that never started reports no memory of its own"
    assert elapsed < LIMIT_S + MARGIN_S, f"took {elapsed:.1f} s"
    assert _no_probe_left()


def test_stopping_during_the_probe_ends_the_run_at_once_as_stopped(two_cpus):
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    start = time.monotonic()
    result = run_training(RunConfig(model="mlp", strategy="tpu", tpu_address=BOGUS, tpu_timeout_s=60, steps=3), stop_event=stop)
    elapsed = time.monotonic() - start
    assert result.status == RunStatus.STOPPED and f"while the TPU at {BOGUS!r} was being probed" in result.message
    assert elapsed < 1.0 + 3.0, f"took {elapsed:.1f} s after a stop 1 s in"
    assert _no_probe_left()


@pytest.mark.heavy  # the bogus TPU's time limit is checked in the default run
@pytest.mark.slow
def test_comparison_with_a_bogus_tpu_prints_its_table_with_the_tpu_row_failed(two_cpus):
    base = RunConfig(model="mlp", steps=4, tpu_timeout_s=LIMIT_S)
    start = time.monotonic()
    comparison = run_comparison(base, parse_targets(f"CPU:0;tpu:{BOGUS}"))
    elapsed = time.monotonic() - start
    cpu, tpu = comparison.rows
    assert cpu.status == RunStatus.COMPLETED
    assert tpu.status == RunStatus.FAILED and _probe_message(tpu.result.message), tpu.result.message
    assert elapsed < LIMIT_S + MARGIN_S + 60
    table = format_table(comparison)
    assert "CPU:0" in table and f"tpu:{BOGUS}" in table and "failed" in table
