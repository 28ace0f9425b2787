"""The one way the app runs a child process: start it, hear its messages, bound it, stop it, kill it whole, say how it ended.

Parent side, `Child`: a process group (session) of its own, the one environment
(`child_env`), a watch thread that kills the whole group at `limit_s`, on a stop
(`stop_event` or `stop()`: asked, then killed after `stop_grace_s`) or when
`poll` says so (the max-batch probe's memory watch). For a streaming child:

    with Child.start("core.some_job", [config_json], what="training on JAX", stop_event=stop, stop_grace_s=5) as job:
        for message in job.messages():  # as they arrive, in order; ends once the child has ended
            ...
    job.end, job.result, job.describe_end()  # ChildEnd, its reply, "training on JAX exited with code 3 while ..."

Child side: `send(message)`, `stage(doing)`, `reply(answer)`, `listen_to_parent()`, `end_with_parent()`.
The protocol: one line per message on the child's stdout: `MARKER`, the kind
("message" or "reply"), a space, JSON. The first `send` moves the child's fd 1
onto stderr, so nothing else (print, TensorFlow's C++ log) writes on the reply
pipe; a stdout line without the marker is kept as output, never parsed. A
message with a "stage" key says what the child is doing. The child's stdin is
the control pipe: `STOP_LINE` asks it to stop, a `MARKER` line carries a message
to it (`Child.tell`, read with `heard` in the child); its end means the parent is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MARKER = "@@device-lab "
MESSAGE, REPLY = "message", "reply"
STOP_LINE = "stop"
ORPHAN_EXIT_CODE = 3
_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)
POLL_S = 0.1
TAIL_LINES = 200
READER_JOIN_S = 5.0
EXITED, TIMEOUT, STOPPED, KILLED = "exited", "timeout", "stopped", "killed"
"""How a child ended (`ChildEnd.how`): by itself, or killed at its time limit, on a stop, or by `kill()`.
A `poll` that ends a child names its own reason."""

_GLOG_HEADER = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:[\d.]+\s+\d+ ")
_NOISE = ("All log messages before absl::InitializeLog()", "failed call to cuInit")
_END_OF_MESSAGES = object()

Poll = Callable[["Child"], str]
"""Called every `poll_s` while the child runs; a non-empty answer kills its group with that as the reason."""


def child_env(hide_gpus: bool = False, changes: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The environment of every child: this one, the project importable, TensorFlow's C++ log quiet (unless the
    user set its level), with `hide_gpus` no GPU (a child that must not take GPU memory), then `changes`
    (a None value removes the variable)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if hide_gpus:
        env["CUDA_VISIBLE_DEVICES"] = "-1"
    for name, value in (changes or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def exit_description(returncode: int) -> str:
    """How a child ended, in words: "exit code 3", "killed by SIGKILL"."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


@dataclass(frozen=True)
class ChildEnd:
    """How a child ended: `how` (EXITED, TIMEOUT, STOPPED, KILLED or a poll's reason), its exit code,
    the stage it was in last (`doing`, "" if it named none) and its seconds from start to end."""

    how: str
    returncode: int
    doing: str
    seconds: float

    @property
    def ok(self) -> bool:
        """It ended by itself with exit code 0."""
        return self.how == EXITED and self.returncode == 0


class Child:
    """A running child process (see the module's docstring); `Child.start("core.x", [...], what=...)` runs `python -m core.x`.

    `what` names the job in `describe_end()` ("describing model.py"). `env`
    changes `child_env(hide_gpus)`; `pass_fds` are descriptors it inherits.
    `on_message` (called in a reader thread) replaces `messages()`; `on_end`
    hears the `ChildEnd` once the output is read. `terminate_to_stop` asks
    with SIGTERM instead of `STOP_LINE` (a program that does not read its stdin).
    Use it in a `with` block, or call `wait()`: a child is never left running.
    """

    def __init__(
        self,
        argv: Sequence[str],
        what: str,
        *,
        env: Mapping[str, str | None] | None = None,
        hide_gpus: bool = False,
        pass_fds: Sequence[int] = (),
        limit_s: float | None = None,
        stop_event: threading.Event | None = None,
        stop_grace_s: float = 0.0,
        poll: Poll | None = None,
        poll_s: float = POLL_S,
        on_message: Callable[[dict[str, Any]], None] | None = None,
        on_end: Callable[[ChildEnd], None] | None = None,
        terminate_to_stop: bool = False,
    ):
        self.what = what
        self._limit_s, self._stop_event, self._stop_grace_s = limit_s, stop_event, stop_grace_s
        self._poll, self._poll_s, self._on_message, self._on_end = poll, poll_s, on_message, on_end
        self._terminate_to_stop = terminate_to_stop
        self._lock = threading.Lock()
        self._messages: queue.Queue[Any] = queue.Queue()
        self._output: deque[str] = deque(maxlen=TAIL_LINES)
        self._doing, self._how = "", ""
        self._reply: Any = None
        self._end: ChildEnd | None = None
        self._kill_at: float | None = None
        self._ended = threading.Event()
        self._popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=child_env(hide_gpus, env),
            pass_fds=tuple(pass_fds),
            **_own_process_group(),
        )
        self._started = time.monotonic()
        self._readers = [_thread(self._read_stdout, f"child-{self.pid}-stdout"), _thread(self._read_stderr, f"child-{self.pid}-stderr")]
        _thread(self._watch, f"child-{self.pid}-watch")

    @classmethod
    def start(cls, module: str, args: Sequence[str] = (), *, what: str, **options: Any) -> Child:
        """Run `python -m module args...` with this interpreter; `options` as for `Child(...)`."""
        return cls([sys.executable, "-m", module, *args], what, **options)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """None while it runs; negative for a signal (POSIX)."""
        return self._popen.poll()

    @property
    def doing(self) -> str:
        """The stage the child said last ("" before it said one)."""
        return self._doing

    @property
    def result(self) -> Any:
        """The child's reply (`reply(answer)`), None if it sent none (yet)."""
        return self._reply

    @property
    def end(self) -> ChildEnd | None:
        """How it ended, once it has and its output is read; None before."""
        return self._end

    def messages(self) -> Iterator[dict[str, Any]]:
        """The child's messages in the order sent, as they arrive; ends once the child has ended and all are read."""
        if self._on_message is not None:
            raise RuntimeError("this child hands its messages to on_message")
        while (message := self._messages.get()) is not _END_OF_MESSAGES:
            yield message
        self._messages.put(_END_OF_MESSAGES)  # a second loop ends at once too

    def wait(self, timeout_s: float | None = None) -> ChildEnd:
        """Block until the child has ended and its output is read.

        TimeoutError when it still runs after `timeout_s` (it keeps running: its
        own `limit_s` bounds it). Interrupted (Ctrl-C), the child is killed first.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while not self._ended.wait(self._poll_s):
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"{self.what} still runs after {timeout_s:g} s")
        except TimeoutError:
            raise
        except BaseException:
            self.kill()
            self._ended.wait(2 * READER_JOIN_S)
            raise
        assert self._end is not None
        return self._end

    def stop(self, grace_s: float | None = None) -> None:
        """Ask the child to stop (`STOP_LINE`, or SIGTERM) and kill its group after `grace_s` (default: `stop_grace_s`)."""
        grace = self._stop_grace_s if grace_s is None else grace_s
        with self._lock:
            kill_at = time.monotonic() + grace
            self._kill_at = kill_at if self._kill_at is None else min(self._kill_at, kill_at)
        if grace <= 0:
            self.kill(STOPPED)
        elif self._terminate_to_stop:
            self._signal_group(terminate=True)
        else:
            self.send_line(STOP_LINE)

    def kill(self, reason: str = KILLED) -> None:
        """SIGKILL the child's whole process group now (if it still runs); `reason` becomes `ChildEnd.how`."""
        with self._lock:
            if self._popen.poll() is not None:
                return
            self._how = self._how or reason
        self._signal_group()

    def send_line(self, line: str) -> None:
        """Write one line on the child's stdin (its control pipe); a child that is gone is ignored."""
        with contextlib.suppress(OSError, ValueError, AttributeError):  # gone, closed, or no stdin
            self._popen.stdin.write(line + "\n")  # type: ignore[union-attr]
            self._popen.stdin.flush()  # type: ignore[union-attr]

    def tell(self, message: Mapping[str, Any]) -> None:
        """Send one message (a JSON object) to the child on its control pipe; the child reads it with `heard`."""
        self.send_line(f"{MARKER}{MESSAGE} {json.dumps(dict(message))}")

    def output(self, chars: int = 2000) -> str:
        """The last `chars` characters of what it wrote besides its messages (stderr, stray stdout), raw."""
        return "\n".join(self._output)[-chars:]

    def last_words(self, lines: int = 1, chars: int = 300) -> str:
        """Its last `lines` meaningful output lines (TensorFlow's INFO/WARNING chatter left out), each cut to `chars`."""
        meaningful = [line for line in map(_meaningful, list(self._output)) if line]
        return " | ".join(line[-chars:] for line in meaningful[-lines:])

    def describe_end(self, last_words: bool = True) -> str:
        """How it ended, what it was doing then and (with `last_words`, when it failed by itself) its last words:
        "describing model.py exited with code 3 while calling build_model(): ValueError: ..."."""
        end = self._end
        if end is None:
            return f"{self.what} is still running" + (f" ({self._doing})" if self._doing else "")
        if end.how == EXITED:
            ended = f"was {exit_description(end.returncode)}" if end.returncode < 0 else f"exited with code {end.returncode}"
        elif end.how == TIMEOUT:
            ended = f"did not finish within {self._limit_s:g} s"
        else:
            ended = {STOPPED: "was stopped", KILLED: "was killed"}.get(end.how, f"was stopped ({end.how})")
        text = f"{self.what} {ended}" + (f" while {end.doing}" if end.doing else "")
        words = self.last_words() if last_words and end.how == EXITED and end.returncode != 0 else ""
        return text + (f": {words}" if words else "")

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self.wait()

    def _watch(self) -> None:
        """Kill the group when its time is up, on a stop or when the poll says so; then record the end."""
        deadline = None if self._limit_s is None else self._started + self._limit_s
        while True:
            try:
                self._popen.wait(timeout=self._poll_s)
                break
            except subprocess.TimeoutExpired:
                pass
            if self._stop_event is not None and self._stop_event.is_set() and self._kill_at is None:
                self.stop()
            now = time.monotonic()
            reason = STOPPED if self._kill_at is not None and now >= self._kill_at else ""
            reason = reason or (TIMEOUT if deadline is not None and now >= deadline else "")
            reason = reason or self._polled()
            if reason:
                self.kill(reason)
        for reader in self._readers:
            reader.join(READER_JOIN_S)
        self._end = ChildEnd(self._how or EXITED, self._popen.wait(), self._doing, time.monotonic() - self._started)
        _close_quietly(self._popen.stdin)
        self._ended.set()
        self._messages.put(_END_OF_MESSAGES)
        if self._on_end is not None:
            self._on_end(self._end)

    def _polled(self) -> str:
        if self._poll is None:
            return ""
        try:
            return self._poll(self)
        except Exception as exc:  # a watch that fails must not leave the child unwatched
            return f"its watch failed: {type(exc).__name__}: {exc}"

    def _read_stdout(self) -> None:
        assert self._popen.stdout is not None
        for line in self._popen.stdout:
            kind, payload = _parse(line)
            if kind == REPLY:
                self._reply = payload
            elif kind == MESSAGE:
                if isinstance(payload.get("stage"), str):
                    self._doing = payload["stage"]
                if self._on_message is not None:
                    self._on_message(payload)
                else:
                    self._messages.put(payload)
            else:
                self._output.append(line.rstrip("\n"))
        _close_quietly(self._popen.stdout)

    def _read_stderr(self) -> None:
        assert self._popen.stderr is not None
        for line in self._popen.stderr:
            self._output.append(line.rstrip("\n"))
        _close_quietly(self._popen.stderr)

    def _signal_group(self, terminate: bool = False) -> None:
        """SIGKILL (or SIGTERM) the child's whole process group (it leads its own); off POSIX, the child alone."""
        try:
            if os.name == "posix":
                os.killpg(self._popen.pid, signal.SIGTERM if terminate else signal.SIGKILL)
            elif terminate:
                self._popen.terminate()
            else:
                self._popen.kill()
        except (ProcessLookupError, PermissionError):
            pass


def _parse(line: str) -> tuple[str, Any]:
    """(MESSAGE, dict) or (REPLY, value) for a protocol line; ("", None) for anything else (output)."""
    if not line.startswith(MARKER):
        return "", None
    kind, _, text = line[len(MARKER) :].partition(" ")
    try:
        payload = json.loads(text)
    except ValueError:
        return "", None
    if kind == MESSAGE and isinstance(payload, dict):
        return MESSAGE, payload
    return (REPLY, payload) if kind == REPLY else ("", None)


def _meaningful(line: str) -> str:
    """An output line worth showing, without its glog header; "" for TensorFlow's INFO/WARNING chatter."""
    header = _GLOG_HEADER.match(line)
    if (header and header.group(1) in "IW") or any(noise in line for noise in _NOISE):
        return ""
    return line[header.end() if header else 0 :].strip()


def _own_process_group() -> dict[str, Any]:
    if os.name == "nt":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
    return {"start_new_session": True}


def _thread(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def _close_quietly(stream: IO[str] | None) -> None:
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: no such stream
        stream.close()  # type: ignore[union-attr]


# The child's side.

_reply_stream: IO[str] | None = None
_send_lock = threading.Lock()
_from_parent: queue.Queue[dict[str, Any]] = queue.Queue()


def send(message: Mapping[str, Any]) -> None:
    """In the child: send one message (a JSON object) to the parent. Raises OSError when the parent is gone."""
    _write(MESSAGE, dict(message))


def stage(doing: str) -> None:
    """In the child: say what it is doing now ("importing TensorFlow"); a crash or a kill is described by it."""
    send({"stage": doing})


def reply(answer: Any) -> None:
    """In the child: send its answer (any JSON value), the parent's `Child.result`."""
    _write(REPLY, answer)


def listen_to_parent(stop: threading.Event | None = None, orphan_exit_s: float = 0.0) -> threading.Event:
    """In the child: read the control pipe (stdin) in a thread; returns the event it sets.

    `STOP_LINE` sets the event (stop after the call in flight); a message from
    `Child.tell` waits for `heard`. The pipe's end (the parent died or let go)
    sets the event too and ends this process after `orphan_exit_s` with
    ORPHAN_EXIT_CODE: a child never outlives its parent for long.
    """
    stop = stop if stop is not None else threading.Event()

    def listen() -> None:
        pending = b""
        while chunk := os.read(0, 4096):  # the raw descriptor: no lock on sys.stdin held at interpreter exit
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if line.strip() == STOP_LINE.encode():
                    stop.set()
                elif line.startswith(MARKER.encode()):
                    kind, message = _parse(line.decode("utf-8", "replace"))
                    if kind == MESSAGE and isinstance(message, dict):
                        _from_parent.put(message)
        stop.set()
        timer = threading.Timer(max(0.0, orphan_exit_s), os._exit, args=(ORPHAN_EXIT_CODE,))
        timer.daemon = True
        timer.start()

    _thread(listen, "listen-to-parent")
    return stop


def heard(stop: threading.Event, poll_s: float = POLL_S) -> dict[str, Any] | None:
    """In the child: the next message the parent sent (`Child.tell`), waiting for it; None once `stop` is set."""
    while not stop.is_set():
        try:
            return _from_parent.get(timeout=poll_s)
        except queue.Empty:
            continue
    return None


def end_with_parent() -> bool:
    """In the child: ask the kernel to kill this process when its parent dies (Linux); False where it cannot.

    `listen_to_parent`'s own exit needs the interpreter: a child whose thread holds the GIL in
    native code (TensorFlow setting up a cluster, XLA compiling) could outlive the app for minutes,
    with a gRPC port still open. SIGKILL from the kernel needs nothing from the child. Call it only
    in a child whose parent's starting thread outlives it (the kernel watches that thread).
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0


def _write(kind: str, payload: Any) -> None:
    line = f"{MARKER}{kind} {json.dumps(payload)}\n"
    with _send_lock:
        stream = _take_stdout()
        stream.write(line)
        stream.flush()


def _take_stdout() -> IO[str]:
    """The reply pipe: the real stdout, once; fd 1 then points at stderr, so stray prints cannot corrupt messages."""
    global _reply_stream
    if _reply_stream is None:
        sys.stdout.flush()
        reply_fd = os.dup(1)
        os.dup2(2, 1)
        _reply_stream = os.fdopen(reply_fd, "w", encoding="utf-8")
    return _reply_stream
