"""What a run produces: step records while it trains, a `RunResult` when it ends.

A run's headline figures (samples/s, step times, warm-up, ...) are defined once,
as `RunResult` fields made with `figure(...)`: `FIGURES` lists them with their
label, unit and kind, and the JSON summary, the history's columns, the CLI and
GUI tables and the exports all read that list. A new figure is one such field
plus the code that computes it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any

from core.formatting import MISSING, format_value


class RunStatus(str, Enum):
    """How a run ended (or that it has not yet). Compares equal to its plain value ("completed")."""

    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value

    @property
    def ran(self) -> bool:
        """True when the run trained at all (its figures mean something)."""
        return self not in (RunStatus.FAILED, RunStatus.SKIPPED)


@dataclass(frozen=True)
class Figure:
    """How people read one headline figure: its key, column title, unit and number kind."""

    name: str  # the RunResult attribute, JSON key and history column
    label: str  # a short column title
    unit: str  # "samples/s", "ms", "s", "bytes", or "" for a pure number
    kind: str  # how `format_value` writes it: "rate", "ms", "seconds", "count", "loss", "bytes", ...
    sql_type: str  # the history column's type: "REAL", "INTEGER" or "TEXT"
    description: str  # one sentence for tooltips and docs

    def format(self, value: Any, missing: str = MISSING) -> str:
        """The value as text (bytes with their unit; every other unit is in `title`)."""
        return format_value(value, self.kind, missing)

    @property
    def title(self) -> str:
        """The column title with its unit: "Median step (ms)"."""
        return f"{self.label} ({self.unit})" if self.unit and self.unit != "bytes" else self.label


def figure(label: str, unit: str, kind: str, description: str, sql_type: str = "REAL") -> Any:
    """A `RunResult` field that is a headline figure (default None)."""
    meta = {"figure": (label, unit, kind, sql_type, description)}
    return field(default=None, metadata=meta)


@dataclass(frozen=True)
class StepRecord:
    """One training step: its 1-based number, its own loss (not a running mean) and its time."""

    step: int
    loss: float
    step_time_s: float
    warmup: bool = False


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run, with warm-up kept apart from steady-state statistics.

    Times are seconds unless the name says ms. Statistics are None when the run
    ended before any steady-state step was timed.
    """

    status: RunStatus
    config: dict[str, Any]
    message: str = ""
    steps_done: int = 0
    replicas: int = 1
    samples_per_s: float | None = figure("Samples/s", "", "rate", "Global batch / mean steady-state step time.")
    step_time_median_ms: float | None = figure("Median step", "ms", "ms", "Median steady-state step time (warm-up excluded).")
    step_time_p95_ms: float | None = figure("p95 step", "ms", "ms", "95th percentile of the steady-state step times.")
    step_time_spread: float | None = figure("Spread", "", "percent", "(p90 - p10) / median of the steady-state step times.")
    warmup_s: float | None = figure("Warm-up", "s", "seconds", "Time of the first call: tracing and compiling the step.")
    warmup_steps: int = 0
    final_loss: float | None = figure("Final loss", "", "loss", "The loss of the last step.")
    peak_memory_bytes: int | None = figure(
        "Peak memory", "bytes", "bytes", "Device allocator peak on accelerators, else the process's RSS peak.", "INTEGER"
    )
    bound: str | None = figure(
        "Bound", "", "text", "What limits the speed: compute, memory, input, overhead or unknown (see bound_evidence).", "TEXT"
    )
    achieved_flops: float | None = figure("Achieved", "FLOP/s", "flops", "Training FLOPs per step x steps per second.")
    pct_of_measured_peak: float | None = figure(
        "% of peak", "%", "pct", "Achieved FLOP/s as a percentage of the measured matmul ceiling for the run's precision."
    )
    mean_utilization: float | None = figure("Device use", "%", "pct", "Mean accelerator utilisation during the run (NVML, GPUs only).")
    mean_step_ms: float | None = figure(
        "Mean step", "ms", "ms", "Mean steady-state step time: global batch / samples/s, the step time samples/s is made from."
    )
    joules_per_sample: float | None = figure(
        "Energy per sample",
        "",
        "joules",
        "Measured energy of the steady window per sample (NVML or powercap counters); None where none exists.",
    )
    peak_memory_source: str = ""
    memory_added_bytes: int | None = None  # what the run itself used: the allocator peak, or on the CPU RSS growth since it started
    memory_added_source: str = ""
    bound_evidence: str = ""
    advice: str = ""
    memory_estimate: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    started_at: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    conditions: dict[str, Any] = field(default_factory=dict)  # core.machine.conditions.Conditions.to_dict(); {} before they were kept
    losses: tuple[float, ...] = ()
    step_times_s: tuple[float, ...] = ()
    warnings: tuple[str, ...] = ()
    flops_per_step: float | None = None  # training FLOPs of one step (core.training.flops), None when not counted
    flops_uncounted: tuple[str, ...] = ()  # layers whose FLOPs the count could not include: then FLOP/s is a lower bound
    flops_method: str = ""  # which counter counted flops_per_step (TF graph count, XLA cost analysis), or why none did
    rounds: dict[str, Any] = field(default_factory=dict)  # the interleaved rounds it was measured in (core.jobs.rounds); {} alone
    energy: dict[str, Any] | None = None  # the steady window's measured energy (core.hooks.energy); None: not measured
    energy_reason: str = ""  # why `energy` is None ("no powercap (RAPL) counters: ...")

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunStatus(self.status))

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.COMPLETED

    @property
    def measured_peak_flops(self) -> float | None:
        """The measured FLOP/s ceiling the run was judged against (achieved / % of it), or None."""
        if self.achieved_flops is None or not self.pct_of_measured_peak:
            return None
        return self.achieved_flops / (self.pct_of_measured_peak / 100)

    @property
    def backend(self) -> str:
        """The framework the run trained with ("tensorflow" for runs recorded before there was a choice)."""
        return self.config.get("backend", "tensorflow")

    @property
    def contended(self) -> bool:
        """True when other work on the machine made this run's figures low and noisy (see `conditions["reason"]`)."""
        return bool(self.conditions.get("contended"))

    def figures(self) -> dict[str, Any]:
        """The headline figures by name, in `FIGURES` order."""
        return {f.name: getattr(self, f.name) for f in FIGURES}

    def summary(self) -> dict[str, Any]:
        """The headline figures (no step series), as printed by the CLI's --json."""
        cfg = self.config
        return {
            "status": self.status.value,
            "message": self.message,
            **{key: cfg.get(key) for key in ("model", "dataset", "strategy")},
            "backend": self.backend,
            "devices": list(cfg.get("devices", [])),
            **{key: cfg.get(key) for key in ("batch_size", "steps_per_call", "precision", "xla")},
            "replicas": self.replicas,
            "steps": self.steps_done,
            "warmup_steps": self.warmup_steps,
            **self.figures(),
            "peak_memory_source": self.peak_memory_source,
            "memory_added_bytes": self.memory_added_bytes,
            "memory_added_source": self.memory_added_source,
            "bound_evidence": self.bound_evidence,
            "advice": self.advice,
            "memory_estimate": dict(self.memory_estimate),
            **({"model_sha256": cfg["model_sha256"]} if cfg.get("model_sha256") else {}),
            **({"custom_objects": cfg["custom_objects"]} if cfg.get("custom_objects") else {}),
            "wall_s": self.wall_s,
            "started_at": self.started_at,
            "warnings": list(self.warnings),
            "flops_per_step": self.flops_per_step,
            "flops_uncounted": list(self.flops_uncounted),
            "flops_method": self.flops_method,
            "conditions": dict(self.conditions),
            "energy": dict(self.energy) if self.energy else None,
            "energy_reason": self.energy_reason,
            "hooks": dict((cfg.get("extra") or {}).get("hooks", {})),
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything, step series included, JSON-ready."""
        data = asdict(self)
        data["status"] = self.status.value
        data["losses"] = list(self.losses)
        data["step_times_s"] = list(self.step_times_s)
        data["warnings"] = list(self.warnings)
        data["flops_uncounted"] = list(self.flops_uncounted)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        for key in ("losses", "step_times_s", "warnings", "flops_uncounted"):
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)


FIGURES: tuple[Figure, ...] = tuple(
    Figure(f.name, label, unit, kind, sql_type, description)
    for f in fields(RunResult)
    if "figure" in f.metadata
    for label, unit, kind, sql_type, description in [f.metadata["figure"]]
)
FIGURES_BY_NAME: dict[str, Figure] = {f.name: f for f in FIGURES}
