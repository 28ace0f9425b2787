"""Where the GUI saves finished runs to the history (core.history.store.RunStore).

Training runs and comparisons both save through `save_to_history`, in their
worker thread. Reading, exporting and deleting stored runs is the History
panel's (gui.panels.history), through its own store.
"""

from __future__ import annotations

from core.results import RunResult


def save_to_history(result: RunResult, label: str) -> tuple[int | None, str]:
    """Store a finished run; returns (run id, "") or (None, why it could not be stored).

    Runs in the training thread, so saving a long step series never blocks the window.
    """
    try:
        from core.history.store import RunStore

        with RunStore.open() as store:
            return store.save(result, label=label), ""
    except Exception as exc:  # the run itself is fine; only its record is missing
        return None, f"The run was not saved to the history: {exc}"
