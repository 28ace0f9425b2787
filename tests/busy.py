"""A busy machine on demand: one bounded busy-loop process per core, as other work would keep the cores busy.

`busy_cores()` starts the loops, yields, and always ends them (each also ends
by itself after `limit_s`, so nothing outlives a crashed test). Used by the
contention tests and by `benchmarks/contention.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

LOOP = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


@contextmanager
def busy_cores(count: int | None = None, limit_s: float = 300.0) -> Iterator[list[subprocess.Popen]]:
    """`count` (default: every core) processes spinning for at most `limit_s` seconds, killed when the block ends."""
    processes = [
        subprocess.Popen([sys.executable, "-c", LOOP.format(limit=limit_s)], stdin=subprocess.DEVNULL)
        for _ in range(count or os.cpu_count() or 2)
    ]
    try:
        _wait_spinning(processes)
        yield processes
    finally:
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()


def _wait_spinning(processes: list[subprocess.Popen], timeout_s: float = 10.0) -> None:
    """Until each loop has used some CPU time (it is running, not starting up), within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(_cpu_s(p.pid) > 0.05 for p in processes):
            return
        time.sleep(0.02)


def _cpu_s(pid: int) -> float:
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
