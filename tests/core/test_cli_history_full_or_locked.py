"""`run` and `history` with the history on a full disk or locked by another process: real processes, file systems and SQLite files.

The run always trains and prints its result (exit code as for any completed run); a history it
cannot write is said in one line (a full disk with the space left, or the lock), never a traceback;
a lock that goes while the run trains costs nothing: the run is recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.history.store import RunStore
from tests.core.history.small_disk import FILL, cli, on_small_disk
from tests.core.history.test_store import make_result
from tests.core.history.test_store_full_or_locked import SAVE, LockHolder
from tests.core.test_cli_crash_safety import Running, history
from tests.core.test_cli_crash_safety import cli as run_cli

STEPS = 6000
RUN = ("run", "--model", "mlp", "--data", "digits", "--no-verdict", "--json")


def assert_trained_and_said_once(step, *said: str) -> str:
    """The run completed, printed its result, exit code 0, and said why it is not saved in one warning line (returned)."""
    assert step.code == 0 and "Traceback" not in step.stderr, step.stderr[-2000:]
    assert json.loads(step.stdout)["status"] == "completed"
    (warning,) = [line for line in step.warnings() if "history" in line]
    assert "not saved" in warning and all(words in warning for words in said), warning
    assert "Close other Device Lab windows" not in warning and "disk I/O error" not in warning
    return warning


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_new_history_on_a_full_disk_costs_no_run_and_no_later_command() -> None:
    first, listed, second = on_small_disk("64k", [cli(*RUN, "--steps", "5"), cli("history", "--json"), cli(*RUN, "--steps", "5")])

    assert_trained_and_said_once(first, "is full (", " free)")
    assert listed.code == 0 and json.loads(listed.stdout) == [] and "Traceback" not in listed.stderr, listed.stderr[-2000:]
    assert any("is full (" in line for line in listed.warnings())
    assert_trained_and_said_once(second, "is full (", " free)")


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_history_on_a_disk_that_filled_up_is_listed_and_the_run_still_prints() -> None:
    _, _, run, listed = on_small_disk("1m", [SAVE, FILL, cli(*RUN, "--steps", "5"), cli("history", "--json")])

    assert_trained_and_said_once(run, "is full (", " free)")
    assert listed.code == 0 and [r["steps"] for r in json.loads(listed.stdout)] == [20], listed.stderr[-2000:]
    (notice,) = listed.warnings()
    assert "can only be read" in notice and "is full (" in notice and " free)" in notice


@pytest.fixture
def cli_env(tmp_path):
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    with RunStore.open(Path(env["DEVICE_LAB_DATA_DIR"]) / "history.sqlite3") as store:
        store.save(make_result(steps=20))
    return env


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_history_locked_through_the_whole_run_costs_only_the_record(cli_env) -> None:
    holder = LockHolder(Path(cli_env["DEVICE_LAB_DATA_DIR"]) / "history.sqlite3")
    try:
        done = run_cli([*RUN, "--steps", "5"], cli_env)
    finally:
        holder.end()
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert json.loads(done.stdout)["status"] == "completed"
    (warning,) = [line for line in done.stderr.splitlines() if line.startswith("warning:") and "history" in line]
    assert "locked" in warning and "not saved" in warning
    assert [run["steps"] for run in history(cli_env)] == [20]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_whose_history_lock_goes_while_it_trains_is_recorded_whole(cli_env) -> None:
    holder = LockHolder(Path(cli_env["DEVICE_LAB_DATA_DIR"]) / "history.sqlite3")
    run = Running([*RUN, "--steps", str(STEPS)], cli_env)
    try:
        run.wait_for_step(STEPS // 5)  # flushes (about one a second, the first at once) have met the lock
        holder.release()
    finally:
        holder.end()
        code, stdout, stderr = run.finish()
    result = json.loads(stdout)
    assert code == 0 and result["status"] == "completed" and "Traceback" not in stderr, stderr[-2000:]
    assert not [line for line in stderr.splitlines() if line.startswith("warning:") and "history" in line], stderr[-2000:]
    stored = {run["steps"]: run for run in history(cli_env)}
    assert sorted(stored) == [20, STEPS] and stored[STEPS]["status"] == "completed"
    assert f"saved as run {stored[STEPS]['id']} in the history" in stderr
