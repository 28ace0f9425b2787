"""The energy of a run's steady window: joules, joules per sample and mean watts, from the counters its devices keep.

`EnergyHook` is a hook every run carries (`core.jobs.run_job` adds it). At the run's
start it finds the counters of the run's devices (`core.machine.energy`): NVML's
total energy of each GPU the run uses, else the CPU packages' and DRAM's powercap
zones. The window opens with the first steady steps, as the run's time does
(the warm-up apart), and each reading credits the steady steps that ended since the
one before. Readings are at most every READ_EVERY_S, so a run of tiny calls pays
no read per call. In interleaved rounds the round's gate tells the hook as each turn
ends (a reading credits the turn's last steps) and begins (a reading restarts the
window), so another job's turn is never counted; each round's joules per sample is
kept (`rounds_joules_per_sample`, over the gate's spans) for an interval over rounds. The result carries `energy` (joules, samples, seconds, watts, joules per
sample, samples per joule, the counters and what they cover) and the figure
`joules_per_sample`, or `energy` None and `energy_reason`: no counter, a counter that
did not advance or went back, or a window too short to read.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from core.machine.energy import EnergyCounter, Reading, gpu_counters, joules_between, powercap_counters, read_all
from core.results import RunResult, StepRecord
from core.training.hooks import RunContext, RunHook

READ_EVERY_S = 0.05
"""Between two readings at least: RAPL updates about every millisecond, NVML's energy every few; a read costs tens of µs."""

CountersFor = Callable[[Sequence[str]], tuple[list[EnergyCounter], str]]


def run_counters(device_names: Sequence[str]) -> tuple[list[EnergyCounter], str]:
    """The counters of a run on `device_names`: its GPUs' through NVML where it uses a GPU, else the CPU's powercap zones."""
    if any(name.startswith("GPU") for name in device_names):
        from core.machine.gpu import load_nvml, run_gpu_handles

        nvml, problem = load_nvml()
        if nvml is None:
            return [], f"no GPU energy counter: {problem}"
        handles = run_gpu_handles(nvml, device_names)
        if not handles:
            return [], "no GPU energy counter: the run's GPUs were not found through NVML"
        return gpu_counters(nvml, handles)
    if any(name.startswith("TPU") for name in device_names):
        return [], "no energy counter: a TPU reports none to this app"
    return powercap_counters()


def energy_unavailable(device_names: Sequence[str]) -> str:
    """Why a job on `device_names` would measure no energy ("" where a counter can be read): an energy objective is refused on it."""
    counters, reason = run_counters(device_names)
    return "" if counters else reason or "no energy counter"


class EnergyHook(RunHook):
    """Measures the joules of the run's steady window; in interleaved rounds `in_rounds` (the gate tells it each turn's end and start)."""

    def __init__(self, in_rounds: bool = False, counters_for: CountersFor = run_counters) -> None:
        self.in_rounds, self._counters_for = in_rounds, counters_for
        self.counters: list[EnergyCounter] = []
        self.reason = ""
        self._batch = 0
        self._last: Reading | None = None  # the reading the next interval starts from
        self._pending_steps = 0  # steady steps ended since the last reading
        self._joules, self._seconds, self._steps = 0.0, 0.0, 0
        self._marks: list[tuple[int, float]] = [(0, 0.0)]  # (last step credited, joules credited up to it)
        self._step = 0  # the last step heard of
        self._failure = ""

    def on_run_start(self, context: RunContext) -> None:
        try:
            self.counters, self.reason = self._counters_for(context.device_names)
        except Exception as exc:  # a counter is instrumentation: never the reason a run fails
            self.counters, self.reason = [], f"the energy counters could not be read ({type(exc).__name__}: {exc})"
        self._batch = context.config.batch_size

    def turn_ended(self) -> None:
        """The run's turn is over (it is about to wait): its last steps are credited now."""
        if self.counters and self._last is not None and self._pending_steps and not self._failure:
            self._credit()

    def turn_began(self) -> None:
        """A turn begins: what ran meanwhile (another job's turn) is not this run's; the window goes on from here."""
        if self.counters and self._last is not None and not self._failure:
            self._read()
            self._pending_steps = 0

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        if not self.counters or self._failure:
            return
        steady = sum(1 for record in records if not record.warmup)
        if not steady:
            return
        self._step = records[-1].step
        if self._last is None:
            self._read()  # the window opens here: these steps ended before it, they are not counted
            return
        self._pending_steps += steady
        if time.perf_counter() - self._last.at >= READ_EVERY_S:
            self._credit()

    def amend_result(self, result: RunResult) -> RunResult:
        if self.counters and self._last is not None and self._pending_steps and not self._failure:
            self._credit()  # the steps since the last reading end the window
        energy, reason = self._figures()
        if energy is not None and self.in_rounds and result.rounds.get("spans"):
            energy["rounds_joules_per_sample"] = self._per_round(result.rounds["spans"])
        joules_per_sample = energy["joules_per_sample"] if energy else None
        return replace(result, energy=energy, energy_reason=reason, joules_per_sample=joules_per_sample)

    def _read(self) -> Reading | None:
        try:
            self._last = read_all(self.counters)
        except Exception as exc:
            self._failure = f"an energy counter could not be read during the run ({type(exc).__name__}: {exc})"
            return None
        return self._last

    def _credit(self) -> None:
        start = self._last
        end = self._read()
        if start is None or end is None:
            return
        joules, why = joules_between(self.counters, start, end)
        if joules is None:
            self._failure = why
            return
        self._joules += joules
        self._seconds += end.at - start.at
        self._steps += self._pending_steps
        self._pending_steps = 0
        self._marks.append((self._step, self._joules))

    def _per_round(self, spans: Sequence[Sequence[int]]) -> list[float | None]:
        """Joules per sample of each round's span of steps (the gate's `rounds["spans"]`), None where nothing was credited."""
        steps = [step for step, _ in self._marks]

        def credited_by(step: int) -> float:
            return self._marks[bisect.bisect_right(steps, step) - 1][1]

        per_round: list[float | None] = []
        for first, last in spans:
            joules = credited_by(last) - credited_by(first - 1)
            samples = (last - first + 1) * self._batch
            per_round.append(joules / samples if joules > 0 and samples > 0 else None)
        return per_round

    def _figures(self) -> tuple[dict[str, Any] | None, str]:
        if not self.counters:
            return None, self.reason or "no energy counter"
        if self._failure:
            return None, self._failure
        if not self._steps:
            return None, "the steady window was too short to read the energy counter twice (run more steps)"
        if self._joules <= 0:
            names = ", ".join(counter.name for counter in self.counters)
            return None, f"the energy counter did not advance over the steady window's {self._seconds:.2f} s ({names})"
        samples = self._steps * self._batch
        return {
            "joules": self._joules,
            "samples": samples,
            "seconds": self._seconds,
            "watts": self._joules / self._seconds if self._seconds > 0 else None,
            "joules_per_sample": self._joules / samples,
            "samples_per_joule": samples / self._joules,
            "counters": [counter.name for counter in self.counters],
            "covers": _covers(self.counters),
        }, ""


def _covers(counters: Sequence[EnergyCounter]) -> str:
    """What the counters measure, in words (a CPU package counts every process on it)."""
    kinds = {counter.kind for counter in counters}
    if kinds == {"GPU"}:
        return "the run's GPUs (their whole boards)"
    return "the CPU packages" + (" and DRAM" if "DRAM" in kinds else "") + ": every process on them, not only this run"


def energy_text(result: RunResult) -> str:
    """One line: "energy: 0.41 mJ/sample (2,431 samples/J, 38 W, the CPU packages …)" or "energy: not measured (why)"."""
    energy = result.energy
    if not energy:
        return f"energy: not measured ({result.energy_reason or 'no counter'})"
    watts = f", {energy['watts']:.0f} W" if energy.get("watts") else ""
    return f"energy: {energy['joules_per_sample'] * 1000:.3g} mJ/sample ({energy['samples_per_joule']:,.0f} samples/J{watts}; {energy['covers']})"
