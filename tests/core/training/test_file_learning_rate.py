"""A model file that trains with its own optimizer records the learning rate that optimizer used, not the run's default.

A file compiled with SGD at 0.05 trained at 0.05 while its stored config said 0.001. Real .keras files, real runs on
TensorFlow and on JAX (its child process), the history written and read back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.backends.available import is_installed
from core.config import FILE_OPTIMIZER, RunConfig
from core.history.store import RunStore
from core.jobs import PLAIN, run_job
from core.results import RunStatus
from core.runner import run_training

pytestmark = pytest.mark.slow

FILE_RATE = 0.05
BACKENDS = ["tensorflow", pytest.param("jax", marks=pytest.mark.skipif(not is_installed("jax"), reason="JAX is not installed"))]


@pytest.fixture(scope="module")
def sgd_file(tmp_path_factory, two_cpus) -> Path:
    """A classifier compiled with SGD at FILE_RATE, saved as a real .keras file."""
    import keras

    path = tmp_path_factory.mktemp("file_rate") / "sgd.keras"
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=FILE_RATE), loss="sparse_categorical_crossentropy")
    model.save(path)
    return path


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_files_own_optimizer_records_its_learning_rate_and_the_history_keeps_it(sgd_file, tmp_path, backend):
    config = RunConfig(model=str(sgd_file), optimizer=FILE_OPTIMIZER, steps=4, batch_size=8, backend=backend)
    assert config.learning_rate != FILE_RATE
    with RunStore(tmp_path / "history.sqlite3") as store:
        recorded = run_job(config, store, PLAIN)
        stored = store.load(recorded.run_id)
    assert recorded.result.status == RunStatus.COMPLETED, recorded.result.message
    assert recorded.result.config["learning_rate"] == stored.config["learning_rate"] == FILE_RATE
    assert recorded.result.config["optimizer"] == FILE_OPTIMIZER


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_optimizer_the_run_picks_keeps_the_runs_learning_rate(sgd_file, backend):
    result = run_training(RunConfig(model=str(sgd_file), optimizer="sgd", learning_rate=0.002, steps=4, batch_size=8, backend=backend))
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.config["learning_rate"] == 0.002
