"""A run's verdict, % of peak, memory estimate and conditions in words: the same text in the CLI, the window and the tables.

Reads only a finished `RunResult` (no hardware, no TensorFlow), so the GUI
thread may call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.diagnosis.verdict import COMPUTE_SHARE
from core.formatting import format_bytes, format_si, format_value
from core.machine.peak_estimates import recorded_peak_flops
from core.results import RunResult

MEMORY_PARTS = (("weight_bytes", "weights"), ("gradient_bytes", "gradients"), ("optimizer_bytes", "optimizer state"))


def measured_ceiling(result: RunResult) -> float | None:
    """The measured FLOP/s ceiling the run was judged against (achieved / % of it), or None."""
    return result.measured_peak_flops


def estimate_share(result: RunResult) -> tuple[float | None, float | None]:
    """(the datasheet/ISA estimate the run recorded for its devices, achieved FLOP/s as a fraction of it); None where unknown."""
    estimate, _ = recorded_peak_flops(result.environment)
    share = result.achieved_flops / estimate if result.achieved_flops is not None and estimate else None
    return estimate, share


def peak_text(result: RunResult) -> str:
    """'6% of the measured 26.7 GFLOP/s ceiling (datasheet/ISA estimate 157 GFLOP/s: 1%)', or why there is no figure.

    The ceilings are measured with TensorFlow's matmul: a run on another backend says so ("of TensorFlow's measured …").
    """
    estimate, share = estimate_share(result)
    beside = f"datasheet/ISA estimate {format_si(estimate, 'FLOP/s')}: {format_value(share, 'fraction')}" if estimate else ""
    ceiling = measured_ceiling(result)
    if ceiling is None:
        text = "no measured ceiling" if result.achieved_flops is not None else "FLOP/s unknown"
        return f"{text} ({beside})" if beside else text
    bound = "at least " if result.flops_uncounted else ""
    measured = "the measured" if result.backend == "tensorflow" else "TensorFlow's measured"
    text = f"{bound}{format_value(result.pct_of_measured_peak, 'pct')} of {measured} {format_si(ceiling, 'FLOP/s')} ceiling"
    text = f"{text} ({beside})" if beside else text
    return f"{text}; FLOPs partial: {', '.join(result.flops_uncounted)} not counted" if result.flops_uncounted else text


def share_of_peak_note(fraction: float | None) -> str:
    """Achieved FLOP/s as a share of a peak, in words, with the verdict's threshold (`COMPUTE_SHARE`): the one reading of it."""
    if fraction is None:
        return "peak unknown for this device"
    if fraction > 1.0:
        return "above the peak: the peak or the FLOP count is off for this device"
    if fraction >= COMPUTE_SHARE:
        return f"at least {COMPUTE_SHARE:.0%} of the peak: compute-bound by the verdict's rule"
    return f"under {COMPUTE_SHARE:.0%} of the peak: not compute-bound; the run's verdict says what limits it"


def memory_estimate_text(estimate: Mapping[str, Any]) -> str:
    """'796 KiB (weights 199 KiB + gradients 199 KiB + optimizer state 397 KiB)', '' without an estimate."""
    if not estimate or estimate.get("total_bytes") is None:
        return ""
    parts = " + ".join(f"{label} {format_bytes(estimate.get(key))}" for key, label in MEMORY_PARTS if estimate.get(key) is not None)
    return f"{format_bytes(estimate['total_bytes'])} ({parts})" if parts else format_bytes(estimate["total_bytes"])


def verdict_line(result: RunResult) -> str:
    """'overhead-bound: <evidence> Advice: <advice>' for tooltips and exports; '' for a run without a verdict."""
    if not result.bound:
        return ""
    head = "no single limit found" if result.bound == "unknown" else f"{result.bound}-bound"
    advice = f" Advice: {result.advice}" if result.advice else ""
    return f"{head}: {result.bound_evidence}{advice}"


def conditions_text(conditions: Mapping[str, Any]) -> str:
    """'Conditions (steady state, 4.1 s): other processes 63% of the CPU · steal 0% · CPU pressure 71% · load 5.8 · 2,300 MHz'."""
    if not conditions:
        return ""
    parts = []
    for key, words in (
        ("other_cpu_share", "other processes {} of the CPU"),
        ("steal_share", "steal {}"),
        ("cpu_pressure", "CPU pressure {}"),
    ):
        if conditions.get(key) is not None:
            parts.append(words.format(format_value(conditions[key], "percent")))
    if conditions.get("load_average"):
        parts.append(f"load {conditions['load_average'][0]:g}")
    if conditions.get("cpu_mhz"):
        parts.append(f"{conditions['cpu_mhz']:,.0f} MHz")
    for gpu in conditions.get("gpus") or ():
        throttled = ", ".join(gpu.get("throttle_reasons") or ()) or "not throttled"
        parts.append(
            f"{gpu.get('device')}: {len(gpu.get('other_processes') or ())} other process(es), SM {gpu.get('sm_clock_mhz')} MHz, {throttled}"
        )
    window = f" ({conditions.get('window')}, {conditions.get('window_s')} s)" if conditions.get("window") else ""
    return f"Conditions{window}: " + " · ".join(parts)
