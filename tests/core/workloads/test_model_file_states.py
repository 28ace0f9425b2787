"""Runs on a model file in the history: the hash kept with the run, the file's state now, and exports that carry both."""

from __future__ import annotations

import csv
from pathlib import Path

from core.config import RunConfig
from core.history.store import RunStore
from core.results import RunResult, RunStatus
from core.workloads.model_file import file_sha256
from core.workloads.model_file_states import ModelFileStates


def file_run(model: Path, sha: str) -> RunResult:
    config = RunConfig(model=str(model), model_sha256=sha, steps=4)
    return RunResult(status=RunStatus.COMPLETED, config=config.to_dict(), steps_done=4, samples_per_s=100.0)


def test_states_hash_each_path_once_and_say_changed_missing_or_unknown(tmp_path):
    model = tmp_path / "net.keras"
    model.write_bytes(b"first")
    sha = file_sha256(model)
    states = ModelFileStates()
    assert states.describe(str(model), sha) == {"path": str(model), "sha256": sha, "state": "unchanged"}
    model.write_bytes(b"second")
    assert states.state(str(model), sha) == "unchanged"  # hashed once: the same listing reads a file once
    fresh = ModelFileStates()
    assert fresh.state(str(model), sha) == "changed" and fresh.title(str(model), sha) == "net.keras (changed)"
    assert fresh.state(str(model), "") == "unknown" and fresh.title(str(model), "") == "net.keras"
    assert ModelFileStates().state(str(tmp_path / "gone.keras"), sha) == "missing"
    assert fresh.describe("mlp", "") is None and fresh.title("mlp", "") == "mlp"


def test_store_lists_the_hash_and_exports_a_sample_run_beside_a_file_run(tmp_path):
    model = tmp_path / "net.keras"
    model.write_bytes(b"weights")
    sha = file_sha256(model)
    sample = RunResult(status=RunStatus.COMPLETED, config=RunConfig(steps=4).to_dict(), steps_done=4)
    with RunStore.open(tmp_path / "history.sqlite3") as store:
        ids = [store.save(sample), store.save(file_run(model, sha))]
        assert {s.id: s.model_sha256 for s in store.list_runs()} == {ids[0]: "", ids[1]: sha}
        store.export_csv(ids, tmp_path / "runs.csv")
    lines = [line for line in (tmp_path / "runs.csv").read_text().splitlines() if not line.startswith("#")]
    rows = list(csv.DictReader(lines))
    assert [(row["model"], row["model_sha256"]) for row in rows] == [("mlp", ""), (str(model), sha)]
    assert rows[0]["memory_estimate"] == "{}"  # a dict cell is JSON, not Python's repr
