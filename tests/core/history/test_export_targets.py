"""`main.py export` and the history's exports: what is at the path, what the CSV starts with, and what its header says.

A target that is not a regular file (a named pipe, a link to a device, a folder) is refused in one line with exit
code 2 and left as it is; a symbolic link is written through. A CSV's first line is its column header (its metadata
is the JSON file beside it); the system header's backend is each run's own; a run measured in rounds has its rounds
as columns. Real `main.py` processes on a real history in tmp_path.
"""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from core.history.export import metadata_path
from core.history.store import RunStore
from tests.core.history.test_store import make_result

ROOT = Path(__file__).resolve().parents[3]
NO_TRAINING_S = 5.0  # a refusal where no training is asked


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A history with two runs (ids 1 and 2)."""
    folder = tmp_path / "data"
    with RunStore.open(folder / "history.sqlite3") as store:
        store.save(make_result(steps=20, seed=1), label="first")
        store.save(make_result(steps=20, seed=2), label="second")
    return folder


def main_py(args: list[str], data_dir: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data_dir), DEVICE_LAB_LOG_DIR=str(data_dir.parent / "logs"))
    began = time.monotonic()
    done = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - began


@pytest.mark.parametrize("kind", ["fifo", "link-to-a-device", "folder"])
def test_export_refuses_what_is_not_a_regular_file_in_one_line_and_leaves_it(data_dir: Path, tmp_path: Path, kind: str) -> None:
    target = tmp_path / "runs.csv"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    else:
        target.symlink_to("/dev/null")
    before = os.lstat(target)
    done, seconds = main_py(["export", "1", "2", "--csv", str(target)], data_dir)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and str(target) in line and "not a regular file" in line and "Traceback" not in done.stderr
    after = os.lstat(target)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino), "left as it was"
    assert not metadata_path(target).exists() and seconds < NO_TRAINING_S
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_export_writes_through_a_symbolic_link(data_dir: Path, tmp_path: Path) -> None:
    real = tmp_path / "kept" / "runs.csv"
    real.parent.mkdir()
    real.write_text("an older export")
    link = tmp_path / "runs.csv"
    link.symlink_to(real)
    done, _ = main_py(["export", "1", "--csv", str(link)], data_dir)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    with real.open(newline="") as file:
        assert [row["id"] for row in csv.DictReader(file)] == ["1"]


def test_the_csv_starts_with_its_header_and_its_metadata_is_beside_it(data_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "runs.csv"
    done, _ = main_py(["export", "1", "2", "--csv", str(target)], data_dir)
    assert done.returncode == 0, done.stderr
    with target.open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert [(row["id"], row["label"]) for row in rows] == [("1", "first"), ("2", "second")], "csv.DictReader reads it as it is"
    metadata = json.loads(metadata_path(target).read_text())
    assert metadata["runs"] == [1, 2] and metadata["system"]["tensorflow"] == "2.16.1" and metadata["exported_at"]
    assert str(metadata_path(target)) in done.stderr, "the command says where the metadata went"


def test_the_system_header_names_each_runs_own_backend(tmp_path: Path) -> None:
    tensorflow = make_result(seed=1)
    jax = make_result(seed=2)
    jax = replace(jax, config={**jax.config, "backend": "jax"}, environment={**jax.environment, "backend": "jax", "jax": "0.4.30"})
    with RunStore.open(tmp_path / "history.sqlite3") as store:
        ids = [store.save(tensorflow), store.save(jax)]
        store.export_json(ids, tmp_path / "both.json")
        store.export_json(ids[:1], tmp_path / "tensorflow.json")
        store.export_csv(ids[:1], tmp_path / "tensorflow.csv")
    assert json.loads((tmp_path / "both.json").read_text())["system"]["backend"] == ["tensorflow", "jax"]
    assert json.loads((tmp_path / "tensorflow.json").read_text())["system"]["backend"] == "tensorflow"
    assert json.loads(metadata_path(tmp_path / "tensorflow.csv").read_text())["system"]["backend"] == "tensorflow"


def test_a_run_measured_in_rounds_has_its_rounds_as_columns(tmp_path: Path) -> None:
    rounds = {"id": "ab12", "count": 2, "seed": 7, "spans": [[2, 10], [11, 20]], "round_index": [0, 1], "positions": [0, 1]}
    in_rounds, alone = replace(make_result(seed=1), rounds=rounds), make_result(seed=2)
    with RunStore.open(tmp_path / "history.sqlite3") as store:
        ids = [store.save(in_rounds), store.save(alone)]
        store.export_csv(ids, tmp_path / "runs.csv")
    with (tmp_path / "runs.csv").open(newline="") as file:
        first, second = csv.DictReader(file)
    assert (first["rounds_id"], first["rounds_count"], first["rounds_seed"]) == ("ab12", "2", "7")
    assert first["rounds_spans"] == "2, 10; 11, 20" and first["rounds_positions"] == "0; 1"
    assert second["rounds_id"] == "" and second["rounds_count"] == "", "a run alone leaves the rounds columns empty"
