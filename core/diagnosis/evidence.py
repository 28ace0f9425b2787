"""Measurements for a verdict, read from finished runs of one job that differ in one setting.

A run at another batch size, with other steps per call, or on synthetic data
(in memory: the model without the input pipeline) is evidence about the run,
whether a probe (`core.diagnosis.probes`) or a sweep (issue 14) made it. Runs
are matched on their configs: equal in everything but the one setting, the
run length (steps, epochs) and the seed. Each matching run's point carries its
samples/s over the run's with a 95% block-bootstrap interval
(`core.training.noise`), so the verdict knows whether a difference is real;
a run measured under contention, or with widely spread step times, makes the
evidence too noisy to judge (`noise_reason`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from core.diagnosis.verdict import Evidence, Point
from core.machine.peak_estimates import recorded_peak_flops
from core.machine.peaks import PeaksReport
from core.results import RunResult
from core.training.metrics import NOISY_SPREAD
from core.training.noise import runs_ratio

IGNORED_KEYS = frozenset({"steps", "epochs", "seed", "extra"})
"""Config keys that do not change how fast a step is, so runs that differ in them still match."""
CEILING_PRECISIONS = ("float32", "bfloat16", "float16")
NOT_MEASURED = "this machine's ceilings are not measured yet: run `main.py peaks`, or Measure ceilings in the Devices tab"


def point(result: RunResult) -> Point | None:
    """The run's batch, steps per call and median steady-state step time; None without a steady-state step."""
    if not result.status.ran or result.step_time_median_ms is None:
        return None
    config = result.config
    return Point(int(config["batch_size"]), int(config.get("steps_per_call") or 1), result.step_time_median_ms / 1e3)


def differs_only_in(config: Mapping[str, Any], other: Mapping[str, Any], key: str) -> bool:
    """True when two run configs differ in `key` and in nothing else that changes step time."""
    keys = (set(config) | set(other)) - IGNORED_KEYS
    return config.get(key) != other.get(key) and all(config.get(k) == other.get(k) for k in keys - {key})


def device_names(result: RunResult) -> list[str]:
    """The devices the run trained on ("CPU:0", "GPU:1", ...), as it recorded them."""
    names = result.environment.get("devices") or result.config.get("devices") or []
    return [str(name) for name in names] or ["CPU:0"]


def evidence_from_runs(
    result: RunResult,
    others: Sequence[RunResult] = (),
    *,
    flops_per_step: float | None = None,
    model_params: int | None = None,
    peaks: PeaksReport | None = None,
    pipeline_s: float | None = None,
) -> Evidence:
    """Everything known about `result`: its own figures, the device ceilings, and the matching `others`.

    `pipeline_s` is the input pipeline timed alone, seconds per batch
    (`probes.time_pipeline`); `flops_per_step` and `model_params` come from
    `core.training.flops.FlopsCounter`; without them, the FLOPs per step the run
    recorded (so a run picked from the history is judged as it was live).
    """
    config = result.config
    devices = device_names(result)
    precision = str(config.get("precision", "off"))
    ceiling, how = peaks.ceiling(devices, precision) if peaks is not None else (None, NOT_MEASURED)
    by_precision = {}
    for key in CEILING_PRECISIONS:
        value = peaks.ceiling(devices, key)[0] if peaks is not None else None
        if value is not None:
            by_precision[key] = value
    estimate, _ = recorded_peak_flops(result.environment)
    return Evidence(
        run=point(result),
        device_kind=devices[0].split(":")[0],
        precision=precision,
        xla=bool(config.get("xla")),
        samples_per_s=result.samples_per_s,
        flops_per_step=flops_per_step if flops_per_step is not None else result.flops_per_step,
        model_params=model_params,
        ceiling_flops=ceiling,
        ceiling_how=how,
        estimate_flops=estimate,
        ceilings_by_precision=by_precision,
        other_batches=matching_points(result, others, "batch_size"),
        other_calls=matching_points(result, others, "steps_per_call"),
        pipeline_s=pipeline_s,
        model_only_step_s=model_only_step_s(result, others),
        noisy=noise_reason(result, [o for o in others if _matches_any(result, o)]),
    )


def noise_reason(result: RunResult, evidence_runs: Sequence[RunResult]) -> str:
    """Why the run and the runs its verdict rests on are too noisy to judge ("" when they are not)."""
    for run, what in ((result, "the run"), *((other, "a run of its evidence") for other in evidence_runs)):
        if run.contended:
            return f"{what} was measured while {run.conditions.get('reason', 'other work ran')}"
    if result.step_time_spread is not None and result.step_time_spread >= NOISY_SPREAD:
        return f"the run's step times spread over {result.step_time_spread:.0%} of their median (from {NOISY_SPREAD:.0%} it is noisy)"
    return ""


def _matches_any(result: RunResult, other: RunResult) -> bool:
    return any(differs_only_in(result.config, other.config, key) for key in ("batch_size", "steps_per_call", "dataset"))


def matching_points(result: RunResult, others: Sequence[RunResult], key: str) -> tuple[Point, ...]:
    """The step-time points of the `others` that differ from `result` only in `key` (and ran steady-state steps)."""
    found = []
    for other in others:
        other_point = point(other) if differs_only_in(result.config, other.config, key) else None
        if other_point is not None:
            found.append(replace(other_point, gain=runs_ratio(result, other)))
    return tuple(found)


def model_only_step_s(result: RunResult, others: Sequence[RunResult]) -> float | None:
    """The step time of the same job on synthetic (in-memory) data, when the run itself used other data."""
    if result.config.get("dataset") == "synthetic":
        return None
    for other in others:
        found = point(other)
        if found is not None and other.config.get("dataset") == "synthetic" and differs_only_in(result.config, other.config, "dataset"):
            return found.step_s
    return None
