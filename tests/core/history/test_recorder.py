"""HistoryRecorder: a run recorded as it trains, on real SQLite files; a history that cannot be written never raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import RunConfig
from core.history.recorder import HistoryRecorder
from core.history.store import RunStore
from core.results import RunResult, RunStatus, StepRecord
from tests.core.history.test_store import make_result
from tests.core.read_only_paths import read_only

CONFIG = RunConfig(model="mlp", steps=300, batch_size=16)


def records(first: int, count: int) -> list[StepRecord]:
    return [StepRecord(i, 1.0 / i, 0.01, warmup=i == 1) for i in range(first, first + count)]


@pytest.fixture
def store(tmp_path: Path):
    with RunStore.open(tmp_path / "history.sqlite3") as opened:
        yield opened


def stored_steps(store: RunStore, run_id: int) -> int:
    return next(r.steps for r in store.list_runs() if r.id == run_id)


def test_steps_are_appended_at_once_then_at_most_once_per_interval(store: RunStore) -> None:
    recorder = HistoryRecorder(store, CONFIG, label="live", flush_interval_s=3600)
    run_id = recorder.begin()
    assert store.list_runs()[0].status == RunStatus.RUNNING and store.list_runs()[0].label == "live"
    recorder.on_step_records(records(1, 1))  # the first steps are written at once
    recorder.on_step_records(records(2, 50))  # within the interval: kept back
    assert stored_steps(store, run_id) == 1
    recorder.flush()
    assert stored_steps(store, run_id) == 51


def test_every_call_writes_when_the_interval_is_zero(store: RunStore) -> None:
    recorder = HistoryRecorder(store, CONFIG, flush_interval_s=0)
    run_id = recorder.begin()
    for first in range(1, 100, 10):
        recorder.on_step_records(records(first, 10))
        assert stored_steps(store, run_id) == first + 9


def test_finish_stores_the_result_once(store: RunStore) -> None:
    recorder = HistoryRecorder(store, CONFIG)
    run_id = recorder.begin()
    recorder.on_step_records(records(1, 5))
    result = make_result(steps=300)
    assert recorder.finish(result) == run_id
    with pytest.raises(RuntimeError, match="already finished"):  # one place finishes a run (core.jobs), once
        recorder.finish(make_result(steps=7, seed=3))
    assert store.load(run_id) == result and len(store.list_runs()) == 1


def test_a_run_that_never_began_is_saved_in_one_go(store: RunStore) -> None:
    skipped = RunResult(status=RunStatus.SKIPPED, config=CONFIG.to_dict(), message="Not run: the comparison was stopped first.")
    recorder = HistoryRecorder(store, CONFIG, label="CPU:1")
    run_id = recorder.finish(skipped)
    (summary,) = store.list_runs()
    assert (summary.id, summary.status, summary.label, summary.message) == (run_id, RunStatus.SKIPPED, "CPU:1", skipped.message)


def test_a_failure_without_a_series_keeps_every_appended_step(store: RunStore) -> None:
    recorder = HistoryRecorder(store, CONFIG, flush_interval_s=3600)
    run_id = recorder.begin()
    recorder.on_step_records(records(1, 1))
    recorder.on_step_records(records(2, 9))  # not yet written when the run fails
    recorder.finish(RunResult(status=RunStatus.FAILED, config=CONFIG.to_dict(), message="boom", steps_done=10))
    assert len(store.load(run_id).losses) == 10


def test_discard_removes_a_run_refused_as_it_started(store: RunStore) -> None:
    recorder = HistoryRecorder(store, CONFIG)
    recorder.begin()
    recorder.discard()
    with pytest.raises(RuntimeError, match="already finished"):
        recorder.finish(make_result(steps=3))
    assert store.list_runs() == []


def test_a_read_only_history_never_raises_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    with RunStore.open(path) as first:
        first.save(make_result(steps=20))
    before = path.read_bytes()
    with read_only(path), RunStore.open(path) as store:
        recorder = HistoryRecorder(store, CONFIG)
        assert recorder.begin() is None
        recorder.on_step_records(records(1, 10))
        assert recorder.finish(make_result(steps=10)) is None
        assert store.read_only and store.read_only in recorder.error and "not saved" in recorder.error  # why, and what it costs
    assert path.read_bytes() == before


def test_a_run_deleted_while_it_trains_stops_the_recording_with_a_reason(store: RunStore) -> None:
    recorder = HistoryRecorder(store, CONFIG, flush_interval_s=0)
    run_id = recorder.begin()
    store.delete([run_id])
    recorder.on_step_records(records(1, 3))
    assert recorder.finish(make_result(steps=3)) is None
    assert f"no longer has run {run_id}" in recorder.error and store.list_runs() == []


def test_without_a_store_the_reason_is_reported() -> None:
    reason = "The run history could not be opened: disk on fire."
    recorder = HistoryRecorder(None, CONFIG, error=reason)
    assert recorder.begin() is None and recorder.finish(make_result(steps=1)) is None
    assert recorder.error == reason
    with pytest.raises(ValueError):
        HistoryRecorder(None, CONFIG)
