"""crash_loss: how many steps does a `kill -9` of a CLI run lose from the history?

Each trial starts a CLI run (MLP, synthetic data, one step per call, a long
run) with its own empty history: `python -m benchmarks.crash_loss run ...` is
`python main.py run ...` with one change, a progress line after every call
instead of twice a second, so the steps done are known exactly. Its stderr is
read as it comes; at a random moment 1-6 s after its first steady-state line
the run gets SIGKILL (as a crash, an out-of-memory kill or a power cut of the
process would). `main.py history --json` must then show it as "interrupted",
with its steps and figures.

Steps done = the last step printed before the kill (a call's line is written
before the history sees the call, so the history can never be ahead). Steps
lost = steps done - steps in the history. The target allows the steps printed
in the last 1.5 s before the kill. Figure: the worst trial's loss, as a
fraction of its allowance (<= 1 passes), with lost / allowed steps per trial.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

from benchmarks import harness

NAME = "crash_loss"
TARGET = "steps lost <= those of the last 1.5 s"
WINDOW_S = 1.5
MODEL, STEPS = "mlp", 10_000_000
KILL_AFTER_S = (1.0, 6.0)
START_TIMEOUT_S = 300.0
_PROGRESS = re.compile(r"step (\d+)/\d+ .*?(\(warm-up\))?\s*$")


def run(quick: bool) -> list[harness.Result]:
    rng = random.Random(12)
    trials = [_trial(rng.uniform(*KILL_AFTER_S)) for _ in range(2 if quick else 6)]
    worst = max(trials, key=lambda t: t["lost_fraction"])
    detail = "lost / allowed steps: " + ", ".join(f"{t['lost_steps']}/{t['allowed_steps']}" for t in trials)
    moments = ", ".join(f"{t['killed_after_s']:.1f}" for t in trials)
    detail += f"; killed {moments} s after the first steady step; worst trial lost {worst['lost_s']:.2f} s of steps"
    return [
        harness.Result(
            NAME,
            worst["lost_fraction"],
            "x allowance",
            f"<= 1 ({TARGET}), worst of {len(trials)} kills",
            all(t["lost_fraction"] <= 1.0 for t in trials),
            detail,
            {"trials": trials},
        )
    ]


class _Progress:
    """The child's progress lines, each with the time it arrived: (perf_counter, step, warm-up)."""

    def __init__(self, stream) -> None:
        self.lines: list[tuple[float, int, bool]] = []
        self.text: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        pending = b""
        while chunk := os.read(stream.fileno(), 65536):
            now = time.perf_counter()
            pending += chunk
            *complete, pending = re.split(rb"[\r\n]", pending)
            for raw in complete:
                line = raw.decode("utf-8", "replace")
                self.text.append(line)
                match = _PROGRESS.search(line)
                if match:
                    self.lines.append((now, int(match.group(1)), bool(match.group(2))))

    def steady(self) -> list[tuple[float, int, bool]]:
        return [line for line in self.lines if not line[2]]

    def join(self) -> None:
        self._thread.join(30)


def _trial(kill_after_s: float) -> dict:
    env = harness.child_env()
    command = [sys.executable, "-m", f"benchmarks.{NAME}", "run", "--model", MODEL, "--steps", str(STEPS)]
    child = subprocess.Popen(command, cwd=harness.REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    progress = _Progress(child.stderr)
    try:
        deadline = time.perf_counter() + START_TIMEOUT_S
        while not progress.steady():
            if child.poll() is not None or time.perf_counter() > deadline:
                raise harness.BenchmarkError("the run never reached a steady step: " + " | ".join(progress.text[-5:]))
            time.sleep(0.02)
        first_steady = progress.steady()[0][0]
        time.sleep(max(0.0, first_steady + kill_after_s - time.perf_counter()))
        killed_at = time.perf_counter()
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    progress.join()  # lines written before the kill are still in the pipe
    return _measure(progress.lines, killed_at, first_steady, _stored_run(env))


def _stored_run(env: dict[str, str]) -> dict:
    command = [sys.executable, "main.py", "history", "--json"]
    listed = subprocess.run(command, cwd=harness.REPO, env=env, capture_output=True, text=True, timeout=120)
    runs = json.loads(listed.stdout or "[]")
    if len(runs) != 1 or runs[0]["status"] != "interrupted":
        raise harness.BenchmarkError(f"expected one interrupted run in the history, got {runs} ({listed.stderr[-500:]})")
    if runs[0]["samples_per_s"] is None:
        raise harness.BenchmarkError(f"the interrupted run has no figures: {runs[0]}")
    return runs[0]


def _measure(lines: list[tuple[float, int, bool]], killed_at: float, first_steady: float, stored: dict) -> dict:
    """Steps done (last printed), steps stored, and the steps printed in the window before the kill."""
    done = max(step for _, step, _ in lines)
    before_window = max((step for arrived, step, _ in lines if arrived <= killed_at - WINDOW_S), default=0)
    lost = max(0, done - stored["steps"])
    allowed = done - before_window
    rate = allowed / WINDOW_S
    return {
        "killed_after_s": killed_at - first_steady,
        "steps_done": done,
        "steps_in_history": stored["steps"],
        "lost_steps": lost,
        "allowed_steps": allowed,
        "lost_fraction": lost / allowed if allowed else float(lost > 0),
        "lost_s": lost / rate if rate else 0.0,
        "history_samples_per_s": stored["samples_per_s"],
    }


def _cli(argv: list[str]) -> int:
    """`main.py` with a progress line after every call."""
    from core.cli import main as cli_main
    from core.cli import output

    output.PROGRESS_INTERVAL_S = 0.0
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(_cli(sys.argv[1:]))
