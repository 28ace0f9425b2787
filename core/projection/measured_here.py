"""The newest run of the same job this machine measured (the run history): what a projection's speed-up is against,
and the samples it needed to reach a loss, which a projection turns into a time to that loss.

A projection answers "would that device help, and by how much": by how much is the projected rate
over the rate this machine trained the same job at. The same job is every setting that decides a
step's speed but the device (`core.config.SPEED_SETTINGS`); a run whose machine was busy meanwhile (`contended`)
is passed over, its figures low and noisy. The samples to a loss come from the newest run that
learns alike (`core.config.LEARNING_SETTINGS`; on any device or backend, busy or not, its loss falls about the same), judged as
compare judges a time to a target (`core.training.to_target.decide`: reached after the warm-up, by
a loss that fell beyond noise). Read only where a history exists: a projection never creates one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.config import BACKEND_TITLES, LEARNING_SETTINGS, SPEED_SETTINGS, RunConfig, same_settings
from core.history.store import RunStore, RunSummary, StoreError, default_path
from core.results import RunResult
from core.training.to_target import IN_WARMUP, NO_FALL, decide

NO_RUN = (
    "no completed run of this training (its model, data, batch, learning rate, optimizer, precision, seed) in the "
    "history: run it first (main.py run with the same settings) or give --samples-to-target"
)
LOOK_AT = 50
"""Completed runs of the model, newest first, that are read for a match at most."""


@dataclass(frozen=True)
class MeasuredHere:
    """A completed run of the job in this machine's history: its id, where it ran ("CPU:0"), its samples/s and when (UTC, ISO)."""

    run_id: int
    where: str
    samples_per_s: float
    started_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def same_job(recorded: Mapping[str, Any], config: RunConfig, settings: Sequence[str] = SPEED_SETTINGS) -> bool:
    """A run's recorded config (`RunResult.config`) has `config`'s `settings` (SPEED_SETTINGS: it ran the same job; LEARNING_SETTINGS:
    it learns alike) and the same model file content where both know it."""
    ours, theirs = config.model_sha256, recorded.get("model_sha256") or ""
    return same_settings(recorded, config, settings) and not (ours and theirs and ours != theirs)


def latest_measured(config: RunConfig, path: str | Path | None = None) -> MeasuredHere | None:
    """The newest completed, uncontended run of `config`'s job in the history at `path` (default: the app's); None where
    there is none, no history, or a history that cannot be read (a projection goes on without it)."""
    try:
        found = _newest(config, path, SPEED_SETTINGS, _quiet_with_a_rate, with_steps=False)
    except (StoreError, sqlite3.Error, OSError):
        return None
    if found is None:
        return None
    summary, _ = found
    where = ", ".join(summary.devices) or f"{BACKEND_TITLES.get(config.backend, config.backend)}'s default device"
    return MeasuredHere(summary.id, where, float(summary.figures["samples_per_s"]), summary.started_at)


def _quiet_with_a_rate(summary: RunSummary) -> bool:
    """The run's machine was not busy meanwhile and it has a samples/s to be set against."""
    return not summary.contended and bool(summary.figures.get("samples_per_s"))


def _newest(
    config: RunConfig, path: str | Path | None, settings: Sequence[str], usable: Callable[[RunSummary], bool], with_steps: bool
) -> tuple[RunSummary, RunResult] | None:
    """The newest of the model's last LOOK_AT completed runs in the history at `path` (default: the app's) that is `usable` and
    has `config`'s `settings` (`same_job`), with its result (and its steps `with_steps`); None where there is none or no history. Raises
    StoreError, sqlite3.Error or OSError where the history cannot be read."""
    path = Path(path) if path is not None else default_path()
    if not path.is_file():
        return None
    with RunStore.open(path) as store:
        for summary in store.list_runs(model=config.model, status="completed")[:LOOK_AT]:
            if not usable(summary):
                continue
            result = store.load(summary.id, with_steps=False)
            if same_job(result.config, config, settings):
                return summary, store.load(summary.id) if with_steps else result
    return None


@dataclass(frozen=True)
class SamplesToLoss:
    """The samples run `run_id` needed for its smoothed loss to reach `target_loss`."""

    run_id: int
    target_loss: float
    samples: int

    def how(self) -> str:
        return f"run #{self.run_id} of this training reached loss {self.target_loss:.4g} after {self.samples:,} samples"


def samples_to_loss(config: RunConfig, target_loss: float, path: str | Path | None = None) -> SamplesToLoss | str:
    """The samples the newest completed run of `config`'s training (on any device or backend) needed to reach `target_loss`, or
    why there are none, in words (no such run; not reached; reached in the warm-up or by luck)."""
    try:
        found = _newest(config, path, LEARNING_SETTINGS, lambda summary: True, with_steps=True)
    except (StoreError, sqlite3.Error, OSError) as exc:
        return f"the history could not be read: {exc}"
    if found is None:
        return NO_RUN
    summary, result = found
    return _judged(summary.id, result, target_loss)


def _judged(run_id: int, result: RunResult, target_loss: float) -> SamplesToLoss | str:
    """The run's samples to `target_loss` where its time to it decides (`decide`), else why not."""
    decision = decide([result], target_loss)
    [reached] = decision.reached
    if decision.decides and reached.samples is not None:
        return SamplesToLoss(run_id, target_loss, reached.samples)
    if decision.reason == IN_WARMUP:
        return (
            f"run #{run_id} reached loss {target_loss:.4g} within its warm-up (step {reached.steps}): too early to time; give a lower loss"
        )
    if decision.reason == NO_FALL:
        return f"run #{run_id}'s loss did not fall beyond noise to {target_loss:.4g} (random labels, or too few steps): reaching it is luck"
    return f"run #{run_id} did not reach loss {target_loss:.4g} in its {len(result.losses):,} steps: train longer, or give a higher loss"
