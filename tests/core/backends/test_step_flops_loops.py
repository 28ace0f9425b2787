"""A JAX run of a recurrent model: XLA counts a while loop's body once, so the count says it is partial (issue 38)."""

from __future__ import annotations

import pytest

from core import RunConfig, run_training
from core.backends.step_flops import METHOD


@pytest.mark.slow
def test_an_lstm_on_jax_says_its_count_leaves_out_the_loops_trips(tmp_path, two_cpus):
    import keras

    ids = keras.Input((12,), dtype="int32")
    hidden = keras.layers.LSTM(16)(keras.layers.Embedding(50, 8)(ids))
    path = tmp_path / "lstm.keras"
    keras.Model(ids, keras.layers.Dense(3)(hidden)).save(path)

    result = run_training(RunConfig(model=str(path), backend="jax", steps=2, batch_size=16))
    assert result.ok, result.message
    assert result.flops_per_step and result.flops_method.startswith(f"{METHOD}; partial: ")
    [uncounted] = result.flops_uncounted
    assert "while loop(s)" in uncounted and "counts each loop body once" in uncounted
    assert result.summary()["flops_uncounted"] == [uncounted]
