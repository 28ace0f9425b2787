"""The conditions a run was measured in: `ConditionsHook`, one of the standard hooks every run carries.

Other processes' CPU share, steal, CPU pressure, load and frequency over the
steady state (after the warm-up call, to the end of the last call), and on GPUs
the other processes, clocks and throttle reasons (`core.machine.conditions`).
The result's warnings then say when the measurement was contended, and when
its step times were spread so widely that one figure cannot stand for them.
The job service gives every run one (`core.jobs.run_hooks`); a cluster worker
(`core.cluster.worker`) and a verdict's probe runs (`core.diagnosis.probes`),
which train without it, add their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from core.machine.conditions import ConditionsSampler, contention_warning, gpu_conditions, own_pids
from core.training.hooks import RunContext, RunHook
from core.training.metrics import noise_warning

if TYPE_CHECKING:
    from core.results import RunResult, StepRecord

FindGpus = Callable[[Any, Sequence[str]], list[tuple[str, Any]]]


def _run_gpus(device_names: Sequence[str]) -> tuple[Any, list[tuple[str, Any]]]:
    """(NVML, the run's GPUs as (TF name, handle)); (None, []) for a run on no GPU or with no driver."""
    if not any(name.startswith("GPU") for name in device_names):
        return None, []
    from core.machine.gpu import load_nvml, run_gpu_handles

    nvml, _ = load_nvml()
    return (nvml, run_gpu_handles(nvml, device_names)) if nvml is not None else (None, [])


class ConditionsHook(RunHook):
    """Snapshots the machine's counters at the run's start, after its warm-up call and after its last call."""

    def __init__(self, nvml: Any = None, find_gpus: FindGpus | None = None) -> None:
        self._nvml = nvml
        self._find_gpus = find_gpus
        self._sampler = ConditionsSampler()
        self._gpus: list[tuple[str, Any]] = []
        self._total_steps = 0

    def on_run_start(self, context: RunContext) -> None:
        self._total_steps = context.total_steps
        if self._find_gpus is not None:
            self._gpus = self._find_gpus(self._nvml, context.device_names)
        else:
            self._nvml, self._gpus = _run_gpus(context.device_names)
        self._sampler.start()

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        if not records:
            return
        if records[0].warmup:
            self._sampler.steady()
        elif records[-1].step >= self._total_steps:
            self._sampler.stop()

    def amend_result(self, result: RunResult) -> RunResult:
        if self._sampler.run_start is None:
            return result  # set-up failed: nothing was measured
        if self._sampler.end is self._sampler.steady_start or self._sampler.end is self._sampler.run_start:
            self._sampler.stop()  # stopped or failed before the last call
        gpus = gpu_conditions(self._nvml, self._gpus, own_pids()) if self._gpus else []
        conditions = self._sampler.conditions(gpus)
        if conditions is None:
            return result
        notes = [note for note in (contention_warning(conditions), noise_warning(result.step_time_spread)) if note]
        return replace(result, conditions=conditions.to_dict(), warnings=(*result.warnings, *notes))
