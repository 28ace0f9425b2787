"""The project modules one CLI command passes through: a call trace counting distinct project files.

    python benchmarks/run_path.py run --model mlp --no-verdict --steps 20

runs `main.py` with those arguments in this process under `sys.setprofile` (and
`threading.setprofile`) and counts the project files whose functions were
called. Calls made while a module is imported (its top-level code, and import
hooks) are left out: they are loading, not the command's path. Two figures:
up to the run's last write to its history row (`RunStore.finish_run`
returning), and for the whole command (printing the result included).
`--list` prints the files and the functions called in each.
"""

from __future__ import annotations

import inspect
import os
import runpy
import sys
import threading
from types import FrameType
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRY_POINTS = (os.path.join(ROOT, "main.py"), os.path.abspath(__file__))
"""Top-level code that runs the command rather than loading a module: main.py's and this script's."""


def _while_importing(frame: FrameType) -> bool:
    """Whether a call happens inside an import: a project module's top level, or the import system (a hook)."""
    caller = frame.f_back
    while caller is not None:
        name, code = caller.f_code.co_filename, caller.f_code.co_name
        if name.startswith("<frozen importlib") or (code == "<module>" and name.startswith(ROOT) and name not in ENTRY_POINTS):
            return True
        caller = caller.f_back
    return False


def trace(argv: list[str]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(files to the history row's last write, files for the whole command), each file -> functions called."""
    whole: dict[str, set[str]] = {}
    to_row: dict[str, set[str]] = {}
    row_written = False

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal row_written
        code = frame.f_code
        if event == "return" and code.co_name == "finish_run" and code.co_filename.endswith(os.path.join("history", "store.py")):
            row_written = True
        if event != "call" or not code.co_filename.startswith(ROOT) or ".venv" in code.co_filename or code.co_filename in ENTRY_POINTS:
            return
        if not code.co_flags & inspect.CO_OPTIMIZED or _while_importing(frame):
            return
        name = os.path.relpath(code.co_filename, ROOT)
        whole.setdefault(name, set()).add(code.co_name)
        if not row_written:
            to_row.setdefault(name, set()).add(code.co_name)

    sys.argv = [os.path.join(ROOT, "main.py"), *argv]
    sys.path.insert(0, ROOT)
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        runpy.run_path(os.path.join(ROOT, "main.py"), run_name="__main__")
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return to_row, whole


def main() -> int:
    argv = sys.argv[1:]
    listing = "--list" in argv
    argv = [arg for arg in argv if arg != "--list"]
    to_row, whole = trace(argv or ["run", "--model", "mlp", "--no-verdict", "--steps", "20"])
    if listing:
        for name in sorted(whole):
            mark = "" if name in to_row else "  (after the row's last write)"
            print(f"{name}: {', '.join(sorted(whole[name]))}{mark}", file=sys.stderr)
    print(
        f"project files passed through: {len(to_row)} to the history row's last write, {len(whole)} for the whole command", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
