"""The CLI when things go wrong, as a user meets it: real processes, real signals, real SQLite files.

A run killed with SIGKILL stays in the history as interrupted with its steps and
figures; SIGTERM and SIGHUP stop like Ctrl-C; a second signal ends at once; a
history that cannot be written never costs the printed result nor the file.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.history.store import RunStore
from tests.core.history.test_store import make_result
from tests.core.read_only_paths import read_only
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 240


@pytest.fixture
def cli_env(tmp_path):
    return dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))


def cli(args, env, timeout=240):
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def stored_steps(env) -> int:
    """The most steps any run in the history holds so far (the recorder appends about once a second)."""
    path = Path(env["DEVICE_LAB_DATA_DIR"]) / "history.sqlite3"
    if not path.exists():
        return 0
    with RunStore.open(path) as store:
        return max((run.steps for run in store.list_runs()), default=0)


def history(env) -> list[dict]:
    listed = cli(["history", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


class Running:
    """A CLI run in the background, its stderr read as it comes (progress lines end in \\r)."""

    def __init__(self, args, env):
        self.process = subprocess.Popen(
            [sys.executable, "main.py", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.stderr = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while chunk := os.read(self.process.stderr.fileno(), 4096):
            self.stderr += chunk.decode("utf-8", "replace")

    def steps_printed(self) -> int:
        return max((int(n) for n in re.findall(r"step (\d+)/", self.stderr)), default=0)

    def steady_lines(self) -> list[str]:
        return [line for line in re.split(r"[\r\n]", self.stderr) if line.startswith("step ") and "(warm-up)" not in line]

    def wait_for_step(self, step: int, steady: bool = True) -> None:
        """Until step `step` is printed (and, if `steady`, a step past the warm-up)."""
        self.wait_for(lambda: self.steps_printed() >= step and (not steady or bool(self.steady_lines())), f"step {step}")

    def wait_for(self, condition, what: str, every_s: float = 0.05) -> None:
        """Until `condition()` holds while the run goes on; fails when the run ends first or after START_TIMEOUT_S."""

        def met() -> bool:
            assert self.process.poll() is None, f"the run ended before {what}: {self.stderr[-2000:]}"
            return condition()

        wait_until(met, f"{what}: {self.stderr[-2000:]}", START_TIMEOUT_S, every_s)

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        stdout = self.process.stdout.read().decode()
        code = self.process.wait(timeout)
        self._reader.join(10)
        return code, stdout, self.stderr


@pytest.mark.slow
def test_a_run_killed_with_sigkill_reads_back_as_interrupted_with_its_steps_and_figures(cli_env, tmp_path):
    run = Running(["run", "--model", "mlp", "--steps", "1000000", "--batch-size", "32"], cli_env)
    try:
        run.wait_for_step(2)
        first = stored_steps(cli_env)
        run.wait_for(lambda: stored_steps(cli_env) > max(first, 1), "an append after the warm-up", every_s=0.2)
        printed = run.steps_printed()
        run.process.send_signal(signal.SIGKILL)
    finally:
        code, _, stderr = run.finish()
    assert code == -signal.SIGKILL
    (stored,) = history(cli_env)
    assert stored["status"] == "interrupted" and "steps were kept" in stored["message"]
    assert 1 < stored["steps"] <= 1000000 and stored["steps"] >= printed // 2, (stored["steps"], printed)
    assert stored["samples_per_s"] > 0 and stored["step_time_median_ms"] > 0 and stored["warmup_s"] > 0
    exported = tmp_path / "killed.json"
    assert cli(["export", str(stored["id"]), "--json", str(exported)], cli_env).returncode == 0
    (full,) = json.loads(exported.read_text())["runs"]
    assert full["status"] == "interrupted" and len(full["losses"]) == len(full["step_times_s"]) == stored["steps"]


@pytest.mark.slow
def test_sigterm_stops_like_ctrl_c_with_the_partial_result_saved(cli_env):
    run = Running(["run", "--model", "mlp", "--steps", "1000000", "--json"], cli_env)
    try:
        run.wait_for_step(2)
        run.process.send_signal(signal.SIGTERM)
    finally:
        code, stdout, stderr = run.finish()
    result = json.loads(stdout)
    assert code == 1 and result["status"] == "stopped"
    assert 0 < result["steps"] < 1000000 and result["samples_per_s"] > 0
    assert "SIGTERM: stopping after the current step call" in stderr and "Traceback" not in stderr
    (stored,) = history(cli_env)
    assert (stored["status"], stored["steps"]) == ("stopped", result["steps"])
    assert f"saved as run {stored['id']} in the history" in stderr


CALL_STEPS, CALL_BATCH = 3000, 2048


@pytest.mark.slow
def test_a_second_signal_ends_at_once_and_leaves_the_run_interrupted(cli_env):
    # Calls of CALL_STEPS MLP steps of CALL_BATCH samples, about 8 s at the 2.8 ms a step of a quiet 2-core machine: the second signal must land
    # while a call is in flight. A call's step line reaches stderr up to about a second after the call ends, so with 1 s
    # calls (6000 steps) the call the first signal waited for sometimes ended before the second signal came, and the
    # process, its handlers already given back, died of the SIGTERM itself.
    sizes = ["--steps-per-call", str(CALL_STEPS), "--batch-size", str(CALL_BATCH)]
    run = Running(["run", "--model", "mlp", "--steps", "1000000", *sizes, "--json"], cli_env)
    try:
        run.wait_for_step(CALL_STEPS, steady=False)  # the first call (warm-up) is done and stored
        run.process.send_signal(signal.SIGHUP)
        run.wait_for(lambda: "SIGHUP: stopping after the current step call" in run.stderr, "the first signal handled")
        run.process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        code = run.process.wait(30)
        took = time.monotonic() - sent
    finally:
        code, stdout, stderr = run.finish()
    assert code == 1 and stdout == ""
    assert took < 10, f"the second signal took {took:.1f} s to end the run"
    assert "SIGHUP: stopping after the current step call" in stderr and "SIGTERM again: stopping now" in stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    (stored,) = history(cli_env)
    assert (stored["status"], stored["steps"]) == ("interrupted", CALL_STEPS), stored


@pytest.fixture
def one_stored_run(cli_env) -> Path:
    path = Path(cli_env["DEVICE_LAB_DATA_DIR"]) / "history.sqlite3"
    with RunStore.open(path) as store:
        store.save(make_result(steps=25))
    return path


@pytest.mark.slow
def test_a_read_only_history_leaves_the_result_printed_and_the_file_untouched(cli_env, one_stored_run: Path):
    before = one_stored_run.read_bytes()
    with read_only(one_stored_run):
        out = cli(["run", "--no-verdict", "--model", "mlp", "--data", "digits", "--steps", "6", "--json"], cli_env)
        listed = cli(["history", "--json"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["status"] == "completed"
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "can only be read (the file is read-only)" in warnings[0] and "This run is not saved" in warnings[0]
    assert one_stored_run.read_bytes() == before
    assert not [p for p in one_stored_run.parent.iterdir() if ".corrupt-" in p.name]
    assert [run["steps"] for run in json.loads(listed.stdout)] == [25]


@pytest.mark.slow
def test_a_history_folder_that_is_a_file_leaves_the_result_printed(cli_env):
    Path(cli_env["DEVICE_LAB_DATA_DIR"]).write_text("a file where the folder should be")
    out = cli(["run", "--no-verdict", "--model", "mlp", "--data", "digits", "--steps", "4"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "status" in out.stdout and "completed" in out.stdout
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "is a file, not a folder" in warnings[0]
    listed = cli(["history"], cli_env)
    assert listed.returncode == 2 and "is a file, not a folder" in listed.stderr and "Traceback" not in listed.stderr


@pytest.mark.slow
@pytest.mark.parametrize("where", ["missing/runs.csv", ".", "/proc/device-lab.csv", "locked/runs.csv"])
def test_export_to_a_bad_path_is_exit_2_and_leaves_no_partial_file(cli_env, one_stored_run: Path, tmp_path: Path, where: str):
    exports = tmp_path / "exports"
    locked = exports / "locked"
    locked.mkdir(parents=True)
    target = Path(where) if where.startswith("/") else exports / where
    folder = target if target.is_dir() else target.parent

    def ours() -> list[Path] | None:  # /proc also lists every process, which come and go meanwhile
        return sorted(p for p in folder.iterdir() if not p.name.isdigit()) if folder.is_dir() else None

    before = ours()
    with read_only(locked):
        out = cli(["export", "1", "--csv", str(target)], cli_env)
    assert out.returncode == 2, out.stderr
    assert f"Can not export to {target}" in out.stderr and "Traceback" not in out.stderr
    assert ours() == before
    assert not target.is_file()
