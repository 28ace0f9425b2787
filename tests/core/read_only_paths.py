"""Making a file or folder really read-only in a test, for root as well.

Root ignores mode bits, so `chmod 444` stops nobody there. For root the
immutable attribute (`chattr +i`) is used instead: the kernel refuses every
write, rename and new file, to root too, and `os.access` says so. A normal user
gets `chmod`. Either way the helper first proves that a write really fails.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """`path` (a file or a folder) read-only for this process and its children while the block runs."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: nothing here makes a file read-only for root")
        made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"running as root on a file system without the immutable attribute ({made.stderr.strip()})")
        undo = ["chattr", "-i", str(path)]
    else:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        undo = None
    try:
        _prove_read_only(path)
        yield path
    finally:
        if undo:
            subprocess.run(undo, check=True)
        else:
            path.chmod(mode)


def _prove_read_only(path: Path) -> None:
    probe = path / "probe" if path.is_dir() else path
    flags = os.O_WRONLY | os.O_CREAT if path.is_dir() else os.O_WRONLY | os.O_APPEND
    try:
        os.close(os.open(probe, flags))
    except OSError:
        return
    if path.is_dir():
        probe.unlink()
    raise AssertionError(f"{path} is still writable: the test could not make it read-only")
