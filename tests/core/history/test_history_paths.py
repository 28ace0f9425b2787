"""A history path that cannot be a history: one line that says what is there and what to do, exit code 2, no traceback.

A history file that is a folder, a link to /dev/zero or a named pipe is refused before SQLite sees it (and left as
it is), and a DEVICE_LAB_DATA_DIR whose name is over 255 bytes is said in words. Real `main.py` processes.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.files import too_long
from core.history.store import FILE_NAME, RunStore, StoreError

ROOT = Path(__file__).resolve().parents[3]
NO_TRAINING_S = 5.0


def main_py(args: list[str], data_dir: Path | str) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data_dir), DEVICE_LAB_LOG_DIR=str(Path(os.environ["DEVICE_LAB_LOG_DIR"])))
    began = time.monotonic()
    done = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - began


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ")
    return line


@pytest.mark.parametrize(
    ("kind", "words"),
    [("folder", "is a folder"), ("link-to-dev-zero", "is a character device"), ("fifo", "is a named pipe (FIFO)")],
)
def test_a_history_file_that_is_no_file_is_refused_in_one_line(tmp_path: Path, kind: str, words: str) -> None:
    history = tmp_path / FILE_NAME
    if kind == "folder":
        history.mkdir()
    elif kind == "fifo":
        os.mkfifo(history)
    else:
        history.symlink_to("/dev/zero")
    before = os.lstat(history)
    for command in (["history"], ["export", "1", "--json", str(tmp_path / "out.json")]):
        line = one_error_line(main_py(command, tmp_path)[0])
        assert str(history) in line and words in line and "not a regular file" in line
        assert "DEVICE_LAB_DATA_DIR" in line and "read-only" not in line and "Close other" not in line
    after = os.lstat(history)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino), "left as it is"
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME], "nothing moved aside, nothing created"
    with pytest.raises(StoreError, match="not a regular file"):
        RunStore.open(history)


def test_a_data_folder_name_over_255_bytes_is_said_in_words(tmp_path: Path) -> None:
    long = tmp_path / ("d" * 300)
    for command in (["history"], ["history", "--json"], ["export", "1", "--csv", str(tmp_path / "runs.csv")]):
        done, seconds = main_py(command, long)
        line = one_error_line(done)
        words = too_long(long)  # the name's length against the limit, in words
        assert words and words in line and "DEVICE_LAB_DATA_DIR" in line and seconds < NO_TRAINING_S
    with pytest.raises(StoreError, match="over the 255"):
        RunStore.open(long / FILE_NAME)
