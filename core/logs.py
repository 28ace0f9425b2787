"""Where the app's and TensorFlow's log output goes: a file and an in-app buffer, not the terminal.

What reaches the terminal, measured with TensorFlow 2.21 (CPU-only Linux host,
CUDA build of TF, no GPU driver), for `import tensorflow`, device listing, two
tiny training runs (one with XLA), a profiler capture and a tf.summary write:

- `import tensorflow` prints six lines at *every* TF_CPP_MIN_LOG_LEVEL, 0 to 3:
  twice (once per shared library that loads) "WARNING: All log messages before
  absl::InitializeLog() is called are written to STDERR", then
  "I0000 ... port.cc:153] oneDNN custom operations are on ..." and
  "I0000 ... cudart_stub.cc:31] Could not find cuda drivers ...". They are
  written by C++ absl logging before it is initialised, so the level variable
  cannot filter them, and Python's `absl.logging` (a separate, Python-only
  library) changes nothing either: setting its verbosity before the import
  left the output identical.
- Level 0 or 1 adds, after the import: cpu_feature_guard (level 0 only),
  "E ... failed call to cuInit" on the first device listing, a
  cache_dataset_ops warning per run, four XLA service lines and five profiler
  session lines.
- Level 2 leaves only the cuInit error (printed when TF first lists devices);
  level 3 hides it too, but would also hide real C++ errors for good.
- TF's Python logger ("tensorflow") gets its own stderr handler when the root
  logger has none at TF import time.

The approach taken: `setup_logging` sets level 2 (errors stay visible) and
sends the "tensorflow" and "absl" Python loggers to a rotating file and a
`LogBuffer`; `import_tensorflow_quietly` imports TF and lists its devices with
file descriptor 2 redirected to a file (`redirect_native_stderr`), which
catches the six import lines and the cuInit error. Python's own `sys.stderr`
keeps writing to the terminal during the redirect, and what was captured is
replayed there if the block raised, so no traceback or hint is lost. Measured
result: nothing reaches the terminal for the whole sequence above.

Some C++ lines come later, at ERROR level, so level 2 lets them through: with
oneDNN on (the default on CPUs with AVX-VNNI/AMX, or TF_ENABLE_ONEDNN_OPTS=1)
a float16 run prints "E ... util.cc:131] oneDNN supports DT_HALF only on
platforms with AVX-512 ..." when its step function is first optimised, well
after the import. So once `import_tensorflow_quietly` has run, the engine
wraps a run's set-up and first call (tracing, graph rewrites, compilation) in
`quiet_native_stderr()`, the same redirect; without it (`--verbose`, or a
library user who never asked) TensorFlow's output stays on the terminal.
"""

from __future__ import annotations

import collections
import logging
import logging.handlers
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

APP_NAME = "device-lab"
LOG_DIR_ENV = "DEVICE_LAB_LOG_DIR"
LOG_FILE_NAME = "device-lab.log"
NATIVE_LOG_NAME = "tensorflow-native.log"
NATIVE_LOGGER = "tensorflow.native"
ROUTED_LOGGERS = ("tensorflow", "absl")

_MAX_LOG_BYTES = 1 << 20
_LOG_BACKUPS = 3
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_NATIVE_LINE = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ([^\]]+)\] ?(.*)$")
_NATIVE_START = re.compile(r"^(WARNING|ERROR|INFO|FATAL)\b")
_NATIVE_LEVELS = {"I": logging.INFO, "W": logging.WARNING, "E": logging.ERROR, "F": logging.CRITICAL}


@dataclass(frozen=True)
class LogEntry:
    """One log record, kept as plain values so any thread or view can hold it."""

    created: float
    level: int
    logger: str
    message: str

    @property
    def level_name(self) -> str:
        return logging.getLevelName(self.level)

    def format(self) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.created))
        return f"{stamp} {self.level_name} {self.logger}: {self.message}"


Listener = Callable[[LogEntry], None]


class LogBuffer(logging.Handler):
    """The last `capacity` log records in memory, for an in-app log view.

    Thread-safe. Listeners are called in the thread that logged, right after
    the entry is stored: they must be quick and must not block (a GUI view
    should hand the entry to its own thread, e.g. by emitting a signal).
    """

    def __init__(self, capacity: int = 2000, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self._lock = threading.RLock()
        self.lock = self._lock  # logging holds it around emit(); the readers below take it too
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._entries: collections.deque[LogEntry] = collections.deque(maxlen=capacity)
        self._listeners: list[Listener] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            entry = LogEntry(record.created, record.levelno, record.name, message)
            self._entries.append(entry)
            for listener in list(self._listeners):
                listener(entry)
        except Exception:
            self.handleError(record)

    def entries(self) -> list[LogEntry]:
        """The stored entries, oldest first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` with every new entry; returns a function that unsubscribes it."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe


_BUFFER = LogBuffer()
_redirect_lock = threading.Lock()
_redirect_active = False
_quiet_native_log: Path | None = None


def log_buffer() -> LogBuffer:
    """The process-wide buffer that `setup_logging` attaches to the root logger."""
    return _BUFFER


def default_log_dir() -> Path:
    """$DEVICE_LAB_LOG_DIR if set, else the platform's user log folder for device-lab."""
    override = os.environ.get(LOG_DIR_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))


def setup_logging(log_dir: str | Path | None = None, verbose: bool = False) -> Path:
    """Send Python logging (app, TensorFlow, absl) to a rotating file and `log_buffer()`.

    Call once at start-up, before TensorFlow is imported: it also sets
    TF_CPP_MIN_LOG_LEVEL=2 unless already set. `verbose` adds a stderr handler
    at DEBUG and leaves TF_CPP_MIN_LOG_LEVEL alone. Calling it again replaces
    the handlers it installed. Returns the log file's path.
    """
    folder = Path(log_dir).expanduser() if log_dir is not None else default_log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOG_FILE_NAME
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_device_lab", False)]:
        root.removeHandler(handler)
        if handler is not _BUFFER:
            handler.close()
    file_handler = logging.handlers.RotatingFileHandler(path, maxBytes=_MAX_LOG_BYTES, backupCount=_LOG_BACKUPS, encoding="utf-8")
    file_handler.setFormatter(logging.Formatter(_FORMAT))
    handlers: list[logging.Handler] = [file_handler, _BUFFER]
    if verbose:
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(logging.Formatter(_FORMAT))
        handlers.append(console)
    for handler in handlers:
        handler._device_lab = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for name in ROUTED_LOGGERS:
        _route_to_root(logging.getLogger(name))
    return path


def _route_to_root(logger: logging.Logger) -> None:
    """Drop the library's own stderr handler so its records reach only the root handlers."""
    for handler in list(logger.handlers):
        if type(handler) is logging.StreamHandler:
            logger.removeHandler(handler)
    logger.propagate = True


@contextmanager
def redirect_native_stderr(path: str | Path) -> Iterator[Path]:
    """Send what native code writes to file descriptor 2 to `path` while the block runs.

    For TensorFlow's C++ logging, which bypasses Python. Python's `sys.stderr`
    keeps writing to the original stderr meanwhile, so tracebacks and warnings
    still show. Afterwards the captured lines are logged to "tensorflow.native"
    (file and buffer), and written to stderr as well if the block raised.
    While one redirection is active (in any thread), further uses share it.
    """
    global _redirect_active
    path = Path(path)
    with _redirect_lock:
        owner = not _redirect_active
        _redirect_active = True
    if not owner:
        yield path
        return
    failed = False
    start: int | None = None
    try:
        with _fd2_redirected(path) as start:
            yield path
    except BaseException:
        failed = True
        raise
    finally:
        with _redirect_lock:
            _redirect_active = False
        if start is not None:
            text = _read_from(path, start)
            forward_native_lines(text)
            if failed and text:
                sys.stderr.write(text)
                sys.stderr.flush()


@contextmanager
def _fd2_redirected(path: Path) -> Iterator[int]:
    """Point fd 2 at `path` (appending), keep sys.stderr on the old fd 2; yields the start offset."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    if path.exists() and path.stat().st_size > _MAX_LOG_BYTES:
        flags |= os.O_TRUNC
    target = os.open(path, flags, 0o644)
    start = os.fstat(target).st_size
    _flush_python_streams()
    saved = os.dup(2)
    try:
        os.dup2(target, 2)
    finally:
        os.close(target)
    previous = sys.stderr
    python_stderr = None
    if _fileno(previous) == 2:
        encoding = getattr(previous, "encoding", None) or "utf-8"
        python_stderr = open(saved, "w", buffering=1, encoding=encoding, errors="backslashreplace", closefd=False)
        sys.stderr = python_stderr
    try:
        yield start
    finally:
        _flush_python_streams()
        if python_stderr is not None:
            if sys.stderr is python_stderr:
                sys.stderr = previous
            python_stderr.close()
        os.dup2(saved, 2)
        os.close(saved)


def _read_from(path: Path, offset: int) -> str:
    with open(path, "rb") as file:
        file.seek(offset)
        return file.read().decode("utf-8", errors="replace")


def _fileno(stream: object) -> int | None:
    try:
        return stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None


def _flush_python_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def forward_native_lines(text: str) -> None:
    """Log native log text (absl/glog format) to "tensorflow.native", one record per message."""
    logger = logging.getLogger(NATIVE_LOGGER)
    level, lines = logging.INFO, []
    for line in text.splitlines():
        if not line.strip():
            continue
        glog = _NATIVE_LINE.match(line)
        plain = _NATIVE_START.match(line)
        if not (glog or plain):
            lines.append(line)
            continue
        if lines:
            logger.log(level, "\n".join(lines))
        if glog:
            level, lines = _NATIVE_LEVELS[glog.group(1)], [f"{glog.group(2)}: {glog.group(3)}"]
        elif plain:
            level, lines = _NATIVE_LEVELS[plain.group(1)[0]], [line]
    if lines:
        logger.log(level, "\n".join(lines))


def import_tensorflow_quietly(log_dir: str | Path | None = None) -> Path:
    """Import TensorFlow and list its devices with its C++ start-up lines sent to a file.

    Returns that file (`tensorflow-native.log` in the log folder); its lines
    also go to the app log and `log_buffer()`. Does not initialise the TF
    runtime, so `core.machine.runtime.configure_runtime` may still run afterwards.
    From then on `quiet_native_stderr()` sends TF's later C++ lines to the same file.
    """
    global _quiet_native_log
    folder = Path(log_dir).expanduser() if log_dir is not None else default_log_dir()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _quiet_native_log = folder / NATIVE_LOG_NAME
    with redirect_native_stderr(_quiet_native_log) as path:
        import tensorflow as tf

        # Without root handlers TF gives its logger a handler on sys.stderr, which the redirect replaced
        # with a stream it closes on exit: send that logger's records to the root handlers instead.
        _route_to_root(logging.getLogger("tensorflow"))
        tf.config.list_physical_devices()
    return path


@contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """While the block runs, TF's C++ lines go where `import_tensorflow_quietly` sent them.

    For the moments TensorFlow logs at ERROR level about things that are not
    errors (the oneDNN DT_HALF notice at a float16 run's first call). Does
    nothing until `import_tensorflow_quietly` ran in this process, so --verbose
    and library use keep TensorFlow's output on the terminal.
    """
    path = _quiet_native_log
    if path is None:
        yield
        return
    with redirect_native_stderr(path):
        yield
