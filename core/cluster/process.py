"""One worker process started by the app: its own process group, JSON events, a stderr tail, a sure kill."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

EXITED = "exited"
TAIL_LINES = 40
MESSAGE_TAIL_LINES = 6
_GLOG_PREFIX = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:[\d.]+\s+\d+ ")
_NOISE = ("All log messages before absl::InitializeLog()", "failed call to cuInit")


class WorkerProcess:
    """Starts `argv` in a new process group and hands each JSON line of its stdout to `on_event`.

    `pass_fds` are descriptors it inherits (a private network's, see `core.cluster.isolation`).

    After the last line, `on_event` gets {"event": "exited", "code": ...}, sent
    only once stderr is fully read, so `last_lines()` then holds its last words.
    """

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        on_event: Callable[[dict[str, Any]], None],
        pass_fds: Sequence[int] = (),
    ):
        self._popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=dict(env),
            pass_fds=tuple(pass_fds),
            **_own_process_group(),
        )
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._on_event = on_event
        self._readers = [_start(self._read_tail, f"worker-{self.pid}-stderr")]
        self._readers.append(_start(self._read_events, f"worker-{self.pid}-stdout"))

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """None while running; negative for a signal (POSIX)."""
        return self._popen.poll()

    def send_line(self, line: str) -> None:
        """Write one line to its stdin; a process that is gone is ignored."""
        try:
            stdin = _piped(self._popen.stdin)
            stdin.write(line + "\n")
            stdin.flush()
        except (OSError, ValueError):
            pass

    def kill(self) -> None:
        """SIGKILL its whole process group (it leads its own session) if it still runs."""
        if self._popen.poll() is not None:
            return
        try:
            if os.name == "nt":
                self._popen.kill()
            else:
                os.killpg(self._popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self, timeout_s: float = 5.0) -> None:
        """Wait for the exit (kill first), finish reading its output, close the pipes."""
        self._popen.wait()
        for reader in self._readers:
            reader.join(timeout=timeout_s)
        for stream in (self._popen.stdin, self._popen.stdout, self._popen.stderr):
            _close_quietly(stream)

    def how_it_ended(self) -> str:
        code = self._popen.returncode
        if code is not None and code < 0:
            return f"was killed by signal {_signal_name(-code)}."
        return f"exited with code {code} before the run ended."

    def last_lines(self) -> str:
        """Its last meaningful stderr lines, TensorFlow's INFO/WARNING chatter left out."""
        lines = [line for line in map(_readable, list(self._tail)) if line]
        return " | ".join(line[:300] for line in lines[-MESSAGE_TAIL_LINES:])

    def _read_events(self) -> None:
        for line in _piped(self._popen.stdout):
            try:
                event = json.loads(line)
            except ValueError:
                self._tail.append(line.rstrip("\n"))
                continue
            if isinstance(event, dict):
                self._on_event(event)
        self._readers[0].join()
        self._on_event({"event": EXITED, "code": self._popen.wait()})

    def _read_tail(self) -> None:
        for line in _piped(self._popen.stderr):
            self._tail.append(line.rstrip("\n"))


def _start(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def _piped(stream: IO[str] | None) -> IO[str]:
    """A stream the process was started with as a pipe (only a pipe left out of Popen is None)."""
    if stream is None:
        raise ValueError("this stream of the worker process is not a pipe")
    return stream


def _own_process_group() -> dict[str, Any]:
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _readable(line: str) -> str:
    """A stderr line worth showing, without its glog header; "" for TensorFlow's INFO/WARNING chatter."""
    header = _GLOG_PREFIX.match(line)
    if (header and header.group(1) in "IW") or any(noise in line for noise in _NOISE):
        return ""
    return line[header.end() if header else 0 :].strip()


def _close_quietly(stream: IO[str] | None) -> None:
    if stream is not None:
        try:
            stream.close()
        except OSError:
            pass
