"""`max-batch` when not even batch 1 fits in the --memory-limit given: the answer, then one line saying the limit is below
what the model needs, and exit code 2 (it used to exit 0 with "none fit"). A real `main.py` process; its probes are real
child processes stopped at the budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_memory_limit_below_what_the_model_needs_exits_2_with_one_line_saying_so(tmp_path: Path) -> None:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    done = subprocess.run(
        [sys.executable, "main.py", "max-batch", "--model", "mlp", "--memory-limit", "1MiB", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer["max_batch"] == 0 and answer["largest_fitting"] == 0 and answer["smallest_failing"] == 1, "the answer is still given"
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert line.startswith("error: --memory-limit 1MiB is below what the model needs") and "give a larger --memory-limit" in line
    assert "Traceback" not in done.stderr
