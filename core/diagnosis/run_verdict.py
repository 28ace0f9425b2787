"""Every completed run gets its verdict: the diagnosis the CLI's `run` and the window's run both make after training.

`diagnose_run` judges a finished run against this machine's cached ceilings,
with the probe runs it needs (short, not recorded in the history: they exist
only as evidence, and the verdict names each one). The run's history record is
finished once the verdict is known: `HoldRunEnd` passes a recorder every hook
of the run but its end, which the caller delivers with the final result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from core.config import RunConfig
from core.diagnosis.ceilings import cached_peaks
from core.diagnosis.probes import diagnose
from core.diagnosis.verdict import Verdict
from core.machine.peaks import PeaksReport
from core.results import RunResult, RunStatus, StepRecord
from core.training.callbacks import RunCallback, RunContext
from core.training.flops import FlopsCounter

NO_PROBES = {
    "multi-worker": (
        "No probe runs for a multi-worker run (each would start its workers again): "
        "run the job on one device for the overhead and input evidence."
    ),
}
"""Strategies whose runs get no probe runs, and what the verdict says instead."""
STOPPED = "No verdict: stopped while diagnosing."


def with_verdict(result: RunResult, found: Verdict) -> RunResult:
    """`result` carrying the verdict's figures and words (bound, evidence, advice, achieved FLOP/s, % of measured peak)."""
    return replace(result, **found.to_dict())


def diagnose_run(
    config: RunConfig,
    result: RunResult,
    counter: FlopsCounter | None = None,
    stop_event: threading.Event | None = None,
    announce: Callable[[str], None] | None = None,
    peaks: PeaksReport | None = None,
) -> tuple[RunResult, list[RunResult]]:
    """The finished run with its verdict, and the probe runs made for it (none recorded anywhere).

    Only a completed run is judged; any other comes back as it is. `peaks`
    defaults to this machine's cached ceilings (never measured here: without
    them the verdict says how to measure them). Setting `stop_event` ends the
    probes after the call in flight and leaves the run without a verdict.
    Never raises: a diagnosis that fails says why in the run's warnings.
    """
    if result.status != RunStatus.COMPLETED:
        return result, []
    if stop_event is not None and stop_event.is_set():
        return _warned(result, STOPPED), []
    no_probes = NO_PROBES.get(config.strategy, "")
    try:
        known = peaks if peaks is not None else cached_peaks()
        found, probe_runs = diagnose(config, result, known, counter, stop_event, announce=announce, probe=not no_probes)
    except Exception as exc:  # a diagnosis must never cost the run its result
        return _warned(result, f"No verdict: the diagnosis failed ({type(exc).__name__}: {exc})."), []
    if stop_event is not None and stop_event.is_set():
        return _warned(result, STOPPED), probe_runs
    if no_probes:
        found = replace(found, bound_evidence=f"{found.bound_evidence} {no_probes}")
    return with_verdict(result, found), probe_runs


def _warned(result: RunResult, warning: str) -> RunResult:
    return replace(result, warnings=(*result.warnings, warning))


class HoldRunEnd(RunCallback):
    """Passes every hook of a run to `inner` except its end, which the caller delivers once the verdict is known."""

    def __init__(self, inner: RunCallback):
        self.inner = inner

    def on_run_start(self, context: RunContext) -> None:
        self.inner.on_run_start(context)

    def on_call_begin(self, first_step: int, steps: int) -> None:
        self.inner.on_call_begin(first_step, steps)

    def on_steps(self, records: Sequence[StepRecord]) -> None:
        self.inner.on_steps(records)
