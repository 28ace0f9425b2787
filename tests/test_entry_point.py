"""`python main.py` with a Python that lacks Device Lab's packages (run outside its virtual environment): one line naming
them and how to install, exit 1, before anything is imported; the lists it checks are pyproject.toml's dependencies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from main import CLI_PACKAGES, INSTALL, WINDOW_PACKAGES, packages_problem
from tests.hidden_packages import env_without
from tests.project_metadata import runtime_dependencies

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL_AT_RUN_TIME = {"tensorflow", "jax"}  # a job on another backend runs without it; a command that needs one says so


def test_the_packages_checked_are_pyproject_s_dependencies() -> None:
    assert runtime_dependencies() - OPTIONAL_AT_RUN_TIME == set(WINDOW_PACKAGES.values())
    assert set(CLI_PACKAGES.items()) < set(WINDOW_PACKAGES.items())
    assert packages_problem(WINDOW_PACKAGES) == ""  # this test's Python has them all


def main_py(args: list[str], hidden: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    env = env_without(hidden, DISPLAY="")
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_command_without_psutil_says_which_package_is_missing_and_how_to_install_in_one_line() -> None:
    done = main_py(["devices"], ("psutil",))
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("Device Lab: psutil is not installed for this Python") and INSTALL in line and sys.executable in line


def test_the_window_without_its_plotting_packages_names_them_before_it_looks_for_a_display() -> None:
    done = main_py([], ("pyqtgraph", "psygnal"))
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "pyqtgraph, psygnal are not installed" in line and "DISPLAY" not in line
    # the command line does not need them: a headless command goes on (and ends as usual: --help exits 0)
    assert main_py(["--help"], ("pyqtgraph", "psygnal", "PySide6")).returncode == 0
