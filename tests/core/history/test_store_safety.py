"""The history under stress: read-only files and folders, runs cut off by a killed process, damage told from the rest.

Real SQLite files, real processes; read-only means read-only for root as well (tests.core.read_only_paths).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunConfig
from core.history.database import is_damage
from core.history.store import RunStore, StoreError
from core.results import RunResult, RunStatus, StepRecord
from core.training.metrics import summarize
from tests.core.history.test_store import make_result
from tests.core.read_only_paths import read_only

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    """A closed history with two finished runs and one cut off."""
    path = tmp_path / "data" / "history.sqlite3"
    with RunStore.open(path) as store:
        store.save(make_result(steps=40, seed=1))
        store.save(make_result(steps=30, seed=2, status=RunStatus.STOPPED, message="Stopped by the user after 30 of 100 steps."))
    return path


def files_beside(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir()}


def test_read_only_history_is_read_never_moved_and_left_byte_for_byte(filled: Path, tmp_path: Path) -> None:
    before = filled.read_bytes()
    with read_only(filled):
        with RunStore.open(filled) as store:
            assert store.read_only == "the file is read-only"
            assert "can only be read" in store.notice and store.recovered_from is None
            runs = store.list_runs()
            assert [r.steps for r in runs] == [30, 40]
            assert store.load(runs[1].id) == make_result(steps=40, seed=1)
            store.export_json([r.id for r in runs], tmp_path / "out.json")
            with pytest.raises(StoreError, match="can only be read"):
                store.save(make_result(steps=5))
            with pytest.raises(StoreError, match="can only be read"):
                store.begin_run(RunConfig())
            with pytest.raises(StoreError, match="can only be read"):
                store.delete([runs[0].id])
        assert filled.read_bytes() == before
        assert not any(".corrupt-" in name for name in files_beside(filled))
    assert len(json.loads((tmp_path / "out.json").read_text())["runs"]) == 2


def test_history_in_a_read_only_folder_is_read_as_it_is(filled: Path) -> None:
    before = filled.read_bytes()
    with read_only(filled.parent):
        with RunStore.open(filled) as store:
            assert "is not writable" in store.read_only
            assert len(store.list_runs()) == 2
            with pytest.raises(StoreError):
                store.save(make_result(steps=5))
    assert filled.read_bytes() == before


def test_no_history_can_be_made_in_an_unwritable_folder(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    with read_only(folder), pytest.raises(StoreError, match="Can not create the run history"):
        RunStore.open(folder / "history.sqlite3")
    assert list(folder.iterdir()) == []


def test_a_history_folder_that_is_a_file_is_named_as_such(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match=f"{blocker} is a file, not a folder"):
        RunStore.open(blocker / "history.sqlite3")
    assert blocker.read_text() == "not a folder"


def test_only_damage_counts_as_damage(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError) as damaged:
        sqlite3.connect(garbage).execute("PRAGMA quick_check")
    assert is_damage(damaged.value)
    sound = tmp_path / "sound.sqlite3"
    sqlite3.connect(sound).execute("CREATE TABLE t (x)").connection.close()
    reader = sqlite3.connect(f"{sound.as_uri()}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as refused:
        reader.execute("INSERT INTO t VALUES (1)")
    assert "readonly" in str(refused.value) and not is_damage(refused.value)


def steps(count: int, warmup: int = 3) -> list[StepRecord]:
    return [StepRecord(i, 2.0 / i, 0.5 if i <= warmup else 0.01 + (i % 7) * 1e-3, warmup=i <= warmup) for i in range(1, count + 1)]


def test_cut_off_run_gets_the_figures_of_the_steps_it_kept(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    records = steps(250)
    config = RunConfig(model="mlp", steps=1000, batch_size=32)
    with RunStore.open(path) as live:
        run_id = live.begin_run(config)
        live.append_steps(run_id, records[:100])
        live.append_steps(run_id, records[100:])
    with RunStore.open(path) as reopened:
        summary = reopened.list_runs()[0]
        loaded = reopened.load(run_id)
    expected = summarize([r.step_time_s for r in records], 3, 32)
    assert summary.status == RunStatus.INTERRUPTED and summary.steps == 250
    assert summary.figures["samples_per_s"] == pytest.approx(expected.samples_per_s)
    assert summary.figures["step_time_median_ms"] == pytest.approx(expected.median_ms)
    assert summary.figures["warmup_s"] == pytest.approx(1.5)
    assert (loaded.status, loaded.steps_done, loaded.warmup_steps) == (RunStatus.INTERRUPTED, 250, 3)
    assert loaded.samples_per_s == pytest.approx(expected.samples_per_s) and loaded.step_time_p95_ms == pytest.approx(expected.p95_ms)
    assert loaded.losses == tuple(r.loss for r in records) and "250" in loaded.message


RECORDING_PROCESS = """
import sys, time
from core.config import RunConfig
from core.history.store import RunStore
from core.results import StepRecord
store = RunStore.open(sys.argv[1])
run_id = store.begin_run(RunConfig(model="mlp", steps=1000, batch_size=16))
store.append_steps(run_id, [StepRecord(i, 1.0 / i, 0.25 if i == 1 else 0.02, warmup=i == 1) for i in range(1, 41)])
print(run_id, flush=True)
time.sleep(600)
"""


def test_a_run_of_a_live_process_stays_running_until_that_process_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    recording = subprocess.Popen([sys.executable, "-c", RECORDING_PROCESS, str(path)], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        run_id = int(recording.stdout.readline())
        with RunStore.open(path) as window:
            assert window.list_runs()[0].status == RunStatus.RUNNING  # another live process: left alone
            recording.send_signal(signal.SIGKILL)
            recording.wait(30)
            cut_off = window.list_runs()[0]  # listing again notices the process is gone
        assert (cut_off.id, cut_off.status, cut_off.steps) == (run_id, RunStatus.INTERRUPTED, 40)
        assert cut_off.figures["samples_per_s"] == pytest.approx(16 / 0.02)
        assert cut_off.figures["warmup_s"] == pytest.approx(0.25)
    finally:
        recording.kill()
        recording.wait(30)


def test_a_finished_run_is_never_marked_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    with RunStore.open(path) as store:
        run_id = store.begin_run(RunConfig())
        store.append_steps(run_id, steps(10))
        store.finish_run(run_id, RunResult(status=RunStatus.COMPLETED, config=RunConfig().to_dict(), steps_done=10))
    with RunStore.open(path) as reopened:
        assert reopened.list_runs()[0].status == RunStatus.COMPLETED
