"""A busy machine on demand: one bounded busy-loop process per core, as other work would keep the cores busy.

`busy_cores()` starts the loops, yields, and always ends them (each also ends
by itself after `limit_s`, so nothing outlives a crashed test). Used by the
contention tests and by `benchmarks/contention.py`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.waiting import became_true

LOOP = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


LAUNCH = (
    "import subprocess, sys\n"
    "for _ in range({count}):\n"
    "    devnull = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "    loop = subprocess.Popen([sys.executable, '-c', {loop!r}], start_new_session=True, **devnull)\n"
    "    print(loop.pid, flush=True)\n"
)


@contextmanager
def busy_cores(count: int | None = None, limit_s: float = 300.0) -> Iterator[list[int]]:
    """`count` (default: every core) processes spinning for at most `limit_s` seconds, killed when the block ends; yields their pids.

    The loops are other work, not this process's: a launcher starts them and exits, so they are not
    this process's descendants (the app counts its own descendants, a backend job or cluster workers, as its own work).
    """
    launch = LAUNCH.format(count=count or os.cpu_count() or 2, loop=LOOP.format(limit=limit_s))
    started = subprocess.run([sys.executable, "-c", launch], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True)
    pids = [int(pid) for pid in started.stdout.split()]
    try:
        _wait_spinning(pids)
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _wait_gone(pids)


def _wait_spinning(pids: list[int], timeout_s: float = 10.0) -> None:
    """Until each loop has used some CPU time (it is running, not starting up), within `timeout_s`."""
    became_true(lambda: all(_cpu_s(pid) > 0.05 for pid in pids), timeout_s)


def _wait_gone(pids: list[int], timeout_s: float = 10.0) -> None:
    """Until the killed loops are gone (their new parent reaps them), within `timeout_s`."""
    became_true(lambda: all(_gone(pid) for pid in pids), timeout_s, every_s=0.01)


def _gone(pid: int) -> bool:
    """Ended: reaped, or a zombie its new parent has yet to reap."""
    return _stat(pid)[:1] in ([], ["Z"])


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first); [] once the process is gone."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _cpu_s(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0
