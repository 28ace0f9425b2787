"""The engine trains for real: tiny models, few steps, every strategy it offers here."""

import threading

import numpy as np
import pytest

from core.config import RunConfig
from core.results import RunStatus
from core.runner import run_training
from core.workloads.models import MODELS
from tests.step_hooks import StepsTo


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_sample_model_trains_on_synthetic_data(model, two_cpus):
    streamed = []
    result = run_training(RunConfig(model=model, steps=4, batch_size=8), hooks=[StepsTo(streamed.extend)])
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.steps_done == 4
    assert [r.step for r in streamed] == [1, 2, 3, 4]
    assert all(np.isfinite(result.losses))
    assert result.warmup_steps == 1 and result.warmup_s > 0
    assert result.samples_per_s > 0 and result.step_time_median_ms > 0


@pytest.mark.slow
def test_mlp_loss_falls_clearly_on_shipped_digits(two_cpus):
    result = run_training(RunConfig(model="mlp", dataset="digits", steps=100, batch_size=64, learning_rate=3e-3))
    assert result.status == RunStatus.COMPLETED, result.message
    first, last = np.mean(result.losses[:10]), np.mean(result.losses[-10:])
    assert last < 0.4 * first, f"loss went from {first:.3f} to {last:.3f}"


@pytest.mark.slow
def test_mirrored_on_two_logical_cpus_reports_true_per_step_losses(two_cpus):
    streamed = []
    mirrored = run_training(
        RunConfig(model="mlp", dataset="digits", strategy="mirrored", devices=tuple(two_cpus), steps=12, steps_per_call=4),
        hooks=[StepsTo(lambda records: streamed.append([r.step for r in records]))],
    )
    assert mirrored.status == RunStatus.COMPLETED, mirrored.message
    assert mirrored.replicas == 2
    assert streamed == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    assert mirrored.warmup_steps == 4
    single = run_training(RunConfig(model="mlp", dataset="digits", strategy="one-device", devices=(two_cpus[0],), steps=12))
    # Same seed, data and maths: each step's loss must match the one-replica run step for step.
    np.testing.assert_allclose(mirrored.losses, single.losses, rtol=1e-4)
    running_mean = np.cumsum(single.losses) / np.arange(1, 13)
    assert not np.allclose(mirrored.losses[1:], running_mean[1:], rtol=1e-3)


@pytest.mark.slow
def test_stop_event_ends_run_within_one_call_with_partial_statistics(two_cpus):
    stop = threading.Event()
    calls = []

    def on_step_records(records):
        calls.append(records)
        if len(calls) == 3:
            stop.set()

    result = run_training(RunConfig(model="mlp", steps=1000, steps_per_call=5), stop_event=stop, hooks=[StepsTo(on_step_records)])
    assert result.status == RunStatus.STOPPED
    assert result.steps_done == 15
    assert "15 of 1000" in result.message
    assert result.step_time_median_ms is not None and result.samples_per_s > 0
    assert len(result.losses) == 15


@pytest.mark.slow
def test_diverging_run_fails_with_readable_message_and_keeps_its_steps(two_cpus):
    result = run_training(RunConfig(model="cnn", batch_size=16, optimizer="sgd", learning_rate=10.0, steps=200))
    assert result.status == RunStatus.FAILED
    assert "Lower the learning rate" in result.message
    assert 0 < result.steps_done < 200


@pytest.mark.slow
def test_xla_bfloat16_and_several_steps_per_call(two_cpus):
    result = run_training(RunConfig(model="cnn", steps=6, batch_size=16, steps_per_call=3, xla=True, precision="bfloat16"))
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.steps_done == 6 and result.warmup_steps == 3


def test_epochs_cover_the_data_set(two_cpus):
    result = run_training(RunConfig(model="mlp", dataset="digits", epochs=1, batch_size=512, steps_per_call=2))
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.steps_done == 1797 // 512


def test_batch_that_does_not_split_across_replicas_fails_clearly(two_cpus):
    result = run_training(RunConfig(model="mlp", strategy="mirrored", devices=tuple(two_cpus), batch_size=33, steps=2))
    assert result.status == RunStatus.FAILED
    assert "batch_size" in result.message and "multiple of the 2 replicas" in result.message


@pytest.mark.slow
def test_run_records_its_devices_peak_for_later_comparisons(two_cpus):
    from core.machine.peak_estimates import cpu_peak_flops

    result = run_training(RunConfig(model="mlp", strategy="one-device", devices=(two_cpus[0],), steps=3, batch_size=8))
    assert result.status == RunStatus.COMPLETED, result.message
    assert (result.environment["peak_flops"], result.environment["peak_flops_how"]) == cpu_peak_flops()
    assert isinstance(result.environment["cpu_native_bfloat16"], bool)
