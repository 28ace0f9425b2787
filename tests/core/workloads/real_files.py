"""What the two real-file test modules share: the step count and `main.py run` on a file in a real process.

The corpus is split in two modules (keras.applications and tf.keras 2 files in
test_real_files.py; keras-hub, keras.io and custom-layer files in
test_real_files_text_and_custom.py), each making only its own files once, so
that `--dist loadfile` can put them on different workers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STEPS = 2


def cli_run(model: Path, tmp_path: Path, *extra: str) -> tuple[dict, str]:
    """`main.py run --model FILE --steps N --json` in a real process: (the JSON summary, stderr)."""
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    command = [sys.executable, "main.py", "run", "--model", str(model), "--steps", str(STEPS), "--batch-size", "4", "--json"]
    done = subprocess.run([*command, "--no-verdict", *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["steps"] == STEPS, result
    return result, done.stderr
