"""A projection's caveats about data: a job on real data hears how far the points on real data fell from the model."""

from __future__ import annotations

from core.config import RunConfig
from core.projection import calibration
from core.projection.project import input_pipeline_caveats


def test_a_job_on_real_data_hears_how_far_the_points_on_real_data_fell_and_on_synthetic_data_nothing() -> None:
    jax = calibration.constants("jax")
    points = calibration.points_for("jax")
    (said,) = input_pipeline_caveats(RunConfig(model="mlp", backend="jax", dataset="digits"), points, jax)
    assert "no per-batch term for the input pipeline" in said and "jax mlp b64 H200 digits: 0.82x" in said
    assert input_pipeline_caveats(RunConfig(model="mlp", backend="jax"), points, jax) == []


def test_without_a_point_on_real_data_it_says_so() -> None:
    torch = calibration.constants("torch")
    (said,) = input_pipeline_caveats(RunConfig(model="cnn", backend="torch", dataset="digits"), calibration.points_for("torch"), torch)
    assert "no point ran on real data" in said
