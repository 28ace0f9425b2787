"""Every completed run gets its verdict: the diagnosis the CLI's `run` and the window's run both make after training.

`diagnose_run` judges a finished run against this machine's cached ceilings,
with the probe runs it needs (short, not recorded in the history: they exist
only as evidence, and the verdict names each one). `VerdictHook` does it as a
run hook: it amends the completed run's result with its verdict before the run
ends, so whatever records the run's end records the verdict with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from core.config import RunConfig
from core.diagnosis.ceilings import cached_peaks
from core.diagnosis.probes import diagnose
from core.diagnosis.verdict import Verdict
from core.hooks.flops import FlopsCounter
from core.machine.peaks import PeaksReport
from core.results import RunResult, RunStatus
from core.training.hooks import RunContext, RunHook

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


class VerdictHook(RunHook):
    """Diagnoses a completed run as it ends: `amend_result` adds the verdict (short probe runs, not recorded).

    Counts the model's FLOPs when the run starts (for the achieved FLOP/s).
    `announce` hears "" as the diagnosis begins, then each step of it. A run
    that did not complete, or was stopped, is left as it is.
    """

    def __init__(self, config: RunConfig, stop_event: threading.Event, announce: Callable[[str], None] | None = None):
        self._config = config
        self._stop_event = stop_event
        self._announce = announce
        self.counter = FlopsCounter()

    def on_run_start(self, context: RunContext) -> None:
        self.counter.on_run_start(context)

    def amend_result(self, result: RunResult) -> RunResult:
        result = self.counter.amend_result(result)  # FLOPs per step recorded with the run (and a partial count said)
        if result.status != RunStatus.COMPLETED or self._stop_event.is_set():
            return result
        if self._announce is not None:
            self._announce("")
        diagnosed, _probes = diagnose_run(self._config, result, self.counter, self._stop_event, self._announce)
        return diagnosed
