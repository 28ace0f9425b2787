"""TensorFlow's log output lands in the app's log file and buffer, not on the terminal."""

import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from core.logs import (
    LOG_FILE_NAME,
    NATIVE_LOG_NAME,
    LogBuffer,
    forward_native_lines,
    log_buffer,
    redirect_native_stderr,
    setup_logging,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def restore_logging(monkeypatch):
    """Put the root, tensorflow and absl loggers back as they were; TF_CPP_MIN_LOG_LEVEL too."""
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    root = logging.getLogger()
    saved_root = (list(root.handlers), root.level)
    saved = {name: (list(logging.getLogger(name).handlers), logging.getLogger(name).propagate) for name in ("tensorflow", "absl")}
    log_buffer().clear()
    yield
    for handler in root.handlers:
        if getattr(handler, "_device_lab", False) and handler is not log_buffer():
            handler.close()
    root.handlers[:], root.level = saved_root
    for name, (handlers, propagate) in saved.items():
        logging.getLogger(name).handlers[:] = handlers
        logging.getLogger(name).propagate = propagate
    log_buffer().clear()


def _messages() -> list[str]:
    return [entry.message for entry in log_buffer().entries()]


def test_tensorflow_and_absl_records_go_to_file_and_buffer_not_stderr(tmp_path, capfd, restore_logging):
    import absl.logging
    import tensorflow as tf

    # What TF does when it is imported before logging is set up: its own stderr handler.
    tf.get_logger().addHandler(logging.StreamHandler(sys.stderr))
    path = setup_logging(tmp_path)
    assert path == tmp_path / LOG_FILE_NAME
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
    tf.get_logger().warning("marker from the tensorflow logger")
    absl.logging.warning("marker from absl")
    logging.getLogger("core.training.engine").info("marker from the app")

    captured = capfd.readouterr()
    assert "marker" not in captured.err + captured.out
    text = path.read_text()
    for marker in ("marker from the tensorflow logger", "marker from absl", "marker from the app"):
        assert marker in text
        assert marker in _messages()
    entry = next(e for e in log_buffer().entries() if e.message == "marker from the tensorflow logger")
    assert entry.logger == "tensorflow" and entry.level == logging.WARNING
    assert "WARNING tensorflow: marker from the tensorflow logger" in entry.format()


def test_verbose_also_prints_to_stderr_and_keeps_the_tf_level(tmp_path, capfd, restore_logging, monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    setup_logging(tmp_path, verbose=True)
    setup_logging(tmp_path, verbose=True)  # twice: handlers are replaced, not added
    logging.getLogger("tensorflow").debug("verbose marker")
    assert capfd.readouterr().err.count("verbose marker") == 1
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
    assert _messages().count("verbose marker") == 1


def test_log_dir_comes_from_the_environment_when_not_given(tmp_path, monkeypatch, restore_logging):
    monkeypatch.setenv("DEVICE_LAB_LOG_DIR", str(tmp_path / "from-env"))
    assert setup_logging() == tmp_path / "from-env" / LOG_FILE_NAME
    assert (tmp_path / "from-env" / LOG_FILE_NAME).is_file()


def test_buffer_is_bounded_and_tells_subscribers():
    buffer = LogBuffer(capacity=3)
    logger = logging.getLogger("test_logs.bounded")
    logger.propagate = False
    logger.addHandler(buffer)
    seen = []
    unsubscribe = buffer.subscribe(seen.append)
    try:
        for i in range(5):
            logger.warning("message %d", i)
        unsubscribe()
        logger.warning("after unsubscribe")
    finally:
        logger.removeHandler(buffer)
    assert [e.message for e in buffer.entries()] == ["message 3", "message 4", "after unsubscribe"]
    assert [e.message for e in seen] == [f"message {i}" for i in range(5)]


def test_buffer_keeps_every_record_logged_from_many_threads():
    buffer = LogBuffer(capacity=10_000)
    logger = logging.getLogger("test_logs.threads")
    logger.propagate = False
    logger.addHandler(buffer)
    heard = []
    buffer.subscribe(heard.append)

    def log_many(n):
        for i in range(500):
            logger.warning("thread %d line %d", n, i)

    threads = [threading.Thread(target=log_many, args=(n,)) for n in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        logger.removeHandler(buffer)
    messages = [e.message for e in buffer.entries()]
    assert len(messages) == len(set(messages)) == 4000
    assert len(heard) == 4000


def test_native_stderr_goes_to_the_file_and_the_log_then_fd2_is_back(tmp_path, capfd, restore_logging):
    setup_logging(tmp_path)
    native = tmp_path / NATIVE_LOG_NAME
    with redirect_native_stderr(native):
        os.write(2, b"I0000 00:00:1795332332.282299    7677 fake_stub.cc:31] native info line\n")
        os.write(2, b"E0000 00:00:1795332332.282299    7677 fake_platform.cc:52] native error line\ncontinued detail\n")
    os.write(2, b"after the block\n")
    err = capfd.readouterr().err
    assert "native" not in err and "after the block" in err
    assert "fake_stub.cc:31] native info line" in native.read_text()
    entries = {e.message: e for e in log_buffer().entries() if e.logger == "tensorflow.native"}
    assert entries["fake_stub.cc:31: native info line"].level == logging.INFO
    assert entries["fake_platform.cc:52: native error line\ncontinued detail"].level == logging.ERROR
    assert "native error line" in (tmp_path / LOG_FILE_NAME).read_text()


def test_forwarded_native_text_keeps_levels_and_continuation_lines(restore_logging, tmp_path):
    setup_logging(tmp_path)
    forward_native_lines(
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "I0000 00:00:1.5 42 cpu_feature_guard.cc:227] This TensorFlow binary is optimized.\n"
        "To enable the following instructions: AVX2 FMA\n"
        "W0000 00:00:1.6 42 cache_dataset_ops.cc:912] The calling iterator did not fully read the dataset\n"
    )
    got = [(e.level, e.message) for e in log_buffer().entries() if e.logger == "tensorflow.native"]
    assert got == [
        (logging.WARNING, "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"),
        (logging.INFO, "cpu_feature_guard.cc:227: This TensorFlow binary is optimized.\nTo enable the following instructions: AVX2 FMA"),
        (logging.WARNING, "cache_dataset_ops.cc:912: The calling iterator did not fully read the dataset"),
    ]


def _python(script: str, log_dir: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["DEVICE_LAB_LOG_DIR"] = str(log_dir)
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def test_python_output_and_tracebacks_still_reach_the_terminal_during_a_redirect(tmp_path):
    out = _python(
        f"""
        import os, sys
        from core.logs import redirect_native_stderr
        with redirect_native_stderr({str(tmp_path / "native.log")!r}):
            os.write(2, b"native before the failure\\n")
            print("python stderr line", file=sys.stderr)
            raise RuntimeError("boom inside the redirect")
        """,
        tmp_path,
    )
    assert out.returncode == 1
    assert "python stderr line" in out.stderr
    assert "RuntimeError: boom inside the redirect" in out.stderr and "Traceback" in out.stderr
    assert "native before the failure" in out.stderr, "captured native output is replayed when the block fails"


@pytest.mark.slow
def test_quiet_tensorflow_import_leaves_the_terminal_clean_and_the_runtime_configurable(tmp_path):
    out = _python(
        """
        import sys
        from core.logs import import_tensorflow_quietly, setup_logging
        setup_logging()
        native = import_tensorflow_quietly()
        from core.machine.runtime import RuntimeSettings, configure_runtime
        assert configure_runtime(RuntimeSettings(logical_cpus=2)) == [], "the runtime must still be configurable"
        import tensorflow as tf
        assert len(tf.config.list_logical_devices("CPU")) == 2
        tf.constant(1.0) + 1
        print(native)
        """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == "", f"TensorFlow wrote to the terminal:\n{out.stderr}"
    native = Path(out.stdout.strip())
    assert native == tmp_path / NATIVE_LOG_NAME
    app_log = (tmp_path / LOG_FILE_NAME).read_text()
    for line in native.read_text().splitlines():
        source = re.match(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ([^\]]+)\]", line)
        if source:
            assert f"tensorflow.native: {source.group(1)}:" in app_log


@pytest.mark.slow
def test_later_native_lines_stay_on_the_terminal_until_a_quiet_import_then_go_to_the_log(tmp_path):
    out = _python(
        """
        import os
        from core.logs import import_tensorflow_quietly, quiet_native_stderr, setup_logging
        setup_logging()
        with quiet_native_stderr():
            os.write(2, b"E0000 00:00:1.0 7 util.cc:131] before any quiet import\\n")
        native = import_tensorflow_quietly()
        with quiet_native_stderr():
            os.write(2, b"E0000 00:00:2.0 7 util.cc:131] oneDNN supports DT_HALF only on platforms with AVX-512.\\n")
        os.write(2, b"after the block\\n")
        """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "before any quiet import" in out.stderr, "without a quiet import (--verbose) TF's lines stay visible"
    assert "DT_HALF" not in out.stderr and "after the block" in out.stderr
    assert "DT_HALF" in (tmp_path / NATIVE_LOG_NAME).read_text()
    assert "tensorflow.native: util.cc:131: oneDNN supports DT_HALF" in (tmp_path / LOG_FILE_NAME).read_text()
