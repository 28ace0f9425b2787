"""Which process is recording a running run, so another process never takes a live run for a crashed one.

A run begun in the history carries its owner, "<pid>@<process start time>": the
pid alone could be reused by a later process, the pair can not. The window,
`main.py history` and a CLI run may have the same history open at once; each
marks as interrupted only the runs whose owner has ended.
"""

from __future__ import annotations

import functools
import os

import psutil

_TOLERANCE_S = 0.01


def this_process() -> str:
    """The owner tag of this process."""
    return _tag(os.getpid())


def is_running(owner: str) -> bool:
    """True while the process that `owner` names is still alive (False for "" or a malformed tag)."""
    pid_text, _, started_text = owner.partition("@")
    try:
        pid, started = int(pid_text), float(started_text)
        process = psutil.Process(pid)
        return abs(process.create_time() - started) < _TOLERANCE_S and process.status() != psutil.STATUS_ZOMBIE
    except (ValueError, psutil.Error):
        return False


@functools.cache
def _tag(pid: int) -> str:
    return f"{pid}@{psutil.Process(pid).create_time():.3f}"
