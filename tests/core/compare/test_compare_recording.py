"""Comparisons recorded as they run: each target begun before it trains, its steps appended, finished with its row."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from core.compare.runner import run_comparison, scaling_sweep
from core.compare.targets import parse_targets
from core.config import RunConfig
from core.history.store import RunStore
from core.jobs import JobListener, JobOptions
from core.results import RunStatus
from core.training.hooks import RunHook

pytestmark = pytest.mark.slow


@pytest.fixture
def store(tmp_path: Path):
    with RunStore.open(tmp_path / "history.sqlite3") as opened:
        yield opened


class StoreWatcher(RunHook):
    """What the history holds while a target trains: the run's status at its start, and its stored steps before each call."""

    def __init__(self, store: RunStore):
        self.store = store
        self.at_start: list[tuple[RunStatus, int]] = []
        self.stored_steps: list[int] = []
        self.run_id: int | None = None

    def on_run_start(self, context) -> None:
        latest = self.store.list_runs()[0]
        self.run_id = latest.id
        self.at_start.append((latest.status, latest.steps))

    def on_call_begin(self, first_step: int, steps: int) -> None:
        self.stored_steps.append(next(run.steps for run in self.store.list_runs() if run.id == self.run_id))


def test_each_target_is_recorded_while_it_trains_and_failed_targets_too(two_cpus, store: RunStore) -> None:
    watcher = StoreWatcher(store)
    base = RunConfig(model="mlp", dataset="digits", steps=6, batch_size=32)
    comparison = run_comparison(
        base,
        parse_targets(f"{two_cpus[0]}; CPU:9; mirrored:CPU:0,GPU:0"),
        store=store,
        options=JobOptions(group="comparison", hooks=(watcher,)),
    )
    assert [row.status for row in comparison.rows] == [RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.FAILED]
    assert watcher.at_start == [(RunStatus.RUNNING, 0)]  # begun before the engine started
    assert watcher.stored_steps[0] == 0 and watcher.stored_steps[1] == 1  # the first call's step is stored before the next call
    stored = {r.label.split(" · ")[2]: r for r in store.list_runs()}
    assert stored[two_cpus[0]].status == RunStatus.COMPLETED and stored[two_cpus[0]].steps == 6
    assert stored[two_cpus[0]].label == f"MLP · digits · {two_cpus[0]} · batch 32 · compare"
    assert stored[two_cpus[0]].figures["samples_per_s"] == comparison.rows[0].samples_per_s
    assert stored["CPU:9"].status == RunStatus.FAILED and "CPU:9" in stored["CPU:9"].message
    assert stored["CPU:9"].devices == ("CPU:9",)
    mixed = stored["mirrored:CPU:0,GPU:0"]
    assert mixed.status == RunStatus.FAILED and "devices of one kind" in mixed.message
    assert {r.group for r in store.list_runs()} == {"comparison"}


def test_a_stopped_comparison_records_the_stopped_run_and_not_the_skipped_ones(two_cpus, store: RunStore) -> None:
    stop = threading.Event()

    class StopAtFirstSetUp(JobListener):
        def on_run_start(self, context) -> None:
            stop.set()  # the first target is set up; the second, set up only after it, is never started

    comparison = run_comparison(
        RunConfig(model="mlp", dataset="digits", steps=400, batch_size=32),
        parse_targets(f"{two_cpus[0]}; {two_cpus[1]}"),
        store=store,
        options=JobOptions(listener=StopAtFirstSetUp()),
        stop_event=stop,
    )
    assert [row.status for row in comparison.rows] == [RunStatus.STOPPED, RunStatus.SKIPPED]
    (stored,) = store.list_runs()  # a skipped target never ran: it is a row of the comparison, not a run
    assert stored.status == RunStatus.STOPPED and stored.steps == comparison.rows[0].result.steps_done


def test_a_sweep_records_each_count(two_cpus, store: RunStore) -> None:
    comparison = scaling_sweep(RunConfig(model="mlp", dataset="digits", steps=3, batch_size=32), "CPU", [1, 2], store=store)
    assert [r.status for r in comparison.rows] == [RunStatus.COMPLETED] * 2
    assert sorted((r.strategy, r.replicas, r.steps) for r in store.list_runs()) == [("mirrored", 2, 3), ("one-device", 1, 3)]


def test_without_a_store_nothing_is_recorded(two_cpus, store: RunStore) -> None:
    comparison = run_comparison(RunConfig(model="mlp", dataset="digits", steps=2, batch_size=32), parse_targets(two_cpus[0]))
    assert comparison.rows[0].status == RunStatus.COMPLETED and store.list_runs() == []
