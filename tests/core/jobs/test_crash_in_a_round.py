"""A job whose thread raises in interleaved rounds is a failed run saying what it raised, never a "not run: stopped first" row.

The crash is real: a model file whose code raises SystemExit (which `except Exception` lets through) while the job
sets up, trained in rounds by run_in_rounds, a comparison and a sweep, recorded in a real history file.
"""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import pytest

from core.compare.runner import SKIPPED_MESSAGE, run_comparison
from core.compare.targets import parse_targets
from core.config import RunConfig
from core.history.store import RunStore
from core.jobs import JobOptions, run_job
from core.jobs.rounds import run_in_rounds
from core.results import RunStatus
from core.tuning.sweep import run_sweep
from core.tuning.sweep_plan import plan_sweep

EXITS_AT_BATCH = 16
MODEL = f"""
    import keras
    import numpy as np
    import tensorflow as tf

    def build_model():
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])

    def build_dataset(batch_size):
        if batch_size == {EXITS_AT_BATCH}:
            raise SystemExit("build_dataset gave up at batch {EXITS_AT_BATCH}")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((64, 4)).astype("float32")
        return tf.data.Dataset.from_tensor_slices((x, rng.integers(0, 3, size=64).astype("int32"))).batch(batch_size)
"""


@pytest.fixture
def exiting_model(tmp_path: Path) -> Path:
    path = tmp_path / "exits.py"
    path.write_text(textwrap.dedent(MODEL))
    return path


def _job(model: Path, batch_size: int) -> RunConfig:
    return RunConfig(model=str(model), dataset="build_dataset", trust=True, steps=6, batch_size=batch_size)


@pytest.mark.slow
def test_a_starter_that_raises_hands_back_a_failed_result_with_the_reason_and_the_others_run(exiting_model):
    jobs = [_job(exiting_model, 8), _job(exiting_model, EXITS_AT_BATCH)]
    starters = [(lambda gate, c=c: run_job(c, None, JobOptions(hooks=(gate,)), threading.Event()).result) for c in jobs]
    results = run_in_rounds(starters, rounds=2, seed=1)
    assert results[0].status == RunStatus.COMPLETED, results[0].message
    assert results[1] is not None and results[1].status == RunStatus.FAILED
    assert results[1].message.startswith("SystemExit") and f"gave up at batch {EXITS_AT_BATCH}" in results[1].message


@pytest.mark.slow
def test_a_compare_target_whose_job_raises_is_a_failed_row_with_the_reason_recorded_once(exiting_model, tmp_path):
    with RunStore(tmp_path / "history.sqlite3") as store:
        comparison = run_comparison(_job(exiting_model, EXITS_AT_BATCH), parse_targets("CPU:0;CPU:1"), store=store, rounds=2, seed=3)
        runs = store.list_runs()
    assert [row.status for row in comparison.rows] == [RunStatus.FAILED, RunStatus.FAILED]
    for row in comparison.rows:
        assert row.result.message != SKIPPED_MESSAGE and "SystemExit" in row.result.message
        assert f"gave up at batch {EXITS_AT_BATCH}" in row.result.message
        assert row.result.config["devices"] == [row.label]
    assert sorted(run.status for run in runs) == ["failed", "failed"], "each target's begun record finished as failed, none twice"


@pytest.mark.slow
def test_a_sweep_point_whose_job_raises_is_a_failed_row_with_the_reason_beside_the_points_that_ran(exiting_model, tmp_path):
    plan = plan_sweep(_job(exiting_model, 8), {"batch_size": (8, EXITS_AT_BATCH)})
    with RunStore(tmp_path / "history.sqlite3") as store:
        sweep = run_sweep(plan, store, rounds=2, seed=5)
        runs = {run.id: run for run in store.list_runs()}
    by_batch = {row.settings["batch_size"]: row for row in sweep.rows}
    assert by_batch[8].status == RunStatus.COMPLETED, by_batch[8].result.message
    crashed = by_batch[EXITS_AT_BATCH]
    assert crashed.status == RunStatus.FAILED and "SystemExit" in crashed.result.message
    assert f"gave up at batch {EXITS_AT_BATCH}" in crashed.result.message
    assert crashed.result.config["batch_size"] == EXITS_AT_BATCH
    assert not sweep.stopped, "a crash is no stop"
    assert sorted(run.status for run in runs.values()) == ["completed", "failed"]
