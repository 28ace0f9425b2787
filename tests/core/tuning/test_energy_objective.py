"""The energy objective: sweep and autotune star or adopt by measured joules, from a stand-in powercap tree
(`tests.fakes.fake_powercap`: this VM has no energy counter), and refuse it in one line where no counter exists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.results import RunResult, RunStatus
from core.training.noise import energy_ratio
from core.training.to_target import ToTarget
from core.tuning.sweep import BY_JOULES_PER_SAMPLE, SweepRow, energy_best, energy_fields
from tests.fakes.fake_powercap import FakePowercap

ROOT = Path(__file__).resolve().parents[3]


def cli(args: list[str], tmp_path: Path, powercap: Path, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEVICE_LAB_POWERCAP_ROOT": str(powercap), "DEVICE_LAB_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)


def measured(per_round: list[float], group: str = "g") -> RunResult:
    """A completed run of rounds `group` whose rounds used `per_round` joules per sample."""
    mean = sum(per_round) / len(per_round)
    rounds = {"id": group, "spans": [[2 + 10 * k, 11 + 10 * k] for k in range(len(per_round))], "round_index": list(range(len(per_round)))}
    energy = {"joules_per_sample": mean, "samples_per_joule": 1 / mean, "rounds_joules_per_sample": per_round}
    return RunResult(
        status=RunStatus.COMPLETED, config={"batch_size": 32}, samples_per_s=1000.0, rounds=rounds, energy=energy, joules_per_sample=mean
    )


def test_the_energy_interval_comes_from_the_rounds_and_ties_hold_one() -> None:
    base, frugal, same = measured([1.0, 1.1, 0.9, 1.0]), measured([0.5, 0.56, 0.44, 0.5]), measured([1.02, 1.0, 0.95, 1.05])
    interval = energy_ratio(base, frugal)
    assert interval is not None and interval.rounds == 4 and interval.high < 1 and interval.beyond_noise
    assert not energy_ratio(base, same).beyond_noise  # type: ignore[union-attr]
    assert energy_ratio(base, measured([0.5, 0.5], group="other")) is None  # rounds not shared: no claim


def test_the_star_goes_to_the_fewest_joules_and_not_on_a_tie() -> None:
    rows = [SweepRow({"batch_size": 32}, measured([1.0, 1.1, 0.9])), SweepRow({"batch_size": 64}, measured([0.5, 0.52, 0.48]))]
    best, tied, by = energy_best(rows)
    assert best == 1 and tied == () and by in (BY_JOULES_PER_SAMPLE, "joules_to_target")
    rows.append(SweepRow({"batch_size": 128}, measured([0.49, 0.53, 0.47])))
    best, tied, _ = energy_best(rows)
    assert best in (1, 2) and tied == ((2,) if best == 1 else (1,))
    unmeasured = RunResult(status=RunStatus.COMPLETED, config={"batch_size": 8}, samples_per_s=1.0, energy_reason="no counter")
    assert energy_fields(unmeasured, ToTarget(None))["energy_reason"] == "no counter"


@pytest.mark.parametrize("command", [["sweep", "--batch-sizes", "32,64"], ["autotune", "--budget-s", "30"]])
def test_without_a_counter_the_energy_objective_is_refused_in_one_line(tmp_path: Path, command: list[str]) -> None:
    began = time.monotonic()
    done = cli([command[0], "--model", "mlp", *command[1:], "--objective", "energy"], tmp_path, tmp_path / "no-powercap")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "powercap" in done.stderr
    assert time.monotonic() - began < 5


@pytest.mark.slow
def test_a_sweep_stars_the_point_with_the_fewest_joules_from_the_stand_in_counter(tmp_path: Path) -> None:
    fake = FakePowercap(tmp_path / "powercap")
    fake.run_at(30.0)  # a steady power: the fewest joules go with the least time
    try:
        done = cli(
            [
                "sweep",
                "--model",
                "mlp",
                "--data",
                "digits",
                "--steps-per-call",
                "1,16",
                "--steps",
                "320",
                "--objective",
                "energy",
                "--json",
            ],
            tmp_path,
            fake.root,
        )
    finally:
        fake.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    sweep = json.loads(done.stdout)
    rows = sweep["rows"]
    assert sweep["objective"] == "energy" and all(row["joules_per_sample"] for row in rows)
    cost = "joules_to_target" if sweep["best_by"] == "joules_to_target" else "joules_per_sample"
    cheapest = min(range(len(rows)), key=lambda index: rows[index][cost])
    assert sweep["best"] == cheapest
    assert sweep["best_beyond_noise"] == (not sweep["tied_with_best"])


@pytest.mark.slow
def test_autotune_adopts_by_energy_only_what_its_rounds_showed_more_frugal(tmp_path: Path) -> None:
    fake = FakePowercap(tmp_path / "powercap")
    fake.run_at(30.0)
    try:
        done = cli(
            ["autotune", "--model", "mlp", "--data", "digits", "--budget-s", "45", "--objective", "energy", "--json"], tmp_path, fake.root
        )
    finally:
        fake.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    tuned = json.loads(done.stdout)
    assert tuned["objective"] == "energy"
    if tuned["changes"]:
        assert tuned["energy_beyond_noise"] is True and tuned["energy_ratio_ci"][1] < 1
    else:
        assert any("energy" in note or "interleaved rounds" in note or "budget" in note for note in tuned["notes"])
