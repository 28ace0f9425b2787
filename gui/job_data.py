"""What the window's jobs take and give back: plain frozen values shared by the controllers and the views.

The controllers (gui.controllers) make and emit these; the views (run form,
panels, Sweep tab) read them. Neither side imports the other for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.compare.targets import CompareTarget
from core.config import MAX_BATCH_SIZE, RunConfig
from core.jobs.rounds import DEFAULT_ROUNDS
from core.results import RunResult
from core.tuning.sweep import Sweep

MAX_BATCH = "max-batch"  # TuningJob.kind: the largest batch that fits
AUTOTUNE = "autotune"  # TuningJob.kind: the fastest settings


@dataclass(frozen=True)
class FinishedRun:
    """What a training thread hands back: the result and where the history stored it."""

    result: RunResult
    run_id: int | None
    history_error: str = ""


@dataclass(frozen=True)
class Progress:
    """Where the run in flight stands; rates are steady-state (warm-up excluded)."""

    done: int
    total: int
    samples_per_s: float | None
    eta_s: float | None


@dataclass(frozen=True)
class CompareJob:
    """What to run: `base` on each of `targets`, or, when `sweep_kind` is set, a scaling sweep over that kind."""

    base: RunConfig
    targets: tuple[CompareTarget, ...] = ()
    baseline_index: int = 0
    sweep_kind: str = ""
    rounds: int = DEFAULT_ROUNDS  # interleaved rounds (core.jobs.rounds)


@dataclass(frozen=True)
class SavedTarget:
    """A comparison target's run as the history stored it (or why it could not)."""

    index: int
    label: str
    finished: FinishedRun


@dataclass(frozen=True)
class SweepJob:
    """What to sweep: the run form's job, each setting's values (one: fixed; two or more: an axis), slow precisions too or not."""

    base: RunConfig
    values: Mapping[str, Sequence[Any]]
    keep_slow: bool = False
    rounds: int = DEFAULT_ROUNDS  # interleaved rounds (core.jobs.rounds)


@dataclass(frozen=True)
class SweepOutcome:
    """A sweep that ran (completed or stopped), and why its points are not all in the history ("" when they are)."""

    sweep: Sweep
    history_error: str = ""


@dataclass(frozen=True)
class TuningJob:
    """What to search: `kind` (MAX_BATCH or AUTOTUNE) for `config`, with its memory budget, time budget and batch bounds.

    `up_to` is the largest batch a largest-batch search tries; `max_batch` bounds autotune's batch stage.
    """

    kind: str
    config: RunConfig
    memory_limit: int | None = None
    budget_s: float = 120.0
    allow_batch_change: bool = False
    max_batch: int | None = None
    up_to: int = MAX_BATCH_SIZE
