"""A job's history in its worker thread: recorded as it goes, and a history that cannot be opened explained, not raised."""

from __future__ import annotations

import pytest

from core.config import RunConfig
from core.history.recorder import HistoryRecorder
from core.history.store import RunStore
from core.results import RunResult, RunStatus, StepRecord
from gui.controllers.history import JobHistory

CONFIG = RunConfig(model="mlp", dataset="digits", steps=3)


def test_a_history_that_cannot_be_opened_is_explained_not_raised(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the history folder should be")
    monkeypatch.setenv("DEVICE_LAB_DATA_DIR", str(blocker / "data"))
    with JobHistory() as history:
        assert not history.is_open and history.store is None
    assert history.error.startswith("The run was not saved to the history:") and str(blocker) in history.error


def test_a_run_is_begun_appended_and_finished_through_the_job_history(isolated_folders):
    with JobHistory() as history:
        recorder = HistoryRecorder(history.store, CONFIG, "label", group="g")
        run_id = recorder.begin()
        recorder.on_step_records([StepRecord(1, 2.0, 0.5, True), StepRecord(2, 1.5, 0.1)])
        recorder.flush()
        with RunStore.open() as reader:
            [running] = reader.list_runs()
        assert (running.id, running.status, running.steps, running.label, running.group) == (run_id, RunStatus.RUNNING, 2, "label", "g")
        result = RunResult(status=RunStatus.COMPLETED, config=CONFIG.to_dict(), losses=(2.0, 1.5, 1.0), step_times_s=(0.5, 0.1, 0.1))
        assert recorder.finish(result) == run_id and recorder.error == ""
    with RunStore.open() as store:
        [stored] = store.list_runs()
        assert stored.status == RunStatus.COMPLETED and store.load(run_id).losses == pytest.approx((2.0, 1.5, 1.0))
