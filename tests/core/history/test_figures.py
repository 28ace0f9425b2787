"""One definition of a run's figures: every `FIGURES` entry is a history column, a summary figure and a CSV column.

The results here are built from `FIGURES` itself, so a figure added to `RunResult`
is covered without touching this file.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from core.config import RunConfig
from core.history import database
from core.history.store import RunStore
from core.results import FIGURES, RunResult, RunStatus


def figure_values(seed: int) -> dict[str, object]:
    """A distinct value for every figure, of its column's type."""
    values = {"INTEGER": lambda i: 1000 * seed + i, "REAL": lambda i: seed + i / 8, "TEXT": lambda i: f"text {seed}.{i}"}
    return {f.name: values[f.sql_type](i) for i, f in enumerate(FIGURES, start=1)}


def make_result(seed: int = 1) -> RunResult:
    config = RunConfig(model="mlp", dataset="synthetic", steps=3)
    return RunResult(
        status=RunStatus.COMPLETED,
        config=config.to_dict(),
        steps_done=3,
        started_at=f"2024-05-0{seed}T10:00:00+00:00",
        losses=(3.0, 2.0, 1.0),
        step_times_s=(0.5, 0.1, 0.1),
        **figure_values(seed),
    )


def runs_columns(conn: sqlite3.Connection) -> dict[str, str]:
    return {row[1]: row[2] for row in conn.execute("PRAGMA table_info(runs)")}


def test_every_figure_is_a_typed_column_of_a_new_history(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    RunStore.open(path).close()
    with sqlite3.connect(path) as conn:
        columns = runs_columns(conn)
    assert {f.name: f.sql_type for f in FIGURES}.items() <= columns.items()


def test_every_figure_is_in_the_summary_the_sort_and_the_csv(tmp_path: Path) -> None:
    results = [make_result(1), make_result(2)]
    with RunStore.open(tmp_path / "history.sqlite3") as store:
        ids = [store.save(result) for result in results]
        summaries = {s.id: s for s in store.list_runs()}
        for f in FIGURES:
            assert [s.id for s in store.list_runs(order_by=f.name, descending=False)] == ids
        store.export_csv(ids, tmp_path / "runs.csv")
    for run_id, result in zip(ids, results, strict=True):
        assert summaries[run_id].figures == result.figures()
        assert list(summaries[run_id].figures) == [f.name for f in FIGURES]
        assert {f.name: summaries[run_id].to_dict()[f.name] for f in FIGURES} == result.figures()
    with (tmp_path / "runs.csv").open(newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    for row, result in zip(rows, results, strict=True):
        numbers = [f for f in FIGURES if f.sql_type != "TEXT"]
        assert {f.name: float(row[f.name]) for f in numbers} == pytest.approx({f.name: result.figures()[f.name] for f in numbers})
        assert all(row[f.name] == result.figures()[f.name] for f in FIGURES if f.sql_type == "TEXT")


def test_an_old_history_gains_the_missing_figure_columns_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in database.MIGRATIONS:
        migration(conn)
    conn.execute(f"PRAGMA user_version = {len(database.MIGRATIONS)}")
    missing = [f.name for f in FIGURES if f.name not in runs_columns(conn)]
    assert missing  # the versioned schema predates some figures: they are what this test is about
    full, partial = make_result(1), make_result(2)
    stored_partial = {k: v for k, v in partial.to_dict().items() if k != missing[0]}  # written before that figure existed
    present = [f.name for f in FIGURES if f.name not in missing]
    columns = ["started_at", "status", "model", "steps", *present, "result"]
    sql = f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    for result, stored in ((full, full.to_dict()), (partial, stored_partial)):
        figures = [getattr(result, name) for name in present]
        conn.execute(sql, (result.started_at, result.status.value, "mlp", 3, *figures, json.dumps(stored)))
    conn.close()

    with RunStore.open(path) as store:
        summaries = store.list_runs(descending=False)
        assert [s.figures for s in summaries] == [full.figures(), {**partial.figures(), missing[0]: None}]
        assert store.load(summaries[0].id, with_steps=False) == replace(full, losses=(), step_times_s=())
        new_id = store.save(make_result(3))
        assert store.list_runs(order_by=missing[0])[0].id == new_id
    with sqlite3.connect(path) as conn:
        assert set(missing) <= set(runs_columns(conn))
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3
