"""The step-time model: its regimes, a real least-squares fit that recovers known constants, and the range's cap."""

from __future__ import annotations

import math

import pytest

from core.projection.model import (
    COMPUTE,
    FIXED,
    KERNEL_S,
    MAX_RANGE,
    MEMORY,
    Constants,
    Costs,
    Observation,
    Target,
    fit,
    spread,
    step_parts,
)

H100 = Target(370e12, 3.35e12)
CONSTANTS = Constants("jax", host_s=3e-3, efficiency=0.01, per_layer_s=0.0, residuals=(), points=())


def costs(
    flops: float, bytes_moved: float = 1e6, kernels: int = 50, batch: int = 64, batches_per_epoch: int | None = 64, scattered: int = 0
) -> Costs:
    return Costs(batch, flops, bytes_moved, kernels, ops=5 * kernels, layers=6, batches_per_epoch=batches_per_epoch, scattered=scattered)


def test_a_compiled_step_adds_the_host_and_the_device_small_ones_fixed_cost_bound_large_ones_compute_bound() -> None:
    small = step_parts("jax", costs(1e9), H100, CONSTANTS)
    assert small.regime == FIXED and "host" in small.why
    assert small.step_s == pytest.approx(3e-3 + 50 * KERNEL_S + 1e9 / (0.01 * 370e12))  # the app's clock waits for each result
    large = step_parts("jax", costs(1e12), H100, CONSTANTS)
    assert large.regime == COMPUTE and large.step_s == pytest.approx(3e-3 + 50 * KERNEL_S + 1e12 / (0.01 * 370e12))
    assert step_parts("jax", costs(1e9), H100, CONSTANTS, steps_per_call=10).host_s == pytest.approx(3e-4)


def test_each_step_carries_its_share_of_the_epochs_work_and_an_endless_loop_none() -> None:
    keras_fit = Constants("jax", host_s=1e-3, efficiency=0.01, per_layer_s=0.0, residuals=(), points=(), epoch_s=2.4e-3)
    assert step_parts("jax", costs(1e6, batches_per_epoch=1), H100, keras_fit).host_s == pytest.approx(1e-3 + 2.4e-3)
    sixteen = step_parts("jax", costs(1e6, batches_per_epoch=16), H100, keras_fit)
    assert sixteen.epoch_s == pytest.approx(1.5e-4) and sixteen.host_s == pytest.approx(1e-3 + 1.5e-4)
    assert "2.4 ms per epoch / 16 steps" in sixteen.why
    endless = step_parts("jax", costs(1e6, batches_per_epoch=None), H100, keras_fit)  # the TensorFlow engine's loop
    assert endless.epoch_s == 0 and endless.host_s == pytest.approx(1e-3) and "per epoch" not in endless.why
    torch = Constants("torch", host_s=2e-3, efficiency=0.01, per_layer_s=1e-3, residuals=(), points=(), epoch_s=2.4e-3)
    assert step_parts("torch", costs(1e6, batches_per_epoch=2), H100, torch).step_s == pytest.approx(2e-3 + 6e-3 + 1.2e-3)


def test_only_the_byte_share_of_the_pre_fusion_bytes_reaches_memory() -> None:
    fused = Constants("jax", host_s=3e-3, efficiency=0.01, per_layer_s=0.0, residuals=(), points=(), byte_share=0.25)
    assert step_parts("jax", costs(1e6, bytes_moved=1e11), H100, fused).memory_s == pytest.approx(0.25 * 1e11 / 3.35e12)


def test_bytes_beyond_the_flops_make_a_step_memory_bound_and_many_kernels_launch_bound() -> None:
    assert step_parts("jax", costs(1e9, bytes_moved=1e11), H100, CONSTANTS).regime == MEMORY
    launches = step_parts("jax", costs(1e6, kernels=5000), H100, CONSTANTS)
    assert launches.regime == FIXED and "kernel launches" in launches.why


def test_scattered_elements_add_their_atomic_writes_to_the_device_and_can_make_it_memory_bound() -> None:
    atomic = Constants("jax", host_s=1e-3, efficiency=0.01, per_layer_s=0.0, residuals=(), points=(), scatter_s=2e-11)
    pooled = step_parts("jax", costs(1e9, scattered=154_000_000), H100, atomic)
    assert pooled.scatter_s == pytest.approx(154e6 * 2e-11)
    assert pooled.step_s == pytest.approx(1e-3 + 50 * KERNEL_S + 1e9 / (0.01 * 370e12) + 154e6 * 2e-11)
    assert pooled.regime == MEMORY and "154,000,000 elements scattered x 20 ps" in pooled.why
    assert step_parts("jax", costs(1e9), H100, atomic).scatter_s == 0  # nothing scattered, nothing added
    assert step_parts("jax", costs(1e9, scattered=154_000_000), H100, CONSTANTS).scatter_s == 0  # a fit whose points never scattered


def test_an_eager_backend_pays_its_host_cost_per_layer() -> None:
    torch = Constants("torch", host_s=2e-3, efficiency=0.01, per_layer_s=1e-3, residuals=(), points=())
    assert step_parts("torch", costs(1e6), H100, torch).step_s == pytest.approx(2e-3 + 6 * 1e-3)  # the device works behind it
    assert step_parts("torch", costs(1e12), H100, torch).step_s == pytest.approx(50 * 5 * KERNEL_S + 1e12 / (0.01 * 370e12))


def test_the_fit_recovers_the_constants_that_made_the_observations() -> None:
    made_by = Constants("jax", host_s=3e-3, efficiency=0.01, per_layer_s=0.0, residuals=(), points=(), byte_share=0.3, epoch_s=5e-3)
    cases = [
        costs(2e7, kernels=47),
        costs(1.5e9, kernels=84, batches_per_epoch=4),
        costs(3e10, kernels=286),
        costs(5e9, 1e11, kernels=331),
        costs(1e10, 2e10, batches_per_epoch=16),
        costs(2e7, kernels=47, batches_per_epoch=1),
    ]
    made = [step_parts("jax", c, H100, made_by).step_s for c in cases]
    fitted = fit("jax", [Observation(f"p{i}", c, H100, 1, s) for i, (c, s) in enumerate(zip(cases, made, strict=True))])
    assert fitted.host_s == pytest.approx(3e-3, rel=1e-3) and fitted.efficiency == pytest.approx(0.01, rel=1e-3)
    assert fitted.byte_share == pytest.approx(0.3, rel=1e-3) and fitted.epoch_s == pytest.approx(5e-3, rel=1e-3)
    assert fitted.fitted == 4 and not fitted.notes
    assert max(abs(r) for r in fitted.residuals) < 1e-4 and fitted.points == ("p0", "p1", "p2", "p3", "p4", "p5")


def test_the_fit_recovers_a_per_element_scatter_cost_where_points_scattered_and_counts_it_as_fitted() -> None:
    made_by = Constants(
        "jax", host_s=1e-3, efficiency=0.1, per_layer_s=0.0, residuals=(), points=(), byte_share=0.3, epoch_s=2e-3, scatter_s=2e-11
    )
    cases = [
        costs(2e7, kernels=47),
        costs(1.5e9, kernels=84, scattered=2_400_000),
        costs(9.5e10, 1.4e10, kernels=82, batches_per_epoch=1, scattered=154_000_000),
        costs(2.4e10, 3.5e9, kernels=84, batches_per_epoch=4, scattered=38_500_000),
        costs(3e11, 4.7e10, kernels=286, batches_per_epoch=4),
        costs(8e10, 4.7e11, kernels=325, batches_per_epoch=4),
        costs(2e7, kernels=47, batches_per_epoch=1),
    ]
    made = [step_parts("jax", c, H100, made_by).step_s for c in cases]
    fitted = fit("jax", [Observation(f"p{i}", c, H100, 1, s) for i, (c, s) in enumerate(zip(cases, made, strict=True))])
    assert fitted.scatter_s == pytest.approx(2e-11, rel=1e-2) and fitted.epoch_s == pytest.approx(2e-3, rel=1e-2)
    assert fitted.host_s == pytest.approx(1e-3, rel=1e-2) and fitted.efficiency == pytest.approx(0.1, rel=1e-2)
    assert fitted.fitted == 5 and max(abs(r) for r in fitted.residuals) < 1e-3


def test_points_that_cannot_tell_the_byte_share_get_the_largest_one_and_a_note_saying_so() -> None:
    cases = [
        costs(2e7, kernels=47),
        costs(1.5e9, kernels=84),
        costs(3e10, kernels=286),
        costs(5e9, kernels=331),
        costs(1e10, kernels=90),
    ]  # 1 MB each
    made = [step_parts("jax", c, H100, CONSTANTS).step_s for c in cases]  # made with byte_share 1.0, the bytes never decide
    fitted = fit("jax", [Observation(f"p{i}", c, H100, 1, s) for i, (c, s) in enumerate(zip(cases, made, strict=True))])
    assert fitted.byte_share == 1.0 and "from above only: 100%" in fitted.notes[0]
    assert max(abs(r) for r in fitted.residuals) < 1e-3


def test_without_a_point_whose_device_outweighs_its_host_the_fit_says_its_device_constants_rest_on_small_terms() -> None:
    cases = [costs(2e7), costs(1.5e9), costs(5e9, kernels=331), costs(2e7, batches_per_epoch=1)]
    made = [step_parts("jax", c, H100, CONSTANTS).step_s for c in cases]  # all host-bound
    fitted = fit("jax", [Observation(f"p{i}", c, H100, 1, s) for i, (c, s) in enumerate(zip(cases, made, strict=True))])
    assert any("rest on small terms" in note for note in fitted.notes)
    assert max(abs(r) for r in fitted.residuals) < 1e-3  # they still fit the points they were fitted to
    with pytest.raises(ValueError, match="needs 4 points"):
        fit("jax", [Observation(f"p{i}", cases[i], H100, 1, made[i]) for i in range(3)])


def test_the_range_is_a_t_prediction_interval_capped_at_twice_and_says_when_capped() -> None:
    narrow = spread([0.01, -0.01, 0.005, -0.005])
    assert not narrow.capped and 1.0 < narrow.factor < 1.1
    wide = spread([0.3, -0.3, 0.2])
    assert wide.capped and wide.factor**2 == pytest.approx(MAX_RANGE) and "capped" in wide.text()
    assert spread([0.1, -0.1]).interval_half_width is None  # two points, two constants: no residual to size it
    assert math.isclose(spread([0.1, -0.1]).factor ** 2, MAX_RANGE)
