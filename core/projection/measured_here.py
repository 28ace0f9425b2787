"""The newest run of the same job this machine measured (the run history): what a projection's speed-up is against.

A projection answers "would that device help, and by how much": by how much is the projected rate
over the rate this machine trained the same job at. The same job is every setting that decides a
step's speed but the device (SPEED_SETTINGS); a run whose machine was busy meanwhile (`contended`)
is passed over, its figures low and noisy. Read only where a history exists: a projection never
creates one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.config import BACKEND_TITLES, RunConfig
from core.history.store import RunStore, StoreError, default_path

SPEED_SETTINGS = (
    "model",
    "dataset",
    "batch_size",
    "precision",
    "steps_per_call",
    "xla",
    "backend",
    "optimizer",
    "vocab",
    "vocab_by_input",
    "custom_objects",
)
"""The settings besides the device that decide a step's speed (the learning rate, the seed and the length do not)."""
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


def same_job(recorded: Mapping[str, Any], config: RunConfig) -> bool:
    """A run's recorded config (`RunResult.config`) runs `config`'s job: every one of SPEED_SETTINGS alike, and the same
    model file content where both know it."""
    wanted = config.to_dict()
    if not all(json.dumps(recorded.get(name)) == json.dumps(wanted.get(name)) for name in SPEED_SETTINGS):
        return False
    ours, theirs = config.model_sha256, recorded.get("model_sha256") or ""
    return not (ours and theirs and ours != theirs)


def latest_measured(config: RunConfig, path: str | Path | None = None) -> MeasuredHere | None:
    """The newest completed, uncontended run of `config`'s job in the history at `path` (default: the app's); None where
    there is none, no history, or a history that cannot be read (a projection goes on without it)."""
    path = Path(path) if path is not None else default_path()
    if not path.is_file():
        return None
    try:
        with RunStore.open(path) as store:
            for summary in store.list_runs(model=config.model, status="completed")[:LOOK_AT]:
                rate = summary.figures.get("samples_per_s")
                if summary.contended or not rate:
                    continue
                if same_job(store.load(summary.id, with_steps=False).config, config):
                    where = ", ".join(summary.devices) or f"{BACKEND_TITLES.get(config.backend, config.backend)}'s default device"
                    return MeasuredHere(summary.id, where, float(rate), summary.started_at)
    except (StoreError, sqlite3.Error, OSError):
        return None
    return None
