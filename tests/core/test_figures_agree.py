"""One run, the same figures everywhere: `run --json`, `history --json`, a comparison from the history, both exports.

A real `main.py run` in a subprocess (diagnosed against a ceilings cache the
test writes, so FLOP/s, % of peak and the verdict are all there), then every
other way of reading that run back. And a real sweep: each row's samples/s is
global batch / mean step, the step figure shown beside it.
"""

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.compare.table import compare_results
from core.history.store import RunStore
from core.machine import peaks
from core.results import FIGURES
from tests.ceilings_cache import FLOAT32 as CEILING
from tests.ceilings_cache import write_ceilings_cache

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The data folder (a ceilings cache, then the history) and `main.py run --json` of the MLP on 2 logical CPUs."""
    data = tmp_path_factory.mktemp("agree") / "data"
    report = write_ceilings_cache(data / peaks.CACHE_FILE, bfloat16=None)
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data), DEVICE_LAB_LOG_DIR=str(data.parent / "logs"))
    out = _cli(["run", "--model", "mlp", "--data", "digits", "--steps", "60", "--batch-size", "32", "--logical-cpus", "2", "--json"], env)
    return data, env, json.loads(out), report


def _cli(args, env):
    done = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_one_run_shows_the_same_figures_everywhere(measured, tmp_path):
    data, env, run, report = measured
    figures = [figure.name for figure in FIGURES]
    assert run["achieved_flops"] and run["pct_of_measured_peak"] and run["bound"], "the run was judged: FLOP/s, % of peak, verdict"
    assert run["flops_per_step"] and run["mean_step_ms"]

    (listed,) = json.loads(_cli(["history", "--json"], env))
    assert {name: listed[name] for name in figures} == {name: run[name] for name in figures}

    with RunStore(data / "history.sqlite3") as store:
        stored = store.load(listed["id"])
    row = compare_results([("from history", stored)], peaks=report).rows[0]
    assert {name: getattr(row, name) for name in figures} == {name: run[name] for name in figures}
    assert row.achieved_flops == run["achieved_flops"] and row.fraction_of_peak * 100 == pytest.approx(run["pct_of_measured_peak"])

    _cli(["export", str(listed["id"]), "--csv", str(tmp_path / "runs.csv")], env)
    text = (tmp_path / "runs.csv").read_text()
    (exported,) = csv.DictReader(io.StringIO(text))  # the header first; the system header beside it, in runs.csv.meta.json
    assert {name: exported[name] for name in figures} == {name: "" if run[name] is None else str(run[name]) for name in figures}
    entries = json.loads((tmp_path / "runs.csv.meta.json").read_text())["system"]
    assert entries["peak_flops"] == pytest.approx(CEILING), "the header's peak is the measured ceiling"
    assert entries["logical_devices"] == ["CPU:0", "CPU:1"] and entries["estimate_peak_flops"] > 0, entries

    _cli(["export", str(listed["id"]), "--json", str(tmp_path / "runs.json")], env)
    document = json.loads((tmp_path / "runs.json").read_text())
    (exported,) = document["runs"]
    assert {name: exported[name] for name in figures} == {name: run[name] for name in figures}
    assert document["system"]["peak_flops"] == pytest.approx(CEILING) and document["system"]["logical_devices"] == ["CPU:0", "CPU:1"]


def test_each_sweep_row_s_samples_per_s_is_its_batch_over_its_mean_step(measured):
    _, env, _, _ = measured
    args = ["sweep", "--model", "mlp", "--batch-sizes", "16,64", "--steps", "40", "--json"]
    sweep = json.loads(_cli(args, env))
    rows = [row for row in sweep["rows"] if row["samples_per_s"] is not None]
    assert len(rows) == 2
    for row in rows:
        batch = row["settings"]["batch_size"]
        assert row["samples_per_s"] == pytest.approx(batch / (row["mean_step_ms"] / 1e3), rel=1e-9)
        assert row["step_time_median_ms"] is not None  # the typical step, shown apart and labelled as the median
