"""`max-batch` whose --budget-s runs out in the middle of a probe: it says the budget ran out, during which batch, what
fit by then and what to do, and the JSON keeps all of it (on an H200 it said only "stopped after 12 probe(s): batch
131,072 fits; the limit was not found", and a watched host peak of 5.3 GiB beside device peaks read as over the 4 GiB
cap). A real `main.py` process on JAX on the CPU; its probes are real child processes, the last one killed at the budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BUDGET_S = 20


def _search(tmp_path: Path, budget_s: int) -> tuple[subprocess.CompletedProcess, dict]:
    """`main.py max-batch` of the MLP on JAX's CPU from batch 1 under 8 GiB, within `budget_s`: its run and its JSON."""
    # From batch 1 under 8 GiB the peaks are trusted for a guess only once they rose by 5% of it (near batch 100,000, over
    # 15 doublings of a few seconds each): the budget runs out while the search still doubles, its memory small.
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    args = ["max-batch", "--model", "mlp", "--backend", "jax", "--target", "CPU:0", "--start-batch", "1"]
    args += ["--memory-limit", "8GiB", "--budget-s", str(budget_s), "--json"]
    done = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]  # README: exit 1 when the search was stopped
    answer = json.loads(done.stdout)
    fitting = [p["batch"] for p in answer["probes"] if p["fits"]]
    assert answer["stopped"] and answer["stopped_by"] == "budget" and answer["budget_s"] == budget_s
    assert answer["largest_fitting"] == max(fitting, default=0) and answer["smallest_failing"] is None
    assert "Traceback" not in done.stderr
    return done, answer


@pytest.mark.slow
def test_a_budget_that_runs_out_during_a_probe_says_so_and_keeps_the_largest_batch_that_fit(tmp_path: Path) -> None:
    """The deadline falls during a probe almost always; where it fell between two (a loaded machine: a probe ended as it
    came), that search says it ran out after its last probe, none unfinished, and one with another budget is read."""
    budget_s = BUDGET_S
    done, answer = _search(tmp_path, budget_s)
    if answer["unfinished_batch"] is None:
        assert all(p["fits"] and "before it finished" not in p["reason"] for p in answer["probes"]), answer
        assert f"the budget of {budget_s} s ran out after {len(answer['probes'])} probe(s)" in done.stderr
        budget_s = BUDGET_S + 7
        done, answer = _search(tmp_path, budget_s)
    tried = [p["batch"] for p in answer["probes"]]
    cut_short = answer["unfinished_batch"]
    assert cut_short and cut_short not in tried and cut_short > answer["largest_fitting"], answer
    fits = f"batch {answer['largest_fitting']:,} fits" if answer["largest_fitting"] else "no batch was found to fit yet"
    assert (
        f"the search was stopped: the budget of {budget_s} s ran out during the probe of batch {cut_short:,} after "
        f"{len(tried)} probe(s): {fits}, {cut_short:,} was not measured; the limit was not found; give a larger --budget-s"
    ) in done.stderr
    assert f"batch {cut_short:,}: stopped: the budget of {budget_s} s ran out before it finished" in done.stderr
