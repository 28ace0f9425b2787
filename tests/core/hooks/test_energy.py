"""Energy of a run's steady window, from a stand-in powercap tree (`tests.fakes.fake_powercap`: this VM has no RAPL counters)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunConfig
from core.hooks import energy
from core.hooks.energy import EnergyHook
from core.machine.energy import powercap_counters
from core.results import RunResult, RunStatus, StepRecord
from core.training.hooks import RunContext
from tests.fakes.fake_powercap import FakePowercap

ROOT = Path(__file__).resolve().parents[3]
BATCH = 32


@pytest.fixture(autouse=True)
def every_steps_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `on_step_records` reads the counters here (a real run reads at most every READ_EVERY_S)."""
    monkeypatch.setattr(energy, "READ_EVERY_S", 0.0)


def hook_on(fake: FakePowercap, in_rounds: bool = False) -> EnergyHook:
    hook = EnergyHook(in_rounds=in_rounds, counters_for=lambda devices: powercap_counters(fake.root))
    hook.on_run_start(RunContext(RunConfig(batch_size=BATCH), 10, 1, ("CPU:0",), None))
    return hook


def records(first: int, count: int, warmup: bool = False) -> list[StepRecord]:
    return [StepRecord(step, 1.0, 0.01, warmup) for step in range(first, first + count)]


def finished(hook: EnergyHook) -> RunResult:
    return hook.amend_result(RunResult(status=RunStatus.COMPLETED, config={}))


def test_only_the_steady_windows_joules_are_counted(tmp_path: Path) -> None:
    fake = FakePowercap(tmp_path / "powercap")
    hook = hook_on(fake)
    fake.advance(500.0)  # the warm-up: tracing and compiling, not the model's training
    hook.on_step_records(records(1, 1, warmup=True))
    hook.on_step_records(records(2, 1))  # the window opens after this step: it is not counted
    for first in (3, 5, 7):
        fake.advance(2.0)
        hook.on_step_records(records(first, 2))
    result = finished(hook)
    assert result.energy is not None and result.energy["joules"] == pytest.approx(6.0, rel=1e-6)
    assert result.energy["samples"] == 6 * BATCH
    assert result.joules_per_sample == pytest.approx(6.0 / (6 * BATCH), rel=1e-6)
    assert result.energy["samples_per_joule"] == pytest.approx(6 * BATCH / 6.0, rel=1e-6)
    assert result.energy["counters"] == ["powercap intel-rapl:0 (package-0)", "powercap intel-rapl:0:0 (dram)"]


def test_a_counter_that_wraps_during_the_window_is_unwrapped(tmp_path: Path) -> None:
    fake = FakePowercap(tmp_path / "powercap", start_joules=0.0, range_uj=10_000_000)  # wraps at 10 J
    fake.advance(9.0)
    hook = hook_on(fake)
    hook.on_step_records(records(1, 1))
    fake.advance(3.0)  # 9 J -> 12 J: the counter reads 2 J
    hook.on_step_records(records(2, 4))
    result = finished(hook)
    assert result.energy is not None and result.energy["joules"] == pytest.approx(3.0, rel=1e-6)


def test_a_counter_that_did_not_advance_is_said_not_a_zero(tmp_path: Path) -> None:
    fake = FakePowercap(tmp_path / "powercap")
    hook = hook_on(fake)
    hook.on_step_records(records(1, 1))
    hook.on_step_records(records(2, 3))
    result = finished(hook)
    assert result.energy is None and result.joules_per_sample is None
    assert "did not advance" in result.energy_reason


def test_in_rounds_another_jobs_turn_is_not_counted(tmp_path: Path) -> None:
    fake = FakePowercap(tmp_path / "powercap")
    hook = hook_on(fake, in_rounds=True)
    hook.on_step_records(records(1, 1))
    fake.advance(1.0)
    hook.on_step_records(records(2, 2))
    hook.turn_ended()  # the gate: this run's turn is over
    fake.advance(50.0)  # another job's turn while this one waited
    hook.turn_began()
    fake.advance(1.0)
    hook.on_step_records(records(4, 2))
    result = hook.amend_result(RunResult(status=RunStatus.COMPLETED, config={}, rounds={"spans": [[2, 3], [4, 5]]}))
    assert result.energy is not None and result.energy["joules"] == pytest.approx(2.0, rel=1e-6)
    assert result.energy["samples"] == 4 * BATCH
    assert result.energy["rounds_joules_per_sample"] == pytest.approx([1.0 / (2 * BATCH), 1.0 / (2 * BATCH)])


def test_without_counters_the_run_says_why(tmp_path: Path) -> None:
    counters, reason = powercap_counters(tmp_path / "no-such-folder")
    assert counters == [] and "does not exist" in reason
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no intel-rapl zones" in powercap_counters(empty)[1]


@pytest.mark.slow
def test_a_real_run_reports_the_stand_in_counters_power_in_json_history_and_export(tmp_path: Path) -> None:
    fake = FakePowercap(tmp_path / "powercap")
    fake.run_at(40.0)
    env = {**os.environ, "DEVICE_LAB_POWERCAP_ROOT": str(fake.root), "DEVICE_LAB_DATA_DIR": str(tmp_path / "data")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    try:
        done = cli("run", "--model", "mlp", "--data", "digits", "--steps", "300", "--no-verdict", "--json")
    finally:
        fake.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    energy = json.loads(done.stdout)["energy"]
    assert energy["watts"] == pytest.approx(40.0, rel=0.25)  # the stand-in's power, over the steady window's readings
    assert energy["samples"] <= 299 * 64 and energy["joules_per_sample"] == pytest.approx(energy["joules"] / energy["samples"])
    [stored] = json.loads(cli("history", "--json").stdout)
    assert stored["joules_per_sample"] == pytest.approx(energy["joules_per_sample"])
    assert stored["energy"]["joules"] == pytest.approx(energy["joules"])
    exported = tmp_path / "runs.json"
    assert cli("export", str(stored["id"]), "--json", str(exported)).returncode == 0
    assert json.loads(exported.read_text())["runs"][0]["energy"]["joules"] == pytest.approx(energy["joules"])
