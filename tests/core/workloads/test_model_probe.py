"""Describing a model file in a child process: the answer, the file's own errors, and hung or crashed children."""

from __future__ import annotations

import os
import threading
import time

import pytest

from core.config import ModelRef
from core.workloads.model_file import ModelFileError, file_sha256
from core.workloads.model_probe import WHAT, describe_model_file
from tests.core.workloads.conftest import VOCAB, two_io_model, write_py
from tests.waiting import became_true

HANG_LIMIT_S = 5.0
KILL_MARGIN_S = 10.0  # the child's start and the kill, beyond its limit


@pytest.mark.slow
def test_child_describes_the_two_input_two_output_model(two_io_keras):
    described = describe_model_file(ModelRef(str(two_io_keras)), timeout_s=240)
    assert described["sha256"] == file_sha256(two_io_keras) and described["path"] == str(two_io_keras)
    assert described["params"] == two_io_model().count_params()
    assert [(i["name"], i["dtype"], i["vocab"]) for i in described["inputs"]] == [("ids", "int32", VOCAB), ("feat", "float32", None)]
    assert [(o["name"], o["activation"]) for o in described["outputs"]] == [("cls", "linear"), ("flag", "sigmoid")]
    assert [loss["loss"] for loss in described["losses"]] == ["sparse_categorical_crossentropy", "binary_crossentropy"]
    assert all(loss["reason"] for loss in described["losses"]) and described["compiled"] is False


def test_an_untrusted_python_file_is_refused_before_any_child_starts(tmp_path):
    marker = tmp_path / "ran.txt"
    path = write_py(tmp_path, "model.py", f"open({str(marker)!r}, 'w').close()\n")
    with pytest.raises(ModelFileError) as error:
        describe_model_file(ModelRef(str(path)), timeout_s=60)
    assert error.value.needs_trust and error.value.path == str(path) and not marker.exists()


def test_child_passes_back_the_problem_it_found(tmp_path):
    path = write_py(tmp_path, "no_builder.py", "x = 1\n")
    with pytest.raises(ModelFileError) as error:
        describe_model_file(ModelRef(str(path), trust=True), timeout_s=60)
    assert error.value.path == str(path) and "defines no build_model()" in error.value.reason
    assert not error.value.needs_trust


@pytest.mark.slow
def test_a_hung_python_file_fails_within_its_limit(tmp_path):
    path = write_py(tmp_path, "hangs.py", "import time\ntime.sleep(60)\n")
    started = time.monotonic()
    with pytest.raises(ModelFileError) as error:
        describe_model_file(ModelRef(str(path), trust=True), timeout_s=HANG_LIMIT_S)
    assert time.monotonic() - started < HANG_LIMIT_S + KILL_MARGIN_S
    assert f"within its {HANG_LIMIT_S:g} s limit" in str(error.value) and str(path) in str(error.value)


def test_a_crashing_python_file_is_a_clear_failure(tmp_path):
    path = write_py(tmp_path, "crashes.py", "import os\nos.abort()\n")
    with pytest.raises(ModelFileError) as error:
        describe_model_file(ModelRef(str(path), trust=True), timeout_s=60)
    reason = error.value.reason
    assert error.value.path == str(path) and reason.startswith(WHAT) and "killed by SIGABRT" in reason and "build_model()" in reason


@pytest.mark.slow
def test_a_build_model_that_exits_is_described_by_what_the_child_was_doing(tmp_path):
    path = write_py(
        tmp_path, "exits.py", "import os, sys\n\ndef build_model():\n    print('giving up', file=sys.stderr)\n    os._exit(3)\n"
    )
    with pytest.raises(ModelFileError) as error:
        describe_model_file(ModelRef(str(path), trust=True), timeout_s=60)
    reason = error.value.reason
    assert error.value.path == str(path) and reason.startswith(WHAT) and "code 3" in reason and "build_model()" in reason
    assert reason.endswith(": giving up")  # its last words


def test_a_stop_kills_the_child_at_once(tmp_path):
    pid_file = tmp_path / "pid"
    path = write_py(tmp_path, "hangs.py", f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    stop = threading.Event()
    threading.Thread(target=lambda: (became_true(pid_file.exists, 60, every_s=0.05), stop.set()), daemon=True).start()
    started = time.monotonic()
    with pytest.raises(ModelFileError, match="inspecting the model was stopped"):
        describe_model_file(ModelRef(str(path), trust=True), timeout_s=100, stop_event=stop)
    assert time.monotonic() - started < 60
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
