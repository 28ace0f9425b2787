"""A busy machine, as a user meets it: two bounded busy loops (tests/busy.py) while `main.py` measures.

Each CLI command runs in a real subprocess. The ceilings are measured in the
library with a time limit (a full measurement takes minutes under load): what
`peaks --json` prints for that report is `peaks_document(report)`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.cli.machine_commands import peaks_document
from core.cli.tuning_commands import WATCHDOG_GRACE_S
from core.tuning.autotune import BUDGET_SLACK_S
from tests.busy import busy_cores

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


@pytest.fixture
def cli_env(tmp_path):
    return dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))


def cli(args, env, timeout=400):
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def startup_s(env) -> float:
    """What the interpreter, main.py's imports and the exit take around a command's own clock, measured now (a refused
    autotune ends before TensorFlow), with room for the load to change meanwhile."""
    began = time.monotonic()
    assert cli(["autotune", "--model", "mlp", "--budget-s", "1"], env).returncode == 2
    return 2 * (time.monotonic() - began) + 2.0


def test_run_json_under_two_busy_loops_records_the_conditions_and_warns(cli_env):
    with busy_cores(limit_s=300):
        out = cli(["run", "--model", "mlp", "--steps", "300", "--json", "--no-save"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    conditions = result["conditions"]
    assert conditions["contended"] and conditions["other_cpu_share"] >= 0.1, conditions
    assert {"steal_share", "cpu_pressure", "load_average", "cpu_mhz", "window", "window_s"} <= set(conditions)
    assert any(w.startswith("measured while other processes used") and w.endswith("re-run on a quiet machine") for w in result["warnings"])
    assert result["bound"] == "unknown" and result["bound_evidence"].startswith("Too noisy to judge")


def test_ceilings_measured_under_two_busy_loops_are_marked_contended_and_never_kept(cli_env, monkeypatch):
    monkeypatch.setenv("DEVICE_LAB_DATA_DIR", cli_env["DEVICE_LAB_DATA_DIR"])
    from core.diagnosis import ceilings

    with busy_cores(limit_s=300):
        report = ceilings.machine_peaks(remeasure=True, timeout_s=90)
    document = peaks_document(report, str(ceilings.peaks_path()))
    assert document["contended"] and document["usable"] is False and "other processes used" in document["contention"]
    assert document["conditions"]["other_cpu_share"] >= 0.1
    assert not ceilings.peaks_path().exists(), "a contended measurement was cached"
    assert ceilings.known_peaks() is None or ceilings.known_peaks() is not report
    assert report.ceiling(["CPU:0"], "off") == (None, report.ceiling(["CPU:0"], "off")[1])
    assert "not a ceiling" in report.ceiling(["CPU:0"], "off")[1]


def test_autotune_under_two_busy_loops_ends_within_its_budget_and_slack(cli_env):
    """The quiet case is test_tuning_cli's (its `elapsed_s` within the budget and slack)."""
    budget_s = 10  # under two busy loops the search does not finish within 10 s: the budget, not its space, ends it
    args = ["autotune", "--model", "mlp", "--target", "CPU:0", "--budget-s", str(budget_s), "--json"]
    with busy_cores(limit_s=300):
        startup = startup_s(cli_env)
        began = time.monotonic()
        out = cli(args, cli_env)
    took = time.monotonic() - began
    bound = budget_s + BUDGET_SLACK_S + WATCHDOG_GRACE_S  # the command's own clock, from its process's start
    assert took <= bound + startup, (took, startup, out.stderr[-2000:])
    assert json.loads(out.stdout)["elapsed_s"] <= bound + 1.0  # + the watchdog timer's latency on a loaded machine
    if out.returncode == 0:
        data = json.loads(out.stdout)
        assert data["samples_per_s"] > 0 and data["slack_s"] == BUDGET_SLACK_S and "gain_ci" in data
    else:  # under load the start point may not be measured in time: then it says so and exits 1, never nulls with 0
        assert out.returncode == 1 and f"nothing was measured within the {budget_s} s budget" in out.stderr, out.stderr[-2000:]


def test_an_autotune_that_measures_nothing_exits_1_with_a_message(cli_env):
    # ResNet at batch 256, 8 steps per call on a CPU: its warm-up call alone outlasts a 5 s budget.
    args = ["autotune", "--model", "resnet", "--batch-size", "256", "--steps-per-call", "8", "--budget-s", "5", "--json"]
    startup = startup_s(cli_env)
    began = time.monotonic()
    out = cli(args, cli_env)
    assert time.monotonic() - began <= 5 + BUDGET_SLACK_S + WATCHDOG_GRACE_S + startup
    assert out.returncode == 1, out.stderr[-2000:]
    assert "autotune failed: nothing was measured within the 5 s budget" in out.stderr
    data = json.loads(out.stdout)  # from the search, or from the watchdog when start-up took the budget and slack
    assert data["samples_per_s"] is None and data["error"].startswith("nothing was measured within the 5 s budget")


def test_compare_the_same_target_twice_reports_an_interval_holding_1(cli_env):
    out = cli(["compare", "--model", "mlp", "--steps", "300", "--targets", "CPU:0;CPU:0", "--no-save"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    table = out.stdout
    assert "95% interval" in table.splitlines()[0]
    if "(busy)" in table:  # another test process took the CPU during a run: a real difference may show, and is flagged
        assert "figures are low and noisy" in table
        return
    assert "(noise)" in table and "no difference beyond noise (the speed-up's 95% interval" in table, table
