"""A step's loops in a projection: the kernels a recurrent layer's trips launch are counted from the compiled step, per trip.

Real model files counted by `measure_step_costs` (a child process lowering Keras's JAX train step on this CPU): an LSTM at
sequence length 12 and 24 launches exactly twice the loop kernels at 24 (each loop still one kernel of `kernels`, the
calibration points' convention), and its bytes grow with its length as its FLOPs do; a model without loops has none; a
`lax.while_loop`, whose trips are known only as it runs, is named. The projection says each in a caveat.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.backends.available import is_installed
from core.config import RunConfig
from core.projection.catalogue import find_device
from core.projection.project import project
from core.projection.step_costs import measure_step_costs

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not is_installed("jax"), reason="JAX is not installed")]

BATCH = 32

UNTIL_SMALL = '''
import jax, jax.numpy as jnp, keras


class UntilSmall(keras.layers.Layer):
    """Halves its input's (gradient-free) sum until it is small: a loop whose trips only the data decides."""

    def call(self, x):
        total = jax.lax.stop_gradient(jnp.abs(x).sum()) + 2.0
        _, small = jax.lax.while_loop(lambda c: c[1] > 1.0, lambda c: (c[0] + 1, c[1] / 2), (0, total))
        return x + small


def build_model():
    return keras.Sequential([keras.Input((8,)), UntilSmall(), keras.layers.Dense(3)])
'''


def _lstm(path: Path, length: int) -> Path:
    import keras

    ids = keras.Input((length,), dtype="int32")
    hidden = keras.layers.LSTM(16)(keras.layers.Embedding(100, 8)(ids))
    keras.Model(ids, keras.layers.Dense(2)(hidden)).save(path)
    return path


def _counted(config: RunConfig):
    return measure_step_costs(config, [BATCH])


def test_an_lstm_s_loop_kernels_grow_with_its_time_steps_and_the_projection_says_what_they_would_add(tmp_path: Path) -> None:
    short, long = (
        _counted(RunConfig(model=str(_lstm(tmp_path / f"lstm{length}.keras", length)), backend="jax", batch_size=BATCH))
        for length in (12, 24)
    )
    at_12, at_24 = short.at(BATCH), long.at(BATCH)
    assert at_12.loop_kernels > 0 and at_24.loop_kernels == 2 * at_12.loop_kernels  # the body's kernels, once per time step
    assert at_24.kernels == at_12.kernels  # each loop one kernel, whatever its trips
    assert at_24.unknown_trip_loops == at_12.unknown_trip_loops == 0  # a scan's trips are known
    # every trip's bytes counted, as its FLOPs are: both close to twice at twice the time steps (the rest of the step is small)
    assert at_24.flops / at_12.flops == pytest.approx(2, rel=0.15) and at_24.bytes / at_12.bytes == pytest.approx(2, rel=0.25)

    config = RunConfig(model=str(tmp_path / "lstm24.keras"), backend="jax", batch_size=BATCH)
    document = project(config, find_device("H100"), long, "lstm24.keras")
    [row] = document["rows"]
    assert row["loop_kernels"] == at_24.loop_kernels and row["unknown_trip_loops"] == 0
    [said] = [caveat for caveat in document["caveats"] if caveat.startswith("the step runs loops")]
    assert f"{at_24.loop_kernels:,} kernels ({at_24.loop_kernels * 3e-3:.3g} ms at 3 µs each) at batch {BATCH}" in said
    assert "runs an LSTM whose settings cuDNN takes" in said  # Keras's JAX backend has no cuDNN GRU
    tensorflow = project(config.with_changes(backend="tensorflow"), find_device("H100"), long, "lstm24.keras")
    assert any("runs an LSTM or GRU whose settings cuDNN takes" in caveat for caveat in tensorflow["caveats"])


def test_a_step_without_loops_has_no_loop_kernels_and_no_loop_caveat() -> None:
    costs = _counted(RunConfig(model="mlp", backend="jax", batch_size=BATCH))
    assert costs.at(BATCH).loop_kernels == 0 and costs.at(BATCH).unknown_trip_loops == 0
    document = project(RunConfig(model="mlp", backend="jax", batch_size=BATCH), find_device("H100"), costs, "MLP")
    assert not any("loop" in caveat for caveat in document["caveats"])


def test_a_while_loop_whose_trips_only_the_data_decides_is_named(tmp_path: Path) -> None:
    path = tmp_path / "until_small.py"
    path.write_text(UNTIL_SMALL)
    config = RunConfig(model=str(path), backend="jax", batch_size=BATCH, trust=True)
    costs = _counted(config)
    assert costs.at(BATCH).unknown_trip_loops == 1 and costs.at(BATCH).loop_kernels > 0  # its body, counted once
    document = project(config, find_device("H100"), costs, "until_small.py")
    assert any(caveat.startswith("1 loop(s) whose trip count is known only as the step runs") for caveat in document["caveats"])
