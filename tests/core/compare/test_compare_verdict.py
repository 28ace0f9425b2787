"""A comparison's verdicts and ceilings: each row judged from the compared runs and the measured ceilings, no probe runs.

Finished runs are built as the engine records them (no run needed: the
verdict reads only the results and the ceilings it is given).
"""

import csv
import json
import socket

import pytest

from core.compare.export import write_comparison
from core.compare.table import compare_results, format_table
from core.config import RunConfig
from core.machine.peaks import DevicePeaks, PeaksReport
from core.results import RunResult, RunStatus

CEILING = 80e9  # the measured float32 matmul FLOP/s of this (written, not measured) machine
ESTIMATE = 160e9
FLOPS_PER_STEP = 1e8  # at 12,800 samples/s and batch 64: 20 GFLOP/s, a quarter of the ceiling
PEAKS = PeaksReport({"cpu": "test CPU"}, (DevicePeaks("CPU:0", "CPU", "test CPU", {"float32": CEILING, "bfloat16": 2 * CEILING}),))


def _run(batch=64, median_ms=5.0, replicas=1, strategy="default", devices=("CPU:0",), **config) -> RunResult:
    return RunResult(
        status=RunStatus.COMPLETED,
        config=RunConfig(model="mlp", steps=100, batch_size=batch, strategy=strategy, **config).to_dict(),
        steps_done=100,
        replicas=replicas,
        warmup_steps=1,
        step_time_median_ms=median_ms,
        step_time_spread=0.1,
        samples_per_s=batch / (median_ms / 1e3),
        environment={"devices": list(devices), "host": socket.gethostname(), "peak_flops": ESTIMATE, "peak_flops_how": "2 x 2.5 GHz x 32"},
    )


def test_rows_are_judged_against_the_measured_ceiling_with_the_estimate_beside(tmp_path):
    comparison = compare_results([("CPU:0", _run())], flops_per_step=FLOPS_PER_STEP, peaks=PEAKS)
    row = comparison.rows[0]
    achieved = FLOPS_PER_STEP * row.samples_per_s / 64
    assert row.result.achieved_flops == pytest.approx(achieved)
    assert row.result.pct_of_measured_peak == pytest.approx(100 * achieved / CEILING)
    assert (row.peak_flops, row.fraction_of_peak) == (pytest.approx(CEILING), pytest.approx(achieved / CEILING))
    assert (row.estimate_flops, row.fraction_of_estimate) == (ESTIMATE, pytest.approx(achieved / ESTIMATE))
    assert "measured float32 matmul on test CPU" in row.peak_flops_how
    assert row.result.bound == "unknown" and "no probe runs" in row.result.bound_evidence

    text = format_table(comparison)
    assert "% of estimate" in text.splitlines()[0] and f"% of peak: {row.peak_flops_how}" in text
    document = json.loads(write_comparison(comparison, tmp_path / "c.json").read_text())
    assert document["rows"][0]["bound"] == "unknown" and document["rows"][0]["pct_of_measured_peak"] > 0
    assert any("measured float32 matmul" in line for line in document["ceilings"])
    with open(write_comparison(comparison, tmp_path / "c.csv"), encoding="utf-8") as file:
        rows = list(csv.DictReader(line for line in file if not line.startswith("#")))
    assert rows[0]["bound"] == "unknown" and rows[0]["advice"] and float(rows[0]["fraction_of_estimate"]) > 0


def test_runs_at_other_batch_sizes_are_evidence_about_each_other():
    # The same job at batch 64 and 8 with nearly the same step time: most of the step does not grow with the batch.
    comparison = compare_results([("batch 64", _run(64, 2.0)), ("batch 8", _run(8, 1.9))], peaks=PEAKS)
    assert [row.result.bound for row in comparison.rows] == ["overhead", "overhead"]
    assert all("fixed cost" in row.result.bound_evidence and row.result.advice.startswith("Raise") for row in comparison.rows)


def test_a_run_that_has_its_own_verdict_keeps_it():
    own = RunResult.from_dict({**_run().to_dict(), "bound": "input", "bound_evidence": "waits", "advice": "cache it"})
    row = compare_results([("CPU:0", own)], flops_per_step=FLOPS_PER_STEP, peaks=PEAKS).rows[0]
    assert (row.result.bound, row.result.bound_evidence, row.result.advice) == ("input", "waits", "cache it")


def test_without_ceilings_the_verdict_says_how_to_measure_them():
    row = compare_results([("CPU:0", _run())], flops_per_step=FLOPS_PER_STEP).rows[0]
    assert row.peak_flops is None and row.fraction_of_peak is None and row.result.pct_of_measured_peak is None
    assert "main.py peaks" in row.peak_flops_how and row.fraction_of_estimate is not None


def test_local_multi_worker_shares_the_cores_and_efficiency_over_100_percent_is_explained():
    single = _run(median_ms=5.0)
    workers = _run(median_ms=28.0, replicas=2, strategy="multi-worker")
    comparison = compare_results([("CPU:0", single), ("multi-worker:2", workers)], baseline_index=1)
    cpu, multi = comparison.rows
    assert any(w.startswith("multi-worker:2:") and "share the same physical cores" in w for w in comparison.warnings)
    assert cpu.scaling_efficiency == pytest.approx(5.6 * 2)
    flagged = [w for w in comparison.warnings if w.startswith("CPU:0: efficiency")]
    assert len(flagged) == 1 and "not better-than-linear scaling" in flagged[0] and "one-device baseline" in flagged[0]
    assert "1120%!" in format_table(comparison)
    # against the one-device baseline nothing is over 100%; workers on other hosts are more hardware
    assert not any("efficiency" in w for w in comparison.with_baseline(0).warnings)
    spread = _run(median_ms=28.0, replicas=2, strategy="multi-worker", cluster_hosts=("10.0.0.1:2222", "10.0.0.2:2222"))
    assert not any("share the same physical cores" in w for w in compare_results([("cluster", spread)]).warnings)
