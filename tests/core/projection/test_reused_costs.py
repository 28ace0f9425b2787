"""A job's step costs counted once per process (`counted_step_costs`): projecting one job on device after device reuses them.

Real counts (a child process lowering Keras's JAX train step on this CPU): the same sample job on another backend is the
same count; other batches are counted anew; a `.keras` file is reused while its content is the same and counted again once
it is overwritten with another model; a `.py` model file is counted every time. The window's path, `projection_of`,
projects on two devices from one count.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.backends.available import is_installed
from core.config import RunConfig
from core.projection import step_costs
from core.projection.project import projection_of
from core.projection.step_costs import counted_step_costs

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not is_installed("jax"), reason="JAX is not installed")]

BATCH = 32

PY_MODEL = """
import keras


def build_model():
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(3)])
"""


def _dense(path: Path, units: int) -> str:
    import keras

    keras.Sequential([keras.Input((8,)), keras.layers.Dense(units), keras.layers.Dense(3)]).save(path)
    return str(path)


def test_a_sample_job_is_counted_once_whatever_backend_trains_it_and_other_batches_are_counted_anew() -> None:
    config = RunConfig(model="mlp", batch_size=BATCH, steps=7)
    first = counted_step_costs(config, [BATCH])
    assert counted_step_costs(config.with_changes(backend="jax"), [BATCH]) is first  # counted on JAX either way
    other = counted_step_costs(config, [BATCH, 2 * BATCH])
    assert other is not first and [costs.batch for costs in other.batches] == [BATCH, 2 * BATCH]
    assert other.at(BATCH) == first.at(BATCH)  # a count is repeatable: reusing it gives what counting again gives


def test_a_keras_file_is_reused_while_its_content_is_the_same_and_counted_again_once_overwritten(tmp_path: Path) -> None:
    config = RunConfig(model=_dense(tmp_path / "dense.keras", 16), batch_size=BATCH)
    first = counted_step_costs(config, [BATCH])
    assert counted_step_costs(config, [BATCH]) is first
    _dense(tmp_path / "dense.keras", 64)  # the same path, another model
    second = counted_step_costs(config, [BATCH])
    assert second is not first and second.params > first.params  # 8x64 + 64x3 weights, not the old 8x16 + 16x3


def test_a_py_model_file_is_counted_every_time(tmp_path: Path) -> None:
    path = tmp_path / "dense.py"
    path.write_text(PY_MODEL)
    config = RunConfig(model=str(path), batch_size=BATCH, trust=True)
    first = counted_step_costs(config, [BATCH])
    again = counted_step_costs(config, [BATCH])
    assert again is not first and again.at(BATCH) == first.at(BATCH)


def test_the_window_s_projection_on_a_second_device_reuses_the_first_s_count() -> None:
    config = RunConfig(model="mlp", batch_size=BATCH, steps=9, backend="jax")
    on_h100 = projection_of(config, "H100")
    counted = dict(step_costs._REUSED)
    on_l4 = projection_of(config, "L4")
    assert list(step_costs._REUSED) == list(counted) and all(step_costs._REUSED[key] is value for key, value in counted.items())
    assert on_h100["step_costs"] == on_l4["step_costs"]  # one count, two devices
    assert on_l4["device"]["name"] != on_h100["device"]["name"] and on_l4["rows"] != on_h100["rows"]
