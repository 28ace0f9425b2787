"""TensorBoard output for runs, and starting TensorBoard itself.

`TensorBoardWriter` writes one event-file folder per run from a writer thread
(`core.hooks.event_file`: events encoded without a TensorFlow op, framed by
`tf.io.TFRecordWriter`), so writing needs only TensorFlow. Viewing needs the
`tensorboard` package, which TensorFlow 2.21 no longer installs: it is the
optional extra `device-lab[tensorboard]`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from core.child_process import Child
from core.hooks.event_file import EventFileThread
from core.ports import free_ports
from core.training.hooks import RunContext, RunHook

if TYPE_CHECKING:
    from core.results import RunResult, StepRecord

TENSORBOARD_MISSING = "TensorBoard is not installed: pip install 'device-lab[tensorboard]' (or pip install tensorboard)"
MEMORY_TAG = "device_memory_bytes"
HOST_MEMORY_TAG = f"{MEMORY_TAG}/host_rss"


class TensorBoardMissing(RuntimeError):
    """The `tensorboard` command is not installed in this environment."""

    def __init__(self) -> None:
        super().__init__(TENSORBOARD_MISSING)


class RunDirectory:
    """The folder of one run under a base log folder: `<base>/<started>-<model>-<strategy>`.

    Named once when the run starts; hooks that share an instance (scalars
    and a profiler trace) write into the same folder, which TensorBoard shows
    as one run.
    """

    def __init__(self, base: str | Path) -> None:
        self.base = Path(base).expanduser()
        self._context: RunContext | None = None
        self._path: Path | None = None

    @property
    def path(self) -> Path | None:
        """The current run's folder, or None before a run started."""
        return self._path

    def resolve(self, context: RunContext) -> Path:
        """Create (on the first call for this run) and return the run's folder."""
        if self._context is context and self._path is not None:
            return self._path
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        name = f"{stamp}-{context.config.model}-{context.config.strategy}"
        self.base.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, 1000):
            candidate = self.base / (name if attempt == 1 else f"{name}-{attempt}")
            try:
                candidate.mkdir()
            except FileExistsError:
                continue
            self._context, self._path = context, candidate
            return candidate
        raise FileExistsError(f"Too many runs named {name} in {self.base}: clean up that folder.")


def as_run_directory(logdir: str | Path | RunDirectory) -> RunDirectory:
    """`logdir` itself if it is a RunDirectory (shared), else a new one under that folder."""
    return logdir if isinstance(logdir, RunDirectory) else RunDirectory(logdir)


class TensorBoardWriter(RunHook):
    """Writes loss, step time and samples/s per step, and memory now and then, as TensorBoard scalars.

    Tags: "loss", "step_time_ms", "samples_per_s" (global batch / step time)
    at every step; "device_memory_bytes/<device>" (TF allocator, current) on
    accelerators or "device_memory_bytes/host_rss" (process RSS) on CPU runs,
    at the latest step each time the file is flushed and at the run's end (not
    for multi-worker runs, whose steps run in other processes); the run's
    config as text "config".

    The training thread only appends each call's records to a list: an
    `EventFileThread` turns them into event records and writes them every
    `flush_s` seconds, so logging costs the run almost nothing (benchmark
    `hook_overhead`).
    """

    def __init__(self, logdir: str | Path | RunDirectory, flush_s: float = 2.0) -> None:
        self.directory = as_run_directory(logdir)
        self._flush_s = flush_s
        self._thread: EventFileThread | None = None

    @property
    def run_dir(self) -> Path | None:
        """Where this run's event files are (None before the run started)."""
        return self.directory.path

    def on_run_start(self, context: RunContext) -> None:
        run_dir = self.directory.resolve(context)
        # A multi-worker run relays its hooks from worker processes (context.model is None there):
        # this process's memory says nothing about theirs, so no memory scalar is written.
        devices = context.device_names if context.model is not None else None
        self._thread = EventFileThread(run_dir, context.config.batch_size, self._flush_s, lambda: _memory_now(devices))
        config_text = json.dumps(context.config.to_dict(), indent=2, default=str)
        self._thread.add_text("config", f"```\n{config_text}\n```", step=0)
        self._thread.start()

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        if self._thread is not None:
            self._thread.add_steps(records)

    def on_run_end(self, result: RunResult) -> None:
        if self._thread is not None:
            self._thread.close()
            self._thread = None


def _memory_now(device_names: Sequence[str] | None) -> dict[str, int]:
    return {} if device_names is None else memory_scalars(device_names)


def memory_scalars(device_names: Sequence[str]) -> dict[str, int]:
    """Memory in use now, by tag: each accelerator's TF allocator, else the process's RSS."""
    import tensorflow as tf

    values: dict[str, int] = {}
    for device in device_names:
        if device.startswith("CPU"):
            continue
        try:
            values[f"{MEMORY_TAG}/{device.replace(':', '_')}"] = int(tf.config.experimental.get_memory_info(device)["current"])
        except (ValueError, RuntimeError, KeyError):
            continue
    if values:
        return values
    import psutil

    return {HOST_MEMORY_TAG: psutil.Process().memory_info().rss}


def find_tensorboard() -> str | None:
    """The `tensorboard` command to run: this environment's own first, then PATH; None if missing."""
    script = "tensorboard.exe" if os.name == "nt" else "tensorboard"
    beside_python = Path(sys.executable).parent / script
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return str(beside_python)
    return shutil.which("tensorboard")


class TensorBoardProcess:
    """A TensorBoard server this app started (a `core.child_process.Child`); `stop()` ends it (also on leaving a `with` block)."""

    def __init__(self, child: Child, url: str, logdir: Path) -> None:
        self.child = child
        self.url = url
        self.logdir = logdir

    @property
    def running(self) -> bool:
        return self.child.returncode is None

    def output(self) -> str:
        """What TensorBoard printed last (up to 2000 characters), for error reports."""
        return self.child.output(2000)

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the server (SIGTERM, then SIGKILL if it does not exit in `timeout_s`)."""
        if self.running:
            self.child.stop(timeout_s)
        self.child.wait()

    def __enter__(self) -> TensorBoardProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def launch_tensorboard(logdir: str | Path, timeout_s: float = 90.0) -> TensorBoardProcess:
    """Start `tensorboard --logdir logdir` on 127.0.0.1 and a free port; return once it answers HTTP.

    Blocks until then (TensorBoard imports TensorFlow, which takes seconds):
    call it off the GUI thread. Raises TensorBoardMissing when it is not
    installed, RuntimeError when it exits or stays silent for `timeout_s`.
    """
    command = find_tensorboard()
    if command is None:
        raise TensorBoardMissing()
    folder = Path(logdir).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    [port] = free_ports(1)
    url = f"http://127.0.0.1:{port}/"
    child = Child([command, "--logdir", str(folder), "--host", "127.0.0.1", "--port", str(port)], "TensorBoard", terminate_to_stop=True)
    server = TensorBoardProcess(child, url, folder)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.running:
            server.stop()
            raise RuntimeError(f"TensorBoard exited (code {child.returncode}) before it started. Its output:\n{server.output().strip()}")
        if _answers_http(url):
            return server
        time.sleep(0.25)
    server.stop()
    raise RuntimeError(
        f"TensorBoard did not answer on {url} within {timeout_s:.0f} s; it was stopped. Its output:\n{server.output().strip()}"
    )


def _answers_http(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(url, timeout=2) as response:
            return response.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (urllib.error.URLError, OSError):
        return False
