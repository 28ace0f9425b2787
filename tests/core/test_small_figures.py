"""A figure too small for its fixed decimals is written in scientific form, not as 0.0000 (a loss of 9.65e-06 read 0.0000).

A real run trains a linear model on data it fits exactly until its loss is tiny; its result, as `run` prints it, says that loss.
"""

from __future__ import annotations

import numpy as np
import pytest

from core.cli.output import format_result
from core.config import RunConfig
from core.formatting import format_value
from core.results import RunStatus
from core.runner import run_training


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [
        (9.65e-06, "loss", "9.65e-06"),
        (0.00012, "loss", "0.00012"),
        (0.0012, "loss", "0.0012"),
        (2.34567, "loss", "2.3457"),
        (0.0, "loss", "0.0000"),
        (0.004, "ms", "0.004"),
        (1.234, "ms", "1.23"),
        (3e-4, "seconds", "0.0003"),
    ],
)
def test_small_values_keep_their_digits_and_others_their_fixed_decimals(value, kind, text):
    assert format_value(value, kind) == text


@pytest.mark.slow
def test_a_run_that_trains_to_a_tiny_loss_prints_that_loss_not_zero(tmp_path):
    import keras

    model = tmp_path / "linear.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, use_bias=False)]).save(model)
    x = np.random.default_rng(0).standard_normal((256, 4)).astype("float32")
    np.savez(tmp_path / "exact.npz", x=x, y=x @ np.array([0.5, -1.0, 0.25, 2.0], dtype="float32"))
    config = RunConfig(model=str(model), dataset=str(tmp_path / "exact.npz"), optimizer="adam", learning_rate=0.1, steps=300, batch_size=64)
    result = run_training(config)
    assert result.status == RunStatus.COMPLETED, result.message
    assert 0 < result.final_loss < 1e-3, result.final_loss
    [line] = [line for line in format_result(result).splitlines() if line.startswith("final loss")]
    assert line.split()[-1] == f"{result.final_loss:.3g}" and float(line.split()[-1]) > 0
