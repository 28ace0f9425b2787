"""Model, custom-objects and data paths that are not regular files, or whose names are too long: refused at once.

`run --model zero.keras` (a link to /dev/zero), a named pipe or a link to /dev/urandom used to hang with no output
(the file was hashed in the main process before any time limit); a name over 255 bytes gave an OSError traceback;
a named pipe given as --data read "no such data file". Each is now one line naming the path and what it is, exit
code 2, before anything trains. Real `main.py` processes on real files in tmp_path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core.files import too_long

ROOT = Path(__file__).resolve().parents[2]
NO_TRAINING_S = 5.0
HANG_LIMIT_S = 30  # far past a refusal: a command that gets here is waiting on the file
PY_MODEL = """
    import keras

    def build_model():
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
"""


def main_py(args: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    began = time.monotonic()
    done = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_LIMIT_S)
    return done, time.monotonic() - began


def refusal(done: subprocess.CompletedProcess) -> str:
    """The one error line of a command refused as bad input (exit code 2, no traceback)."""
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = [line for line in done.stderr.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def py_model(tmp_path: Path) -> Path:
    path = tmp_path / "my_model.py"
    path.write_text(textwrap.dedent(PY_MODEL))
    return path


@pytest.mark.parametrize(
    ("name", "make", "words"),
    [
        ("zero.keras", lambda path: path.symlink_to("/dev/zero"), "a character device"),
        ("random.h5", lambda path: path.symlink_to("/dev/urandom"), "a character device"),
        ("pipe.keras", os.mkfifo, "a named pipe (FIFO)"),
    ],
    ids=["link-to-dev-zero", "link-to-dev-urandom", "fifo"],
)
def test_a_model_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, name: str, make, words: str) -> None:
    path = tmp_path / name
    make(path)
    done, seconds = main_py(["run", "--model", str(path), "--steps", "2"], tmp_path)
    line = refusal(done)
    assert str(path) in line and f"it is {words}, not a regular file" in line and seconds < NO_TRAINING_S


def test_a_model_name_over_255_bytes_is_said_in_words(tmp_path: Path) -> None:
    path = tmp_path / ("m" * 300 + ".keras")
    done, seconds = main_py(["run", "--model", str(path), "--steps", "2"], tmp_path)
    line = refusal(done)
    words = too_long(path)  # the name's length against the limit, in words
    assert words and words in line and "shorter path" in line and seconds < NO_TRAINING_S


@pytest.mark.parametrize("kind", ["long-name", "fifo"])
def test_a_custom_objects_file_that_cannot_be_read_is_refused_at_once(tmp_path: Path, py_model: Path, kind: str) -> None:
    layers = tmp_path / ("c" * 300 + ".py") if kind == "long-name" else tmp_path / "layers.py"
    if kind == "fifo":
        os.mkfifo(layers)
    done, seconds = main_py(["run", "--model", str(py_model), "--trust", "--custom-objects", str(layers), "--steps", "2"], tmp_path)
    line = refusal(done)
    expected = too_long(layers) if kind == "long-name" else "it is a named pipe (FIFO), not a regular file"
    assert expected and expected in line and seconds < NO_TRAINING_S


@pytest.mark.slow
def test_data_that_is_a_named_pipe_is_said_to_be_one(tmp_path: Path, py_model: Path) -> None:
    data = tmp_path / "data.npz"
    os.mkfifo(data)
    done, _ = main_py(["run", "--model", str(py_model), "--trust", "--data", str(data), "--steps", "2"], tmp_path)
    line = refusal(done)  # said by the child that describes the model (it imports Keras): seconds, not a hang
    assert str(data) in line and "it is a named pipe (FIFO), not a regular file" in line and "no such data file" not in line
