"""pyproject.toml's runtime dependencies by distribution name, as declared: what tests hold a list of packages to.

Read with a pattern, not `tomllib` (Python 3.11+; the project supports 3.10)."""

from __future__ import annotations

import re
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def runtime_dependencies() -> set[str]:
    """{"tensorflow", "keras", "PySide6-Essentials", ...}: each entry of [project] dependencies, its version and extras left off."""
    block = re.search(r"^dependencies = \[(.*?)^\]", PYPROJECT.read_text(), re.S | re.M)
    assert block is not None, f"no dependencies list in {PYPROJECT}"
    declared = re.findall(r'^\s*"([^"]+)"', block[1], re.M)
    return {re.split(r"[<>=!~\[ ;(]", requirement, maxsplit=1)[0] for requirement in declared}
