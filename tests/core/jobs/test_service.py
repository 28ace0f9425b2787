"""The recorded-job service: real runs into a real SQLite history, begun before they train, finished once, diagnosed as they end."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from core.config import ConfigError, RunConfig
from core.history.store import RunStore
from core.jobs import JobListener, JobOptions, run_job
from core.results import RunStatus
from core.training.hooks import RunHook

CONFIG = RunConfig(model="mlp", dataset="digits", steps=6, batch_size=32)


@pytest.fixture
def store(tmp_path: Path):
    with RunStore.open(tmp_path / "history.sqlite3") as opened:
        yield opened


class Heard(JobListener):
    """Everything the one progress channel hears, in order."""

    def __init__(self, store: RunStore | None = None):
        self.events: list[str] = []
        self.steps: list[int] = []
        self.store = store
        self.status_at_start = None

    def on_run_start(self, context) -> None:
        self.events.append("start")
        if self.store is not None:
            self.status_at_start = self.store.list_runs()[0].status

    def on_step_records(self, records) -> None:
        self.steps.extend(r.step for r in records)

    def on_diagnosing(self, what: str) -> None:
        self.events.append(f"diagnosing:{what}")

    def on_run_end(self, result) -> None:
        self.events.append(f"end:{result.bound}")


def test_a_run_is_begun_before_it_trains_and_finished_once_with_its_verdict(two_cpus, store: RunStore) -> None:
    heard = Heard(store)
    recorded = run_job(CONFIG, store, JobOptions(label="mine", group="g", diagnose=True, listener=heard))
    assert recorded.started and recorded.history_error == "" and recorded.result.status == RunStatus.COMPLETED
    assert heard.status_at_start == RunStatus.RUNNING and heard.steps == list(range(1, 7))
    assert heard.events[0] == "start" and heard.events[1] == "diagnosing:" and len(heard.events) > 3
    assert recorded.result.bound is not None and heard.events[-1] == f"end:{recorded.result.bound}"  # the end hears the verdict
    (summary,) = store.list_runs()
    assert (summary.id, summary.label, summary.group, summary.status, summary.steps) == (recorded.run_id, "mine", "g", "completed", 6)
    assert store.load(recorded.run_id).bound == recorded.result.bound  # the record is finished with the verdict


def test_a_config_this_machine_cannot_run_is_a_failed_recorded_run_or_raised_and_not_recorded(two_cpus, store: RunStore) -> None:
    missing = CONFIG.with_changes(strategy="one-device", devices=("CPU:9",))
    recorded = run_job(missing, store)
    assert not recorded.started and recorded.result.status == RunStatus.FAILED and "CPU:9" in recorded.result.message
    assert [r.status for r in store.list_runs()] == [RunStatus.FAILED]
    with pytest.raises(ConfigError, match="CPU:9"):
        run_job(missing, store, JobOptions(raise_config_error=True))
    assert len(store.list_runs()) == 1  # the refused run was begun, then removed


def test_stop_ends_the_run_without_a_verdict_and_hooks_see_every_call(two_cpus, store: RunStore) -> None:
    stop = threading.Event()

    class StopAfterThree(RunHook):
        calls = 0

        def on_step_records(self, records) -> None:
            self.calls += 1
            if self.calls == 3:
                stop.set()

    hook = StopAfterThree()
    recorded = run_job(CONFIG.with_changes(steps=500), store, JobOptions(diagnose=True, hooks=(hook,)), stop)
    assert recorded.result.status == RunStatus.STOPPED and recorded.result.steps_done == 3 and recorded.result.bound is None
    assert store.load(recorded.run_id).status == RunStatus.STOPPED


def test_without_a_store_the_reason_comes_back_and_nothing_is_written(two_cpus) -> None:
    reason = "The run history could not be opened: test."
    recorded = run_job(CONFIG, None, JobOptions(unsaved_reason=reason))
    assert recorded.result.status == RunStatus.COMPLETED and recorded.run_id is None
    assert recorded.history_error == reason
    assert run_job(CONFIG, None).history_error == ""
