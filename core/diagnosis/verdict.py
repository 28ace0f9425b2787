"""Why a run is as fast as it is: a verdict (`bound`), its evidence in numbers, and the next thing to try.

`verdict(evidence)` is a pure function of measurements, so a sweep that
already ran the job at other batch sizes or steps per call (issue 14) gets a
verdict from those runs (`evidence_from_runs`) without running anything more;
`core.diagnosis.probes` runs the few short extra runs a single run needs.

The rules, in the order they are tried (the thresholds are the constants below):

- input: the model waits for data. Measured as xprof does, as the share of
  the step spent waiting: (step with the pipeline - step of the same model on
  in-memory data) / step; >= 20% is highly input-bound (the verdict), 5-20%
  moderately (said in the evidence). Without the in-memory step, the
  pipeline timed alone gives an upper bound (a step cannot wait longer than
  the pipeline takes): below 5% the run is not input-bound; at >= 80% of the
  step the pipeline sets the pace (the verdict).
- overhead: the fixed cost of a step dominates. Fitting step time = fixed +
  per-example x batch through the run and a run at another batch gives the
  fixed share; >= 50% is overhead-bound. Fitting step time = own + per-call
  / steps-per-call through the run and a run with more steps per call gives
  the per-call share; >= 30% is overhead-bound too, and the advice is then to
  raise steps per call.
- compute: achieved FLOP/s (model FLOPs per step x steps per second) is >= 50%
  of the device's measured matmul ceiling for the run's precision.
- unknown: none of the above.
- too noisy: the run (or a run its evidence rests on) was measured while other
  work used the machine, or its step times spread too widely: the bound is
  not judged ("unknown", saying so) rather than flipping from run to run.

Advice never contradicts its evidence: "raise steps per call" only when the
run with more steps per call was faster beyond noise (`Point.gain`, a 95%
interval from the per-call timings), "raise the batch" only when the larger
batch gave more samples/s beyond noise; a setting no run measured here (XLA)
is written "not measured here: try ...", and bfloat16 is advised only from
the measured matmul ceilings.

There is no "memory" verdict: the bytes a step moves cannot be estimated
honestly from what a run records. Activations are not counted, and weights and
optimizer state that fit in a cache never reach DRAM, so any estimate against
the measured bandwidth could be off by more than the threshold it would be
judged by. The measured bandwidth is still shown with the device's ceilings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from core.formatting import format_si, format_value
from core.machine.peaks import run_precision_key
from core.training.noise import Interval

INPUT_HIGH_SHARE = 0.20
"""Share of the step spent waiting for input from which a run is highly input-bound (xprof's threshold)."""
INPUT_MODERATE_SHARE = 0.05
"""Share of the step spent waiting for input from which a run is moderately input-bound (xprof's threshold)."""
INPUT_PACE_SHARE = 0.80
"""Without an in-memory step time: the pipeline alone needs at least this share of the step, so it sets the pace."""
OVERHEAD_FIXED_SHARE = 0.50
"""Share of the step that does not grow with the batch from which a run is overhead-bound."""
OVERHEAD_CALL_SHARE = 0.30
"""Share of the step paid once per call of the training function from which a run is overhead-bound."""
COMPUTE_SHARE = 0.50
"""Share of the measured matmul ceiling (run's precision) from which a run is compute-bound."""
BETTER_PRECISION_GAIN = 1.2
"""Advise bfloat16 when its measured matmul ceiling is at least this many times the run's."""
SMALL_GPU_STEP_MS = 1.0
SMALL_MODEL_PARAMS = 1_000_000
"""A GPU run faster than SMALL_GPU_STEP_MS per step, or of a model under SMALL_MODEL_PARAMS, is too small to load it."""
NOISY_ADVICE = "Re-run on a quiet machine (other work slows and scatters the steps), then judge the bound."
INPUT_ADVICE = (
    "Speed up the input pipeline: cache it (Dataset.cache), prefetch (prefetch(tf.data.AUTOTUNE)), "
    "parallelise its map (num_parallel_calls=tf.data.AUTOTUNE); if it reads files, check the disk."
)


TOO_NOISY = "Too noisy to judge"
"""How an unknown bound's evidence begins when the run was too noisy to judge (the window's verdict head says the same)."""


class Bound(str, Enum):
    """What limits a run's speed. Compares equal to its plain value ("compute")."""

    COMPUTE = "compute"
    INPUT = "input"
    OVERHEAD = "overhead"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Point:
    """One run of the job: its global batch, steps per call and median steady-state step time."""

    batch_size: int
    steps_per_call: int
    step_s: float
    gain: Interval | None = None  # this run's samples/s over the judged run's, 95% interval; None: no per-call timings


@dataclass(frozen=True)
class Evidence:
    """What was measured about one run, and about runs of the same job that differ in one setting."""

    run: Point | None  # None: the run has no steady-state step
    device_kind: str = "CPU"  # "CPU" | "GPU" | "TPU"
    precision: str = "off"  # the run's: "off", "bfloat16", "float16"
    xla: bool = False
    samples_per_s: float | None = None
    flops_per_step: float | None = None
    model_params: int | None = None
    ceiling_flops: float | None = None  # measured matmul FLOP/s of the run's devices, run's precision
    ceiling_how: str = ""
    estimate_flops: float | None = None  # the datasheet/ISA estimate, shown beside
    ceilings_by_precision: Mapping[str, float] = field(default_factory=dict)  # "float32" -> FLOP/s, same devices
    other_batches: tuple[Point, ...] = ()  # same job at other batch sizes (same steps per call)
    other_calls: tuple[Point, ...] = ()  # same job with other steps per call (same batch)
    pipeline_s: float | None = None  # the input pipeline alone, seconds per batch
    model_only_step_s: float | None = None  # the same model on in-memory data, seconds per step
    noisy: str = ""  # why the figures are too noisy to judge ("" when they are not)


@dataclass(frozen=True)
class Verdict:
    """A run's verdict: what limits it, the numbers that say so, one line of advice, and FLOP/s against the ceiling."""

    bound: Bound
    bound_evidence: str
    advice: str
    achieved_flops: float | None = None
    pct_of_measured_peak: float | None = None  # percent (0-100) of the measured ceiling for the run's precision

    def to_dict(self) -> dict[str, Any]:
        """The JSON keys a run's summary carries."""
        data = asdict(self)
        data["bound"] = self.bound.value
        return data


def achieved_flops(evidence: Evidence) -> float | None:
    """Steady-state FLOP/s: FLOPs per step x samples/s / batch."""
    if evidence.flops_per_step is None or not evidence.samples_per_s or evidence.run is None:
        return None
    return evidence.flops_per_step * evidence.samples_per_s / evidence.run.batch_size


def fixed_share(run: Point, others: tuple[Point, ...]) -> tuple[float, Point] | None:
    """Share of the run's step that does not grow with the batch, from the other point farthest in batch size.

    Fits step = fixed + per_example x batch through two points; clamped to 0..1.
    """
    usable = [p for p in others if p.batch_size != run.batch_size and p.step_s > 0]
    if not usable or run.step_s <= 0:
        return None
    other = max(usable, key=lambda p: abs(p.batch_size - run.batch_size))
    per_example = (run.step_s - other.step_s) / (run.batch_size - other.batch_size)
    fixed = run.step_s - per_example * run.batch_size
    return min(1.0, max(0.0, fixed / run.step_s)), other


def call_share(run: Point, others: tuple[Point, ...]) -> tuple[float, Point] | None:
    """Share of the run's step paid once per call, from the point with the most steps per call.

    Fits step = own + per_call / steps_per_call through two points; clamped to 0..1.
    """
    usable = [p for p in others if p.steps_per_call > run.steps_per_call and p.step_s > 0]
    if not usable or run.step_s <= 0:
        return None
    other = max(usable, key=lambda p: p.steps_per_call)
    per_call = (run.step_s - other.step_s) / (1 / run.steps_per_call - 1 / other.steps_per_call)
    return min(1.0, max(0.0, per_call / run.steps_per_call / run.step_s)), other


def input_wait(evidence: Evidence) -> tuple[float, bool] | None:
    """(share of the step spent waiting for input, whether it is measured rather than an upper bound), or None."""
    run = evidence.run
    if run is None or run.step_s <= 0:
        return None
    if evidence.model_only_step_s is not None:
        return max(0.0, run.step_s - evidence.model_only_step_s) / run.step_s, True
    if evidence.pipeline_s is not None:
        return min(1.0, evidence.pipeline_s / run.step_s), False
    return None


def verdict(evidence: Evidence) -> Verdict:
    """The verdict from the measurements (see the module docstring for the rules and thresholds)."""
    achieved = achieved_flops(evidence)
    pct = 100 * achieved / evidence.ceiling_flops if achieved is not None and evidence.ceiling_flops else None
    if evidence.run is None:
        return Verdict(
            Bound.UNKNOWN, "The run has no steady-state step to judge (it ended during warm-up).", "Run more steps.", achieved, pct
        )
    notes = [_flops_text(evidence, achieved, pct)] if achieved is not None else []
    if evidence.noisy:
        text = f"{TOO_NOISY}: {evidence.noisy}; the bound is not judged from these figures."
        return Verdict(Bound.UNKNOWN, " ".join([text, *notes]), NOISY_ADVICE, achieved, pct)
    for rule in (_input_rule, _overhead_rule, _compute_rule):
        found = rule(evidence, pct)
        if found is not None:
            bound, text, advice = found
            break
    else:
        bound, text, advice = Bound.UNKNOWN, _unknown_text(evidence), _unknown_advice(evidence)
    if bound in (Bound.OVERHEAD, Bound.UNKNOWN) and _too_small_for_gpu(evidence):
        text += " " + _small_gpu_text(evidence)
    evidence_text = " ".join([text, *notes, *_side_notes(evidence, bound)]).strip()
    return Verdict(bound, evidence_text, advice, achieved, pct)


def _input_rule(evidence: Evidence, pct: float | None) -> tuple[Bound, str, str] | None:
    found = input_wait(evidence)
    if found is None:
        return None
    share, measured = found
    run = evidence.run
    assert run is not None
    if measured and share >= INPUT_HIGH_SHARE:
        text = (
            f"Input-bound: {_pct(share)} of each {_ms(run.step_s)} step waits for data (the same model on in-memory data "
            f"takes {_ms(evidence.model_only_step_s)}; >= {_pct(INPUT_HIGH_SHARE)} is highly input-bound)."
        )
    elif not measured and share >= INPUT_PACE_SHARE:
        text = (
            f"Input-bound: the input pipeline alone delivers a batch every {_ms(evidence.pipeline_s)}, "
            f"{_pct(share)} of the {_ms(run.step_s)} step: the data, not the model, sets the pace."
        )
    else:
        return None
    return Bound.INPUT, text, INPUT_ADVICE


def larger_batch_faster(run: Point, other: Point) -> bool:
    """True when the larger of the two batches gave more samples/s beyond noise (by the medians when there is no interval)."""
    if other.gain is None:
        return True  # a run recorded without its per-call timings: the step-time fit alone decides, as it always did
    bigger_is_other = other.batch_size > run.batch_size
    return other.gain.beyond_noise and (other.gain.ratio > 1) == bigger_is_other


def more_calls_faster(other: Point) -> bool:
    """True when the run with more steps per call was faster beyond noise (by the medians when there is no interval)."""
    return other.gain is None or (other.gain.beyond_noise and other.gain.ratio > 1)


def _overhead_rule(evidence: Evidence, pct: float | None) -> tuple[Bound, str, str] | None:
    run = evidence.run
    assert run is not None
    fixed = fixed_share(run, evidence.other_batches)
    calls = call_share(run, evidence.other_calls)
    fixed_hit = fixed is not None and fixed[0] >= OVERHEAD_FIXED_SHARE and larger_batch_faster(run, fixed[1])
    calls_gain = calls is not None and more_calls_faster(calls[1])
    calls_hit = calls is not None and calls[0] >= OVERHEAD_CALL_SHARE and calls_gain
    if not (fixed_hit or calls_hit):
        return None
    text = "Overhead-bound: " + "; ".join(_overhead_parts(run, fixed, calls)) + "."
    if calls_hit:
        assert calls is not None
        advice = f"Raise steps per call (to {calls[1].steps_per_call} or more), then the batch if the learning problem allows."
    elif calls_gain:
        advice = (
            "Raise the batch (with the learning rate scaled to it), or steps per call: each step costs nearly the same whatever its size."
        )
    else:
        advice = "Raise the batch (with the learning rate scaled to it): each step costs nearly the same whatever its size."
    return Bound.OVERHEAD, text, advice


def _overhead_parts(run: Point, fixed: tuple[float, Point] | None, calls: tuple[float, Point] | None) -> list[str]:
    parts = []
    if fixed is not None:
        share, other = fixed
        whole = "all of the step is a fixed cost" if share >= 0.995 else f"{_pct(share)} of the step is a fixed cost"
        parts.append(
            f"a step takes {_ms(run.step_s)} at batch {run.batch_size} and {_ms(other.step_s)} at batch {other.batch_size}: "
            f"{whole} that does not grow with the batch{_gain_text(other)}"
        )
    if calls is not None:
        share, other = calls
        paid = f"{_pct(share)} of the step is paid once per call" if more_calls_faster(other) else "no faster beyond noise"
        parts.append(f"with {other.steps_per_call} steps per call a step takes {_ms(other.step_s)} instead of {_ms(run.step_s)}: {paid}")
        parts[-1] += _gain_text(other)
    return parts


def _gain_text(other: Point) -> str:
    return f" (samples/s {other.gain.text()})" if other.gain is not None else ""


def _compute_rule(evidence: Evidence, pct: float | None) -> tuple[Bound, str, str] | None:
    if pct is None or pct < 100 * COMPUTE_SHARE:
        return None
    return Bound.COMPUTE, f"Compute-bound (>= {_pct(COMPUTE_SHARE)} of the measured ceiling).", _compute_advice(evidence)


def _compute_advice(evidence: Evidence) -> str:
    tries = []
    current = evidence.ceilings_by_precision.get(run_precision_key(evidence.precision))
    bf16 = evidence.ceilings_by_precision.get("bfloat16")
    if evidence.precision != "bfloat16" and current and bf16 and bf16 >= BETTER_PRECISION_GAIN * current:
        tries.append(f"bfloat16 (its matmul measures {bf16 / current:.1f}x {run_precision_key(evidence.precision)}'s here)")
    tries.append("a device with a higher measured ceiling")
    advice = "The device is the limit: try " + ", ".join(tries) + "."
    if not evidence.xla:
        advice += " Not measured here: try XLA (it fuses the small ops around the matrix products; on some CPUs it is slower)."
    return advice


def _unknown_text(evidence: Evidence) -> str:
    run = evidence.run
    assert run is not None
    known = []
    fixed = fixed_share(run, evidence.other_batches)
    if fixed is not None:
        known.append(f"{_pct(fixed[0])} of the step is a fixed cost")
    calls = call_share(run, evidence.other_calls)
    if calls is not None:
        known.append(f"{_pct(calls[0])} is paid once per call")
    wait = input_wait(evidence)
    if wait is not None:
        known.append(f"{'' if wait[1] else 'at most '}{_pct(wait[0])} waits for input")
    if not known:
        return "No limit identified: nothing beyond the run itself was measured."
    return "No single limit: " + ", ".join(known) + "."


def _unknown_advice(evidence: Evidence) -> str:
    if evidence.ceiling_flops is None:
        return "Measure this device's ceilings (Devices tab, or main.py peaks) and profile this run to see which ops take the time."
    return (
        "Profile this run to see which ops take the time. Not measured here: try XLA when many small ops "
        "(not the matrix products) dominate."
    )


def _side_notes(evidence: Evidence, bound: Bound) -> list[str]:
    wait = input_wait(evidence)
    if bound is Bound.INPUT or wait is None or wait[0] < INPUT_MODERATE_SHARE:
        return []
    if wait[1]:
        return [f"{_pct(wait[0])} of the step waits for input: moderately input-bound."]
    return [f"The input pipeline alone needs {_pct(wait[0])} of the step's time: up to that share may be waiting for input."]


def _flops_text(evidence: Evidence, achieved: float, pct: float | None) -> str:
    text = f"Achieved {format_si(achieved, 'FLOP/s')}"
    if pct is not None:
        text += f", {_pct(pct / 100)} of the ceiling of {format_si(evidence.ceiling_flops, 'FLOP/s')} ({evidence.ceiling_how})"
    else:
        text += f" (no measured ceiling: {evidence.ceiling_how or 'not measured'})"
    if pct is not None and pct > 100:
        text += " (above it: this model's kernels beat the large-matrix rate, or the FLOP count is off)"
    if evidence.estimate_flops:
        text += f"; the datasheet/ISA estimate is {format_si(evidence.estimate_flops, 'FLOP/s')}"
    return text + "."


def _too_small_for_gpu(evidence: Evidence) -> bool:
    if evidence.device_kind != "GPU" or evidence.run is None:
        return False
    small_model = evidence.model_params is not None and evidence.model_params < SMALL_MODEL_PARAMS
    return small_model or evidence.run.step_s * 1e3 < SMALL_GPU_STEP_MS


def _small_gpu_text(evidence: Evidence) -> str:
    run = evidence.run
    assert run is not None
    size = f"{evidence.model_params:,} parameters, " if evidence.model_params is not None else ""
    return (
        f"The model is too small to load a GPU ({size}{_ms(run.step_s)} per step): "
        "a larger model or batch would use it, and this one may run as fast on the CPU."
    )


def _ms(seconds: float | None) -> str:
    return f"{format_value(None if seconds is None else seconds * 1e3, 'ms', 'n/a')} ms"


def _pct(share: float) -> str:
    return format_value(share, "percent")
