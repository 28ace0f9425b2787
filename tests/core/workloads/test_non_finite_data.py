"""An .npz with NaN or infinite values is refused before anything trains, naming the array and how many rows hold one.

One `inf` in x once read "the loss became nan ... lower the learning rate", and x with every 7th row NaN trained to a
loss of 0.69 without a word: the cause was the data. Real .npz files, a real model file, a real `main.py` process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.config import RunConfig
from core.results import RunStatus
from core.runner import run_training
from core.workloads.model_data import NonFiniteData, check_finite
from core.workloads.user_workload import open_user_workload

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = 70


@pytest.fixture(scope="module")
def model_file(tmp_path_factory, two_cpus) -> Path:
    """A binary classifier of 4 features, saved as a real .keras file."""
    import keras

    path = tmp_path_factory.mktemp("non_finite") / "binary.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]).save(path)
    return path


def _npz(folder: Path, name: str, x: np.ndarray, y: np.ndarray) -> Path:
    path = folder / name
    np.savez(path, x=x, y=y)
    return path


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((EXAMPLES, 4)).astype("float32"), rng.integers(0, 2, size=EXAMPLES).astype("float32")


@pytest.mark.slow
def test_one_inf_in_x_is_refused_naming_the_array_the_row_and_the_count(model_file, tmp_path):
    x, y = _data()
    x[12, 3] = np.inf
    with pytest.raises(NonFiniteData) as refused:
        open_user_workload(model_file, data=str(_npz(tmp_path, "one_inf.npz", x, y)))
    assert (refused.value.array, refused.value.rows, refused.value.examples, refused.value.first_row) == ("x", 1, EXAMPLES, 12)
    assert refused.value.path.endswith("one_inf.npz") and "'x'" in str(refused.value)


@pytest.mark.slow
def test_every_seventh_row_nan_counts_each_row_once_and_a_nan_target_names_y(model_file, tmp_path):
    x, y = _data()
    x[::7, :2] = np.nan  # two NaNs in each of those rows: counted once per row
    with pytest.raises(NonFiniteData) as refused:
        open_user_workload(model_file, data=str(_npz(tmp_path, "every_7th.npz", x, y)))
    assert (refused.value.array, refused.value.rows, refused.value.first_row) == ("x", len(range(0, EXAMPLES, 7)), 0)
    x, y = _data()
    y[40] = np.nan
    with pytest.raises(NonFiniteData) as refused:
        open_user_workload(model_file, data=str(_npz(tmp_path, "nan_y.npz", x, y)))
    assert (refused.value.array, refused.value.rows, refused.value.first_row) == ("y", 1, 40)


def test_the_check_goes_a_chunk_of_rows_at_a_time_and_finds_rows_in_any_chunk(monkeypatch):
    monkeypatch.setattr("core.workloads.model_data.FINITE_CHUNK_BYTES", 3 * 5 * 4)  # 3 rows of 5 float32 per chunk
    rows = np.zeros((20, 5), dtype="float32")
    check_finite(rows, "x", "data.npz")  # finite: nothing raised
    rows[[4, 5, 17], [0, 4, 2]] = [np.nan, -np.inf, np.inf]
    with pytest.raises(NonFiniteData) as refused:
        check_finite(rows, "x", "data.npz")
    assert (refused.value.rows, refused.value.examples, refused.value.first_row) == (3, 20, 4)
    check_finite(np.full((4, 2), 7, dtype="int32"), "ids", "data.npz")  # integers are always finite


@pytest.mark.slow
def test_a_run_on_non_finite_data_fails_before_a_step_saying_so_not_as_a_diverged_loss(model_file, tmp_path):
    x, y = _data()
    x[5, 0] = np.inf
    data = _npz(tmp_path, "inf.npz", x, y)
    result = run_training(RunConfig(model=str(model_file), dataset=str(data), steps=6, batch_size=8))
    assert result.status == RunStatus.FAILED and result.steps_done == 0
    assert "array 'x'" in result.message and "learning rate (now" not in result.message


@pytest.mark.slow
def test_the_cli_exits_2_on_non_finite_data_in_one_line_before_training_and_records_nothing(model_file, tmp_path):
    x, y = _data()
    x[::7] = np.nan
    data = _npz(tmp_path, "every_7th.npz", x, y)
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    args = ["run", "--model", str(model_file), "--data", str(data), "--steps", "6", "--batch-size", "8", "--no-verdict"]
    out = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 2, out.stderr[-2000:]
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(f"error: {data}: ") and "'x'" in line and f"{len(range(0, EXAMPLES, 7))} of its {EXAMPLES} rows" in line
    assert out.stdout == "" and not (tmp_path / "data" / "history.sqlite3").exists()
