"""What a run produces: step records while it trains, a `RunResult` when it ends."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

COMPLETED = "completed"
STOPPED = "stopped"
FAILED = "failed"


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

    status: str
    config: dict[str, Any]
    message: str = ""
    steps_done: int = 0
    replicas: int = 1
    warmup_s: float | None = None
    warmup_steps: int = 0
    step_time_median_ms: float | None = None
    step_time_p95_ms: float | None = None
    step_time_spread: float | None = None
    samples_per_s: float | None = None
    final_loss: float | None = None
    peak_memory_bytes: int | None = None
    peak_memory_source: str = ""
    wall_s: float = 0.0
    started_at: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    losses: tuple[float, ...] = ()
    step_times_s: tuple[float, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == COMPLETED

    def summary(self) -> dict[str, Any]:
        """The headline figures (no step series), as printed by the CLI's --json."""
        cfg = self.config
        return {
            "status": self.status,
            "message": self.message,
            "model": cfg.get("model"),
            "dataset": cfg.get("dataset"),
            "strategy": cfg.get("strategy"),
            "devices": list(cfg.get("devices", [])),
            "batch_size": cfg.get("batch_size"),
            "steps_per_call": cfg.get("steps_per_call"),
            "precision": cfg.get("precision"),
            "xla": cfg.get("xla"),
            "replicas": self.replicas,
            "steps": self.steps_done,
            "warmup_s": self.warmup_s,
            "warmup_steps": self.warmup_steps,
            "step_time_median_ms": self.step_time_median_ms,
            "step_time_p95_ms": self.step_time_p95_ms,
            "step_time_spread": self.step_time_spread,
            "samples_per_s": self.samples_per_s,
            "final_loss": self.final_loss,
            "peak_memory_bytes": self.peak_memory_bytes,
            "peak_memory_source": self.peak_memory_source,
            "wall_s": self.wall_s,
            "started_at": self.started_at,
            "warnings": list(self.warnings),
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything, step series included, JSON-ready."""
        data = asdict(self)
        data["losses"] = list(self.losses)
        data["step_times_s"] = list(self.step_times_s)
        data["warnings"] = list(self.warnings)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        for key in ("losses", "step_times_s", "warnings"):
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)
