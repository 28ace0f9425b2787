"""The history on a full disk or locked by another process's transaction: real SQLite files, real processes, real file systems.

A full disk is said as such with the space left, never as damage nor as "Close other Device Lab
windows"; another process's lock neither holds up opening the history nor costs a run: the
recorder keeps what it could not write and writes it once the lock is gone.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.config import RunConfig
from core.history import database, recorder
from core.history.recorder import HistoryRecorder
from core.history.store import RunStore
from core.results import RunResult, RunStatus, StepRecord
from tests.core.history.small_disk import FILL, on_small_disk, python
from tests.core.history.test_store import make_result

CONFIG = RunConfig(model="mlp", steps=300, batch_size=16)

HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()  # until told (or the test ends)
conn.execute("COMMIT")
print("released", flush=True)
"""


class LockHolder:
    """Another process holding an exclusive transaction on the history until `release()`."""

    def __init__(self, path: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        assert self.stdout.readline().strip() == "locked"

    def release(self) -> None:
        self.stdin.write("\n")
        self.stdin.flush()
        assert self.stdout.readline().strip() == "released"
        self.process.wait(30)

    def end(self) -> None:
        self.process.kill()
        self.process.wait(30)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    path = tmp_path / "history.sqlite3"
    with RunStore.open(path) as store:
        store.save(make_result(steps=20))
    return path


def records(first: int, count: int) -> list[StepRecord]:
    return [StepRecord(i, 1.0 / i, 0.01, warmup=i == 1) for i in range(first, first + count)]


def test_a_locked_history_opens_at_once_and_the_run_is_recorded_once_the_lock_goes(history: Path) -> None:
    holder = LockHolder(history)
    try:
        started = time.monotonic()
        store = RunStore.open(history)  # was: 10 s waiting in migrate, then "database is locked"
        opened_in = time.monotonic() - started
        recording = HistoryRecorder(store, CONFIG, label="locked out", flush_interval_s=0)
        assert recording.begin() is None and recording.locked_out and not recording.error
        recording.on_step_records(records(1, 10))
        recording.on_step_records(records(11, 10))
        assert time.monotonic() - started < 5, "the training thread is never held up for long"
        holder.release()
        recording.on_step_records(records(21, 5))  # the next flush begins the run and appends every step kept meanwhile
        run_id = recording.finish(RunResult(status=RunStatus.STOPPED, config=CONFIG.to_dict(), steps_done=25))
    finally:
        holder.end()
    assert opened_in < 3
    assert run_id is not None and recording.error == "" and recording.locked_out == ""
    (summary,) = [run for run in store.list_runs() if run.id == run_id]
    assert (summary.label, summary.status, summary.steps) == ("locked out", RunStatus.STOPPED, 25)
    assert len(store.load(run_id).losses) == 25
    store.close()


def test_a_lock_held_past_the_run_s_end_loses_nothing_but_the_record_and_says_why(history: Path, monkeypatch) -> None:
    monkeypatch.setattr(recorder, "FINISH_WAIT_S", 1.0)
    holder = LockHolder(history)
    try:
        with RunStore.open(history) as store:
            recording = HistoryRecorder(store, CONFIG, flush_interval_s=0)
            recording.begin()
            recording.on_step_records(records(1, 5))
            started = time.monotonic()
            assert recording.finish(make_result(steps=5)) is None
            waited = time.monotonic() - started
    finally:
        holder.end()
    assert 0.9 <= waited < 5
    assert recording.run_id is None and "stayed locked" in recording.error and "This run is not saved" in recording.error
    with RunStore.open(history) as store:
        assert [run.steps for run in store.list_runs()] == [20]


def test_a_lock_that_comes_while_the_run_trains_delays_its_steps_never_drops_them(history: Path) -> None:
    with RunStore.open(history) as store:
        recording = HistoryRecorder(store, CONFIG, flush_interval_s=0)
        run_id = recording.begin()
        assert run_id is not None
        recording.on_step_records(records(1, 3))
        holder = LockHolder(history)
        try:
            recording.on_step_records(records(4, 7))
            assert recording.locked_out and recording.error == ""
            assert next(run.steps for run in store.list_runs() if run.id == run_id) == 3
            holder.release()
            recording.on_step_records(records(11, 2))
        finally:
            holder.end()
        assert next(run.steps for run in store.list_runs() if run.id == run_id) == 12
        assert recording.finish(RunResult(status=RunStatus.FAILED, config=CONFIG.to_dict(), steps_done=12)) == run_id
        assert len(store.load(run_id).losses) == 12


def test_sqlite_full_is_said_as_a_full_disk_with_the_space_left(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA max_page_count = 1")  # SQLite can not grow the file past one page: SQLITE_FULL
    with pytest.raises(sqlite3.OperationalError) as full:
        database.migrate(conn)
    conn.close()
    assert database.is_full(full.value, path) and not database.is_busy(full.value) and not database.is_damage(full.value)
    words = database.problem(full.value, path)
    assert "full" in words and "free" in words and "Close other Device Lab windows" not in words
    assert database.advice(full.value, path) == database.FULL_ADVICE


@pytest.mark.timeout(120)
def test_a_new_history_that_does_not_fit_is_refused_in_one_line_and_leaves_no_file() -> None:
    opened = python(
        "import json, sys\n"
        "from core.history.store import RunStore, StoreError\n"
        "for attempt in range(2):\n"
        "    try:\n"
        "        RunStore.open()\n"
        "        print(json.dumps({'opened': True}))\n"
        "    except StoreError as exc:\n"
        "        print(json.dumps({'error': str(exc)}))\n"
    )
    listing = python("import os, sys; print(sorted(os.listdir(sys.argv[1] + '/data')))", "{disk}")
    first, left = on_small_disk("64k", [opened, listing])

    assert first.code == 0 and "Traceback" not in first.stderr, first.stderr[-2000:]
    errors = [line for line in first.stdout.splitlines() if '"error"' in line]
    assert len(errors) == 2, first.stdout  # the second attempt meets the same, not a half-made file
    assert "is full (" in errors[0] and " free)" in errors[0] and "Close other Device Lab windows" not in errors[0]
    assert left.stdout.strip() == "[]", "the history that did not fit was removed"


SAVE = python(
    "import json\n"
    "from core.history.store import RunStore, StoreError\n"
    "from tests.core.history.test_store import make_result\n"
    "with RunStore.open() as store:\n"
    "    said = {'read_only': store.read_only, 'notice': store.notice}\n"
    "    try:\n"
    "        store.save(make_result(steps=20))\n"
    "    except StoreError as exc:\n"
    "        said['error'] = str(exc)\n"
    "    print(json.dumps({**said, 'runs': len(store.list_runs())}))\n"
)


@pytest.mark.timeout(120)
def test_a_history_on_a_disk_that_filled_up_is_read_and_written_again_once_space_is_freed() -> None:
    free = python("import os, sys; os.remove(sys.argv[1] + '/filler')", "{disk}")
    steps = on_small_disk("1m", [SAVE, FILL, SAVE, free, SAVE])
    assert all(step.code == 0 and "Traceback" not in step.stderr for step in steps), [s.stderr[-1000:] for s in steps]
    made, full, freed = (json.loads(step.stdout) for step in (steps[0], steps[2], steps[4]))

    assert (made["runs"], made["read_only"], "error" in made) == (1, "", False)
    assert full["runs"] == 1, "its runs are still listed"
    assert "is full (" in full["read_only"] and " free)" in full["read_only"] and "damaged" not in full["notice"]
    assert "can only be read" in full["error"] and full["read_only"] in full["error"]  # refused, saying why
    assert (freed["runs"], freed["read_only"], "error" in freed) == (2, "", False), "written again once space is freed"
