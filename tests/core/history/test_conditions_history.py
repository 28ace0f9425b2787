"""A run's conditions in the history: their own column (schema 4), read back identically, in history --json and both exports."""

from __future__ import annotations

import csv
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from core.history import database
from core.history.store import RunStore
from tests.core.history.test_store import make_result

CONDITIONS = {
    "window": "steady state",
    "window_s": 4.2,
    "cpus": 2,
    "other_cpu_share": 0.63,
    "steal_share": 0.0,
    "cpu_pressure": 0.71,
    "load_average": [11.5, 9.2, 4.0],
    "cpu_mhz": 2300.0,
    "cpu_max_mhz": None,
    "gpus": [],
    "contended": True,
    "reason": "other processes used 63% of the CPU",
}


def test_conditions_are_kept_listed_exported_and_read_back_identically(tmp_path: Path) -> None:
    result = replace(make_result(steps=20), conditions=CONDITIONS)
    with RunStore.open(tmp_path / "history.sqlite3") as store:
        run_id = store.save(result)
        assert store.load(run_id).conditions == CONDITIONS
        (listed,) = store.list_runs()
        assert listed.conditions == CONDITIONS and listed.contended and listed.to_dict()["conditions"] == CONDITIONS
        store.export_csv([run_id], tmp_path / "runs.csv")
        store.export_json([run_id], tmp_path / "runs.json")
    with sqlite3.connect(tmp_path / "history.sqlite3") as conn:
        (column,) = conn.execute("SELECT conditions FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert json.loads(column) == CONDITIONS
    rows = list(csv.DictReader(line for line in (tmp_path / "runs.csv").read_text().splitlines() if not line.startswith("#")))
    assert json.loads(rows[0]["conditions"]) == CONDITIONS
    assert json.loads((tmp_path / "runs.json").read_text())["runs"][0]["conditions"] == CONDITIONS


def test_a_history_from_before_conditions_gains_the_column_filled_from_each_result(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    with RunStore.open(path) as store:
        kept = store.save(replace(make_result(steps=5), conditions=CONDITIONS))
        older = store.save(make_result(steps=5))  # a run from before conditions were kept
    with sqlite3.connect(path) as conn:  # as schema 3 left it: no conditions column
        conn.execute("ALTER TABLE runs DROP COLUMN conditions")
        conn.execute("PRAGMA user_version = 3")
    with RunStore.open(path) as store:
        assert store.load(kept).conditions == CONDITIONS and store.load(older).conditions == {}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(database.MIGRATIONS) == 4
        filled = dict(conn.execute("SELECT id, conditions FROM runs").fetchall())
    assert json.loads(filled[kept]) == CONDITIONS and json.loads(filled[older]) == {}
