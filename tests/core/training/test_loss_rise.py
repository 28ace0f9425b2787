"""A run whose loss ends above where it began says so in its warnings, on TensorFlow and JAX alike; one that learns,
or whose loss stays flat (synthetic data in a short run), does not. Real runs of the MLP."""

from __future__ import annotations

import pytest

from core.backends.available import is_installed
from core.config import RunConfig
from core.results import RunResult, RunStatus
from core.runner import run_training
from core.training.metrics import LOSS_ROSE, loss_rise

pytestmark = pytest.mark.slow

TOO_HIGH = 10.0  # Adam at this rate throws the MLP's loss up by orders of magnitude, then leaves it above where it began


def _rose(result: RunResult) -> list[str]:
    return [warning for warning in result.warnings if warning.startswith(LOSS_ROSE)]


@pytest.mark.parametrize(
    "backend",
    ["tensorflow", pytest.param("jax", marks=pytest.mark.skipif(not is_installed("jax"), reason="JAX is not installed"))],
)
def test_a_learning_rate_that_makes_the_loss_rise_is_warned_of_naming_the_rate(backend):
    result = run_training(RunConfig(model="mlp", dataset="digits", batch_size=32, steps=60, learning_rate=TOO_HIGH, backend=backend))
    assert result.status == RunStatus.COMPLETED, result.message
    rise = loss_rise(result.losses)
    assert rise is not None and rise.last > rise.first == result.losses[0]
    assert rise.last_steps == 12 and rise.above >= 11
    [warning] = _rose(result)
    assert f"{rise.first:.4g}" in warning and f"{rise.last:.4g}" in warning and f"{TOO_HIGH:g}" in warning


@pytest.mark.parametrize(
    "config",
    [
        RunConfig(model="mlp", dataset="digits", batch_size=32, steps=60),  # learns
        RunConfig(model="mlp", dataset="synthetic", batch_size=32, steps=40, learning_rate=0.05),  # thrown up, back to flat
        RunConfig(model="cnn", dataset="synthetic", batch_size=32, steps=40),  # flat: random labels in 40 steps
    ],
    ids=["learns", "spikes-then-flat", "flat"],
)
def test_a_run_that_learns_or_stays_flat_is_not_said_to_rise(config):
    result = run_training(config)
    assert result.status == RunStatus.COMPLETED, result.message
    assert loss_rise(result.losses) is None and _rose(result) == []


def test_too_few_steps_or_a_rise_within_noise_is_no_rise():
    assert loss_rise([2.3] * 8) is None, "8 steps: no end to tell from the start"
    assert loss_rise([2.30, *[2.31] * 19]) is None, "under 2% above the start"
    half_above = [2.3] + [2.5, 2.1] * 10
    assert loss_rise(half_above) is None, "half the last steps above the start, half below: noise"
    risen = loss_rise([2.3] + [2.6] * 19)
    assert risen is not None and (risen.first, risen.last, risen.last_steps, risen.above) == (2.3, 2.6, 8, 8)
