"""Comparisons recorded as they run: each target begun before it trains, its steps appended, finished with its row."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from core.compare.runner import run_comparison, scaling_sweep
from core.compare.targets import parse_targets
from core.config import RunConfig
from core.history.recorder import HistoryRecorder
from core.history.store import RunStore
from core.results import RunStatus
from core.training.callbacks import RunCallback

pytestmark = pytest.mark.slow


@pytest.fixture
def store(tmp_path: Path):
    with RunStore.open(tmp_path / "history.sqlite3") as opened:
        yield opened


class StoreWatcher(RunCallback):
    """What the history holds while a target trains: the run's status at its start, and its stored steps before each call."""

    def __init__(self, store: RunStore):
        self.store = store
        self.at_start: list[tuple[RunStatus, int]] = []
        self.stored_steps: list[int] = []

    def on_run_start(self, context) -> None:
        latest = self.store.list_runs()[0]
        self.at_start.append((latest.status, latest.steps))

    def on_call_begin(self, first_step: int, steps: int) -> None:
        self.stored_steps.append(self.store.list_runs()[0].steps)


def factory(store: RunStore, made: dict[int, RunConfig]):
    def recorder(index: int, config: RunConfig) -> HistoryRecorder:
        made[index] = config
        return HistoryRecorder(store, config, label=f"target {index}", group="comparison", flush_interval_s=0)

    return recorder


def test_each_target_is_recorded_while_it_trains_and_failed_targets_too(two_cpus, store: RunStore) -> None:
    made: dict[int, RunConfig] = {}
    watcher = StoreWatcher(store)
    comparison = run_comparison(
        RunConfig(model="mlp", dataset="digits", steps=6, batch_size=32),
        parse_targets(f"{two_cpus[0]}; CPU:9; mirrored:CPU:0,GPU:0"),
        callbacks=[watcher],
        recorders=factory(store, made),
    )
    assert [row.status for row in comparison.rows] == [RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.FAILED]
    assert watcher.at_start == [(RunStatus.RUNNING, 0)]  # begun before the engine started
    assert watcher.stored_steps == [0, 1, 2, 3, 4, 5]  # every step done is stored before the next call
    stored = {r.label: r for r in store.list_runs()}
    assert stored["target 0"].status == RunStatus.COMPLETED and stored["target 0"].steps == 6
    assert stored["target 0"].figures["samples_per_s"] == comparison.rows[0].samples_per_s
    assert stored["target 1"].status == RunStatus.FAILED and "CPU:9" in stored["target 1"].message
    assert stored["target 2"].status == RunStatus.FAILED and "devices of one kind" in stored["target 2"].message
    assert made[0].devices == (two_cpus[0],) and made[1].devices == ("CPU:9",)
    assert made[2] == RunConfig(model="mlp", dataset="digits", steps=6, batch_size=32)  # its own job is invalid: the base
    assert {r.group for r in store.list_runs()} == {"comparison"}


def test_a_stopped_comparison_records_the_stopped_run_and_not_the_skipped_ones(two_cpus, store: RunStore) -> None:
    stop = threading.Event()
    comparison = run_comparison(
        RunConfig(model="mlp", dataset="digits", steps=400, batch_size=32),
        parse_targets(f"{two_cpus[0]}; {two_cpus[1]}"),
        on_steps=lambda index, records: stop.set() if records[-1].step >= 3 else None,
        stop_event=stop,
        recorders=factory(store, {}),
    )
    stored = {r.label: r for r in store.list_runs()}
    assert [row.status for row in comparison.rows] == [RunStatus.STOPPED, RunStatus.SKIPPED]
    assert stored["target 0"].status == RunStatus.STOPPED and stored["target 0"].steps == comparison.rows[0].result.steps_done
    assert "target 1" not in stored, "a skipped target never ran: it is a row of the comparison, not a run"


def test_a_sweep_passes_the_recorders_on(two_cpus, store: RunStore) -> None:
    comparison = scaling_sweep(
        RunConfig(model="mlp", dataset="digits", steps=3, batch_size=32), "CPU", [1, 2], recorders=factory(store, {})
    )
    assert [r.status for r in comparison.rows] == [RunStatus.COMPLETED] * 2
    assert sorted((r.strategy, r.replicas, r.steps) for r in store.list_runs()) == [("mirrored", 2, 3), ("one-device", 1, 3)]


def test_a_factory_may_give_no_recorder(two_cpus, store: RunStore) -> None:
    comparison = run_comparison(
        RunConfig(model="mlp", dataset="digits", steps=2, batch_size=32), parse_targets(two_cpus[0]), recorders=lambda index, config: None
    )
    assert comparison.rows[0].status == RunStatus.COMPLETED and store.list_runs() == []
