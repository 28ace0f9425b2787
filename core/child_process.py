"""Child processes that may hang or die (a TPU probe, a ceiling measurement, a user's model file).

They start in a process group of their own (`start_new_session=True` on POSIX), so
`kill_process_group` ends the child and anything it started, never the app.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def child_env(hide_gpus: bool = False) -> dict[str, str]:
    """The environment for a `python -m core...` child: the project importable, TensorFlow's C++ log quiet
    (unless the user set its level), and with `hide_gpus` no GPU (a child that must not take GPU memory)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if hide_gpus:
        env["CUDA_VISIBLE_DEVICES"] = "-1"
    return env


def kill_process_group(process: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group on POSIX (it leads its own), else the child alone."""
    if os.name == "posix":
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    else:
        process.kill()


def read_answer(path: Path) -> dict[str, Any] | None:
    """The JSON answer a child wrote to `path` (its `--out`); None when it wrote none or half of one (it died first)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def last_line(text: str, limit: int, default: str = "") -> str:
    """The last non-blank line of a child's stderr, its last `limit` characters: what it said before it ended."""
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else default)[-limit:]


def exit_description(returncode: int) -> str:
    """How a child ended, in words: "exit code 3", "killed by SIGKILL"."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"
