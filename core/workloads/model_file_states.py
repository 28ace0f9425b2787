"""Whether a stored run's model file is still the file it trained: unchanged, changed or missing.

A run on the user's model file stores the file's path and sha256 (in its
config). Listing runs compares that hash with the file's content now; a
`ModelFileStates` hashes each path at most once, so one command (or one
refresh of a history view) reads a file once however many runs used it.
"""

from __future__ import annotations

import os
from typing import Any

from core.workloads.model_file import file_sha256
from core.workloads.workload import is_model_file, model_title

UNCHANGED, CHANGED, MISSING, UNREADABLE, UNKNOWN = "unchanged", "changed", "missing", "unreadable", "unknown"


class ModelFileStates:
    """The state of runs' model files, each path hashed at most once in this object's life."""

    def __init__(self) -> None:
        self._hashes: dict[str, str] = {}

    def state(self, path: str, recorded_sha256: str) -> str:
        """UNCHANGED, CHANGED, MISSING, UNREADABLE, or UNKNOWN when the run recorded no hash (it failed before opening the file)."""
        current = self._current(path)
        if current in (MISSING, UNREADABLE):
            return current
        if not recorded_sha256:
            return UNKNOWN
        return UNCHANGED if current == recorded_sha256 else CHANGED

    def describe(self, model: str | None, recorded_sha256: str) -> dict[str, Any] | None:
        """{"path", "sha256", "state"} for a run on a model file; None for a sample model."""
        if not model or not is_model_file(model):
            return None
        return {"path": model, "sha256": recorded_sha256, "state": self.state(model, recorded_sha256)}

    def title(self, model: str | None, recorded_sha256: str) -> str:
        """The model for a table: a sample's name as given, a file's name, marked when the file changed or is gone."""
        described = self.describe(model, recorded_sha256)
        if described is None or model is None:
            return model or ""
        if described["state"] in (UNCHANGED, UNKNOWN):
            return model_title(model)
        return f"{model_title(model)} ({described['state']})"

    def _current(self, path: str) -> str:
        """The file's sha256 now, or MISSING / UNREADABLE."""
        if path not in self._hashes:
            if not os.path.isfile(path):
                self._hashes[path] = MISSING
            else:
                try:
                    self._hashes[path] = file_sha256(path)
                except OSError:
                    self._hashes[path] = UNREADABLE
        return self._hashes[path]
