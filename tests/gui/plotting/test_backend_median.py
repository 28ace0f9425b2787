"""A JAX run's median step is one figure: the Training header shows what its result stores and the history keeps.

The header took the median of the single steps (0.31 ms) while the run stored the median of 8-call windows (0.84 ms);
a backend job reads some calls' ends together, so single steps' times are shares, not steps. A real JAX job (its own
child process), recorded in a real history file; the header fed its steps as the window feeds them, config first.
"""

from __future__ import annotations

import numpy as np
import pytest

from core.backends.available import is_installed
from core.backends.call_timer import window_steps
from core.config import RunConfig
from core.formatting import format_value
from core.history.store import RunStore
from core.jobs import PLAIN, run_job
from core.results import RunStatus
from core.training.metrics import typical_step_s

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not is_installed("jax"), reason="JAX is not installed")]

CHUNK = 37  # steps per delivery, as the 10 Hz timer drains them: not a multiple of any window


def test_the_header_shows_the_median_the_run_stores_and_the_history_keeps(plots, tmp_path):
    config = RunConfig(model="mlp", dataset="digits", backend="jax", steps=300, batch_size=64)
    with RunStore(tmp_path / "history.sqlite3") as store:
        recorded = run_job(config, store, PLAIN)
        stored = store.load(recorded.run_id)
    result = recorded.result
    assert result.status == RunStatus.COMPLETED, result.message
    steady = np.asarray(result.step_times_s[result.warmup_steps :])
    window = window_steps("jax", int(result.config["steps_per_call"]))
    assert window > 1 and result.step_time_median_ms == pytest.approx(typical_step_s(steady, window) * 1e3)
    assert stored.step_time_median_ms == result.step_time_median_ms

    series = plots.add_run("jax", "MLP · digits · JAX", batch_size=config.batch_size)
    plots.describe_run("jax", None, config.to_dict())  # the window describes a run as it starts, then its steps arrive
    losses, times = np.asarray(result.losses), np.asarray(result.step_times_s)
    for start in range(0, len(losses), CHUNK):
        part = slice(start, start + CHUNK)
        steps = np.arange(start + 1, start + 1 + len(losses[part]), dtype=np.float64)
        plots.append_steps("jax", steps, losses[part], times[part], steps <= result.warmup_steps)
    plots.describe_run("jax", recorded.run_id, result.config)
    plots.redraw_now()
    assert series.median_step_ms == pytest.approx(result.step_time_median_ms, rel=1e-9)
    assert f"median step {format_value(result.step_time_median_ms, 'ms')} ms" in plots.info_label.text()
