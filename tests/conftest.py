"""Shared test set-up: offscreen Qt, throw-away data and settings folders, one TF runtime for all.

Runs before any test module imports Qt or TensorFlow. TensorFlow can be
configured only once per process, so the whole pytest process uses two logical
CPU devices (core tests through `configure_runtime`, the GUI through
DEVICE_LAB_LOGICAL_CPUS): mirrored runs need two.
"""

import os
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from tests.waiting import became_true

LOGICAL_CPUS = 2

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="device-lab-tests-"))
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["DEVICE_LAB_DATA_DIR"] = str(_SESSION_DIR / "data")
os.environ["DEVICE_LAB_SETTINGS_DIR"] = str(_SESSION_DIR / "settings")
os.environ["DEVICE_LAB_LOG_DIR"] = str(_SESSION_DIR / "logs")
os.environ["DEVICE_LAB_LOGICAL_CPUS"] = str(LOGICAL_CPUS)

THREAD_GRACE_S = 60.0  # a thread that has emitted `finished` ends as soon as its `quit` is delivered; a busy machine may delay that


@pytest.fixture(autouse=True)
def no_thread_left_running():
    """Fail a test that leaves a worker QThread running (started through gui.qt_threads).

    Waits for the threads to end (the condition), delivering Qt events meanwhile: a worker's
    `finished -> thread.quit` is queued to this thread. It never quits a thread itself, so a
    worker still in its `run()` after the grace fails the test.
    """
    yield
    workers = sys.modules.get("gui.qt_threads")
    if workers is None:
        return
    from PySide6.QtCore import QCoreApplication

    became_true(lambda: not workers.running_threads(), THREAD_GRACE_S, tick=QCoreApplication.processEvents)
    running = [thread.objectName() or "unnamed" for thread in workers.running_threads()]
    if running:
        workers.wait_for_threads(120)
        pytest.fail(f"test left worker threads running: {', '.join(running)}")


@pytest.fixture
def silent_tpu_address():
    """A grpc:// address that accepts TCP connections and never answers: a TPU probe there waits out its time limit.

    (A port where nothing listens refuses at once, and the probe says so without waiting: core.machine.tpu.refused_at_once.)
    """
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"grpc://127.0.0.1:{server.getsockname()[1]}"
