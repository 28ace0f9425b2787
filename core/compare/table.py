"""A comparison's rows side by side: speed-ups against a baseline, fairness warnings, the CLI table.

Everything here only reads finished results (no hardware, no TensorFlow), so
the GUI thread may build and re-baseline comparisons. "% of peak" is against
the measured ceiling of the row's devices for its precision (the ceilings this
process knows, `core.diagnosis.ceilings.known_peaks`, unless given); the
datasheet/ISA estimate the run recorded while it ran
(`core.machine.peak_estimates.run_peak_environment`) is kept beside it.

Every row that ran has a verdict: its run's own when it has one (`main.py
run` and the window diagnose each run), else one judged here from the compared
runs themselves and the ceilings, with no probe runs (runs of the same job at
another batch size or steps per call, e.g. picked from the history, are
evidence about each other).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from core.compare.significance import (
    ONE_ROUND,
    ONE_ROUND_MARK,
    contended_label,
    interval_cell,
    interval_source,
    noise_reason,
    noise_warnings,
    speedup_interval,
)
from core.config import LEARNING_SETTINGS, ConfigError, RunConfig, hooks_in_words, recorded_hooks, same_settings
from core.diagnosis.ceilings import known_peaks
from core.diagnosis.evidence import NOT_MEASURED, device_names, evidence_from_runs
from core.diagnosis.readout import measured_ceiling
from core.diagnosis.verdict import verdict
from core.formatting import format_value
from core.jobs.rounds import rounds_measured
from core.machine.peak_estimates import recorded_native_bfloat16, recorded_peak_flops
from core.machine.peaks import PeaksReport
from core.results import FIGURES, FIGURES_BY_NAME, RunResult, RunStatus
from core.training.noise import energy_ratio
from core.training.to_target import TargetDecision, decide, target_how, to_target_text

SMALL_GPU_STEP_MS = 1.0
SMALL_MODEL_PARAMS = 1_000_000
SPREAD_LIMIT = 0.3
MIN_STEADY_TIMINGS = 20
EFFICIENCY_NOISE = 0.05
"""Scaling efficiency above 100% by more than this share is flagged: within it, it is timing noise."""
NO_PROBES_NOTE = "(A comparison makes no probe runs: `main.py run` of this target alone gives the overhead and input evidence.)"
JOB_KEYS = ("model", "dataset", "batch_size", "steps", "epochs", "precision", "xla", "steps_per_call", "optimizer", "learning_rate", "seed")


@dataclass(frozen=True)
class CompareRow:
    """One target's run, with its speed-up against the comparison's baseline.

    The run's headline figures are read from `result` by their `FIGURES`
    names (`row.samples_per_s`, `row.step_time_median_ms`, ...).
    speedup = samples/s of this row / samples/s of the baseline row.
    scaling_efficiency = speedup / (replicas / baseline replicas): 1.0 means
    N replicas ran N times as fast as the baseline's. It is given only when
    the row and the baseline ran on the same kind of device (CPU vs CPU, GPU
    vs GPU) with the same backend; across kinds or backends it would not
    measure scaling. Both are None when
    either row has no steady-state speed. `peak_flops` is the measured
    ceiling of the row's devices for its precision, `estimate_flops` the
    datasheet/ISA estimate the run recorded; each fraction is achieved FLOP/s
    over it, None when the FLOPs per step or the ceiling are unknown.
    `result` is the run with its verdict (its own, or the comparison's).
    `speedup_ci` is the speed-up's 95% interval from the interleaved rounds
    (never narrower than the one from the per-call timings), `beyond_noise`
    False when it holds 1 or the runs shared fewer than two rounds (None: no
    interval, or the baseline). `rounds` is how many rounds the run measured.
    With fewer than two shared rounds (`interval_rounds` 1) `speedup_ci` is
    the calls' own interval, which may exclude 1 while `beyond_noise` is False:
    `speedup_ci_from` and `beyond_noise_reason` in `to_rows_dict` say so.
    """

    label: str
    strategy: str
    devices: tuple[str, ...]
    replicas: int
    status: RunStatus
    speedup: float | None
    scaling_efficiency: float | None
    achieved_flops: float | None
    peak_flops: float | None
    fraction_of_peak: float | None
    peak_flops_how: str
    estimate_flops: float | None
    fraction_of_estimate: float | None
    estimate_how: str
    result: RunResult = field(compare=False, repr=False)
    speedup_ci: tuple[float, float] | None = None
    beyond_noise: bool | None = None
    interval_rounds: int | None = None  # the rounds the interval comes from: 1, runs one after another; None, no interval

    @property
    def rounds(self) -> int:
        return rounds_measured(self.result)

    def __getattr__(self, name: str) -> Any:
        """A headline figure of the row's run, by its `FIGURES` name."""
        if name in FIGURES_BY_NAME:
            return getattr(self.result, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def device_kinds(self) -> frozenset[str]:
        return frozenset(d.split(":")[0] for d in self.devices)


@dataclass(frozen=True)
class SamplesToTarget:
    """The samples one compared run needed to reach the comparison's target loss (smoothed), and which run it was."""

    samples: int
    target_loss: float
    label: str


@dataclass(frozen=True)
class Comparison:
    """Rows in target order, the baseline row's index, and fairness warnings in plain words."""

    rows: tuple[CompareRow, ...]
    baseline_index: int = 0
    warnings: tuple[str, ...] = ()
    flops_per_step: float | None = None
    flops_method: str = ""
    model_params: int | None = None
    target_loss: float | None = None  # given (--target-loss); None: the rows' common target

    @property
    def baseline(self) -> CompareRow | None:
        return self.rows[self.baseline_index] if self.rows else None

    def with_baseline(self, index: int) -> Comparison:
        """The same runs with speed-ups against row `index` (nothing is re-run)."""
        check_baseline(index, len(self.rows))
        changed = replace(self, rows=_with_speedups(self.rows, index), baseline_index=index)
        return replace(changed, warnings=tuple(fairness_warnings(changed)))

    def target_decision(self) -> TargetDecision:
        """The rows' target loss, each row's judged time to it, and whether that time compares them (`core.training.to_target.decide`)."""
        return decide([row.result for row in self.rows], self.target_loss, [row.label for row in self.rows])

    def samples_to_target(self, config: RunConfig) -> SamplesToTarget | None:
        """The samples a row needed to reach the rows' target loss, where one ran `config`'s training (LEARNING_SETTINGS) and the
        target decides (`target_decision`): the baseline's, else the first such row's; None otherwise."""
        decision = self.target_decision()
        if not decision.decides or decision.target_loss is None:
            return None
        order = [self.baseline_index, *(index for index in range(len(self.rows)) if index != self.baseline_index)]
        for index in order:
            row, reached = self.rows[index], decision.reached[index]
            if reached.samples is not None and not reached.in_warmup and same_settings(row.result.config, config, LEARNING_SETTINGS):
                return SamplesToTarget(reached.samples, decision.target_loss, row.label)
        return None

    def common_target(self) -> float | None:
        """The loss the rows are timed to: the given one, else the highest smoothed final loss of the rows whose loss fell beyond noise."""
        return self.target_decision().target_loss

    def to_rows_dict(self) -> list[dict[str, Any]]:
        """JSON-ready rows: the run's summary plus the comparison's own figures (speed-up, time to the target loss, FLOP/s).

        `time_to_target_speedup` is None where time to the target decides nothing (`target_decides` False, the reason
        in `target_undecided` and `target_undecided_why`).
        """
        decision = self.target_decision()
        reached = list(decision.reached)
        base = reached[self.baseline_index] if reached and decision.decides else None
        return [
            {
                **row.result.summary(),
                "label": row.label,
                "baseline": index == self.baseline_index,
                "speedup": row.speedup,
                "speedup_ci": list(row.speedup_ci) if row.speedup_ci else None,
                "beyond_noise": row.beyond_noise,
                "beyond_noise_reason": noise_reason(row),
                "speedup_ci_from": interval_source(row),
                "rounds": row.rounds,
                "interval_rounds": row.interval_rounds,
                "round_order_seed": row.result.rounds.get("seed"),
                "contended": row.result.contended,
                "scaling_efficiency": row.scaling_efficiency,
                "flops_per_step": self.flops_per_step,
                "achieved_flops": row.achieved_flops,
                "peak_flops": row.peak_flops,
                "fraction_of_peak": row.fraction_of_peak,
                "peak_flops_how": row.peak_flops_how,
                "estimate_flops": row.estimate_flops,
                "fraction_of_estimate": row.fraction_of_estimate,
                "estimate_how": row.estimate_how,
                **reached[index].to_dict(),
                "target_how": target_how(self.target_loss),
                **decision.to_dict(),
                "time_to_target_speedup": _ratio(base.seconds if base else None, reached[index].seconds),
                "samples_to_target_ratio": _ratio(reached[index].samples, base.samples if base else None),
                **self.energy_figures(index, reached[index].samples),
            }
            for index, row in enumerate(self.rows)
        ]

    def energy_figures(self, index: int, samples_to_target: int | None = None) -> dict[str, Any]:
        """Row `index`'s energy beside the baseline's: samples per joule, joules per sample over the baseline's with its
        95% interval from the rounds (`energy_ratio_ci`; below 1 uses less), and joules to the target loss."""
        result = self.rows[index].result
        energy = result.energy or {}
        base = self.rows[self.baseline_index].result
        interval = energy_ratio(base, result) if index != self.baseline_index and energy and base.energy else None
        joules_per_sample = energy.get("joules_per_sample")
        return {
            "samples_per_joule": energy.get("samples_per_joule"),
            "energy_ratio": _ratio(joules_per_sample, (base.energy or {}).get("joules_per_sample")) if energy else None,
            "energy_ratio_ci": interval.to_list() if interval else None,
            "energy_beyond_noise": interval.beyond_noise if interval else None,
            "joules_to_target": joules_per_sample * samples_to_target if joules_per_sample and samples_to_target else None,
        }


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def compare_results(
    entries: Sequence[tuple[str, RunResult]],
    baseline_index: int = 0,
    flops_per_step: float | None = None,
    flops_method: str = "",
    model_params: int | None = None,
    peaks: PeaksReport | None = None,
) -> Comparison:
    """A comparison of finished runs (labelled), e.g. picked from the history; reads nothing but the results.

    `peaks`: the measured ceilings to judge the rows against; by default the
    ones this process has loaded or measured (`known_peaks`), none if it has not.
    Without `flops_per_step`, the FLOPs per step the runs recorded are used, so
    runs compared from the history show the FLOP/s they showed live.
    """
    check_baseline(baseline_index, len(entries))
    peaks = peaks if peaks is not None else known_peaks()
    results = [result for _, result in entries]
    recorded = {result.flops_per_step for result in results if result.flops_per_step is not None}
    if flops_per_step is None and len(recorded) == 1:  # runs from the history, or on another backend: the FLOPs they recorded
        methods = {result.flops_method for result in results if result.flops_per_step is not None and result.flops_method}
        flops_per_step, flops_method = recorded.pop(), methods.pop() if len(methods) == 1 else "as the runs recorded them"
    rows = tuple(_row(label, _judged(result, results, flops_per_step, model_params, peaks), peaks) for label, result in entries)
    flops_method = flops_method + _own_counts(entries, flops_per_step)
    comparison = Comparison(_with_speedups(rows, baseline_index), baseline_index, (), flops_per_step, flops_method, model_params)
    return replace(comparison, warnings=tuple(fairness_warnings(comparison)))


def _own_counts(entries: Sequence[tuple[str, RunResult]], flops_per_step: float | None) -> str:
    """'; jax:CPU:0 counted its own: 1.8e+07 (XLA's cost analysis …)' for each row judged by a count other than the comparison's.

    The counter is named without its parenthesised details: the line sits above the table, in a narrow window too.
    """
    return "".join(
        f"; {label} counted its own: {result.flops_per_step:.3g} ({(result.flops_method or 'as the run recorded them').split(' (')[0]})"
        for label, result in entries
        if result.flops_per_step is not None and flops_per_step is not None and result.flops_per_step != flops_per_step
    )


def check_baseline(index: int, count: int) -> None:
    """Raise ConfigError unless `index` is a row number of `count` rows."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < max(count, 1):
        raise ConfigError("baseline", index, f"a row number from 0 to {max(count - 1, 0)}")


def _judged(
    result: RunResult, results: Sequence[RunResult], flops_per_step: float | None, model_params: int | None, peaks: PeaksReport | None
) -> RunResult:
    """The run with a verdict: its own, else one from the compared runs and the ceilings (no probe runs); as it is without steady state.

    A run that counted its own FLOPs (a JAX run: XLA's count of its own step) is judged by them, so its row
    shows the FLOP/s the run shows on its own; `flops_per_step` serves the runs that counted none.
    """
    if result.bound or result.samples_per_s is None:
        return result
    others = [other for other in results if other is not result]
    own = result.flops_per_step if result.flops_per_step is not None else flops_per_step
    evidence = evidence_from_runs(result, others, flops_per_step=own, model_params=model_params, peaks=peaks)
    found = verdict(evidence).to_dict()
    if found["bound"] == "unknown":
        found["bound_evidence"] = f"{found['bound_evidence']} {NO_PROBES_NOTE}"
    return replace(result, **found)


def _row(label: str, result: RunResult, peaks: PeaksReport | None) -> CompareRow:
    achieved = result.achieved_flops
    ceiling = measured_ceiling(result)
    estimate, estimate_how = recorded_peak_flops(result.environment) if result.samples_per_s else (None, "no steady-state steps")
    return CompareRow(
        label=label,
        strategy=str(result.config.get("strategy", "")),
        devices=tuple(result.environment.get("devices") or result.config.get("devices") or ()),
        replicas=result.replicas,
        status=result.status,
        speedup=None,
        scaling_efficiency=None,
        achieved_flops=achieved,
        peak_flops=ceiling,
        fraction_of_peak=achieved / ceiling if achieved is not None and ceiling else None,
        peak_flops_how=_ceiling_how(result, peaks),
        estimate_flops=estimate,
        fraction_of_estimate=achieved / estimate if achieved is not None and estimate else None,
        estimate_how=estimate_how,
        result=result,
    )


def _ceiling_how(result: RunResult, peaks: PeaksReport | None) -> str:
    """How the row's measured ceiling was found ("measured float32 matmul on ..."), or why there is none."""
    if result.samples_per_s is None:
        return "no steady-state steps"
    how = peaks.ceiling(device_names(result), str(result.config.get("precision", "off")))[1] if peaks is not None else NOT_MEASURED
    return how if result.achieved_flops is not None else f"FLOPs per step not counted; {how}"


def _same_scaling_axis(row: CompareRow, base: CompareRow) -> bool:
    """Scaling efficiency means something only between runs on one kind of device with one backend."""
    return bool(row.device_kinds) and row.device_kinds == base.device_kinds and row.result.backend == base.result.backend


def _with_speedups(rows: Sequence[CompareRow], baseline_index: int) -> tuple[CompareRow, ...]:
    base = rows[baseline_index] if rows else None
    updated = []
    for row in rows:
        speedup = efficiency = interval = None
        if base is not None and row.samples_per_s and base.samples_per_s:
            speedup = row.samples_per_s / base.samples_per_s
            interval = speedup_interval(row.result, base.result)
            if _same_scaling_axis(row, base) and row.replicas and base.replicas:
                efficiency = speedup / (row.replicas / base.replicas)
        ci = (interval.low, interval.high) if interval is not None else None
        beyond = interval.beyond_noise if interval is not None else None
        shared = interval.rounds if interval is not None else None
        updated.append(
            replace(row, speedup=speedup, scaling_efficiency=efficiency, speedup_ci=ci, beyond_noise=beyond, interval_rounds=shared)
        )
    return tuple(updated)


def fairness_warnings(comparison: Comparison) -> list[str]:
    """What makes this comparison less fair than it looks, in words the user can act on."""
    notes: list[str] = []
    for row in comparison.rows:
        notes.extend(_row_warnings(row, comparison.model_params))
    notes.extend(_mismatch_warnings(comparison.rows))
    base = comparison.baseline
    notes.extend(_efficiency_warnings(comparison.rows, base))
    notes.extend(noise_warnings(comparison.rows, base))
    if base is not None and base.samples_per_s is None and len(comparison.rows) > 1:
        notes.append(f"The baseline {base.label} has no steady-state speed, so there are no speed-ups: pick another baseline.")
    return notes


def _row_warnings(row: CompareRow, model_params: int | None) -> list[str]:
    result, label = row.result, row.label
    if row.status == RunStatus.SKIPPED:
        return [f"{label} was not run: the comparison was stopped first."]
    if row.status == RunStatus.FAILED:
        return [f"{label} failed: {result.message or 'no reason recorded'}"]
    notes = []
    if row.status == RunStatus.STOPPED:
        planned = f" of {result.config['steps']}" if result.config.get("epochs") is None and result.config.get("steps") else ""
        notes.append(f"{label} stopped early, after {result.steps_done}{planned} steps: its figures rest on fewer steps than the others'.")
    elif row.status != RunStatus.COMPLETED:
        notes.append(f"{label} ended with status {row.status!r}: {result.message}")
    notes.extend(_precision_warnings(row))
    notes.extend(_small_gpu_warnings(row, model_params))
    if row.step_time_spread is not None and row.step_time_spread > SPREAD_LIMIT:
        notes.append(f"{label}: step times vary by {row.step_time_spread:.0%} (p10–p90 / median); re-run with more steps.")
    timings = _steady_timings(result)
    if row.samples_per_s is not None and timings < MIN_STEADY_TIMINGS:
        notes.append(
            f"{label}: only {timings} steady-state step timings after warm-up; use at least {MIN_STEADY_TIMINGS} "
            "(more steps, or fewer steps per call) for a stable median."
        )
    if row.strategy == "mirrored" and len(row.devices) > 1 and row.device_kinds == {"CPU"}:
        notes.append(
            f"{label}: its logical CPU devices share the same physical cores, so this row measures the strategy "
            "on one CPU, not more hardware: do not read its speed-up as multi-device scaling."
        )
    if row.strategy == "multi-worker" and not result.config.get("cluster_hosts") and row.device_kinds <= {"CPU"}:
        notes.append(
            f"{label}: its {row.replicas} worker processes run on this one machine and share the same physical cores, "
            "so this row measures the strategy on one CPU, not more hardware: do not read its speed-up as multi-device scaling."
        )
    return notes


def _efficiency_warnings(rows: Sequence[CompareRow], base: CompareRow | None) -> list[str]:
    """Scaling efficiency over 100%: never more hardware doing better than linear, but a baseline slowed by what the row does not pay."""
    if base is None:
        return []
    return [
        f"{row.label}: efficiency {format_value(row.scaling_efficiency, 'percent')} is over 100% against the baseline {base.label}: "
        f"per replica it ran faster than the baseline did. That is not better-than-linear scaling: the baseline's replicas "
        f"lose time this row does not (sharing the same cores, talking between processes, a fixed cost per step), so its "
        f"speed per replica is no yardstick. Read efficiency against a one-device baseline."
        for row in rows
        if over_linear(row, base)
    ]


def _precision_warnings(row: CompareRow) -> list[str]:
    """Half precision on a CPU that has no fast math for it."""
    if "CPU" not in row.device_kinds:
        return []
    precision = row.result.config.get("precision")
    if precision == "float16":
        return [
            f"{row.label} runs float16 on a CPU, which has no fast float16 math: this row is far slower than float32 "
            "and says little about the device."
        ]
    if precision == "bfloat16" and recorded_native_bfloat16(row.result.environment) is False:
        return [f"{row.label} runs bfloat16 on a CPU without AVX-512 BF16 or AMX: it is emulated, so this row understates the CPU."]
    return []


def _small_gpu_warnings(row: CompareRow, model_params: int | None) -> list[str]:
    """A model too small to keep a GPU busy, so per-step overhead sets the pace."""
    median_ms = row.step_time_median_ms
    if "GPU" not in row.device_kinds or median_ms is None:
        return []
    too_small = model_params is not None and model_params < SMALL_MODEL_PARAMS
    if median_ms >= SMALL_GPU_STEP_MS and not too_small:
        return []
    size = f"{model_params:,} parameters, " if model_params is not None else ""
    return [
        f"{row.label}: the {_model_title(row.result.config.get('model'))} is too small to load a GPU "
        f"({size}{median_ms:.2f} ms per step): per-step overhead dominates, so speed-ups "
        "understate the GPU. Try the ResNet or Transformer, or a larger batch."
    ]


def _model_title(name: Any) -> str:
    from core.workloads.models import MODELS

    return MODELS[name].title if name in MODELS else str(name or "model")


def _steady_timings(result: RunResult) -> int:
    """Independent step-time measurements after warm-up (one per call of the training function)."""
    per_call = max(1, int(result.config.get("steps_per_call") or 1))
    return math.ceil(max(0, result.steps_done - result.warmup_steps) / per_call)


def _mismatch_warnings(rows: Sequence[CompareRow]) -> list[str]:
    ran = [row.result for row in rows if row.status != RunStatus.SKIPPED]
    if len(ran) < 2:
        return []
    differing = []
    for key in JOB_KEYS:
        values = list(dict.fromkeys(str(result.config.get(key)) for result in ran))
        if len(values) > 1:
            differing.append(f"{key} ({', '.join(values)})")
    notes = []
    if differing:
        notes.append(f"The runs differ in {', '.join(differing)}: they are different jobs, so speed-ups mix the device with the job.")
    hooks = list(dict.fromkeys(_hooks_on(result) for result in ran))
    if len(hooks) > 1:
        notes.append(f"The runs differ in hooks ({'; '.join(hooks)}): logging and profiling take time from the run they watch.")
    hosts = list(dict.fromkeys(str(result.environment["host"]) for result in ran if result.environment.get("host")))
    if len(hosts) > 1:
        notes.append(f"The runs come from different machines ({', '.join(hosts)}).")
    return notes


def _hooks_on(result: RunResult) -> str:
    """The hooks a run had on, in words ('profiled 3-5, TensorBoard'; 'no hooks'), from its recorded config."""
    return hooks_in_words(recorded_hooks(result.config))


COLUMNS = ("target", "replicas", *(figure.title for figure in FIGURES), "speed-up", "95% interval", "rounds", "efficiency", "% of estimate")
"""The figures' "% of peak" is against the measured ceiling; "% of estimate" keeps the datasheet/ISA estimate beside it."""


def format_table(comparison: Comparison) -> str:
    """A plain-text table for the CLI, the baseline marked with '*', then the FLOPs per step and the ceilings used.

    One column per headline figure (`FIGURES`), between the comparison's own
    columns. Warnings are not part of the table: print `comparison.warnings` after it.
    """
    body = [_cells(row, comparison.baseline) for row in comparison.rows]
    widths = [max(len(line[i]) for line in [COLUMNS, *body]) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in enumerate(zip(line, widths, strict=True)))
        for line in [COLUMNS, *body]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines.append("* baseline for speed-ups; (noise): the speed-up's 95% interval holds 1, no difference beyond noise")
    if any(noise_reason(row) == ONE_ROUND for row in comparison.rows):
        lines.append(
            f"{ONE_ROUND_MARK}: measured one after another: the interval is the calls' own, and no difference is claimed across the runs"
        )
    lines.append("rounds: interleaved rounds each target was measured in; the interval comes from them (one round claims nothing)")
    if any(row.result.contended for row in comparison.rows):
        lines.append("(busy): measured while other processes used the machine: figures are low and noisy (see the warnings)")
    if comparison.flops_per_step is not None:
        lines.append(f"FLOPs per training step: {comparison.flops_per_step:.3g} ({comparison.flops_method})")
    lines.extend(ceiling_notes(comparison))
    lines.extend(target_lines(comparison))
    if any(over_linear(row, comparison.baseline) for row in comparison.rows):
        lines.append("! efficiency over 100%: not better-than-linear scaling (see the warnings)")
    return "\n".join(line.rstrip() for line in lines)


def target_lines(comparison: Comparison) -> list[str]:
    """Each row's time to the common target loss (from the first step, warm-up included), and how the target was chosen."""
    decision = comparison.target_decision()
    target = decision.target_loss
    if target is None:
        return []
    lines = [f"time to loss {target:.4g} ({target_how(comparison.target_loss)}):"]
    lines += [f"  {row.label}: {to_target_text(to)}" for row, to in zip(comparison.rows, decision.reached, strict=True)]
    if not decision.decides:
        lines.append(f"  time to the target compares nothing here: {decision.why}; compare the samples/s")
    return lines


def ceiling_notes(comparison: Comparison) -> list[str]:
    """What "% of peak" and "% of estimate" divide by, one line per distinct ceiling."""
    notes = [f"% of peak: {row.peak_flops_how}" for row in comparison.rows if row.status.ran]
    notes += [f"% of estimate: {row.estimate_how}" for row in comparison.rows if row.status.ran]
    return list(dict.fromkeys(notes))


def _cells(row: CompareRow, base: CompareRow | None) -> tuple[str, ...]:
    target = contended_label(row.label + (" *" if row is base else ""), row.result) + (
        "" if row.status == RunStatus.COMPLETED else f" [{row.status}]"
    )
    figures = row.result.figures()
    return (
        target,
        str(row.replicas) if row.status.ran else "-",
        *(figure.format(figures[figure.name]) for figure in FIGURES),
        format_value(row.speedup, "ratio"),
        interval_cell(row, row is base),
        str(row.rounds) if row.status.ran else "-",
        format_value(row.scaling_efficiency, "percent") + ("!" if over_linear(row, base) else ""),
        format_value(row.fraction_of_estimate, "fraction"),
    )


def over_linear(row: CompareRow, base: CompareRow | None) -> bool:
    """Efficiency over 100% (beyond noise) between different replica counts: a claim of better-than-linear scaling.

    With equal replica counts efficiency is the speed-up itself, and faster is no paradox.
    """
    over = row.scaling_efficiency is not None and row.scaling_efficiency > 1 + EFFICIENCY_NOISE
    return over and base is not None and row is not base and row.replicas != base.replicas
