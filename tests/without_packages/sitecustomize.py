"""Every Python started with this folder on PYTHONPATH runs as if some installed packages were not, its children too.

DEVICE_LAB_HIDDEN_PACKAGES (comma-separated top-level module names) says which: TensorFlow and Qt, as on
the GPU machines this project is lent, or JAX (`tests/hidden_packages.py` puts this folder on the path
and sets the variable; unset, nothing is hidden). `WithoutPackages` takes the place of the path finder on
`sys.meta_path` and finds every module it finds except the hidden ones (and their submodules, and
their installed distributions): importing one raises ModuleNotFoundError ("No module named
'tensorflow'"), `importlib.util.find_spec` answers None and `importlib.metadata` does not list it,
exactly as where they are not installed (the app asks `find_spec` whether a backend is installed).
Python loads this file at start-up (`site` imports `sitecustomize`); the app's child processes keep
the environment.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import re
import sys
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

REFUSED = tuple(name for name in os.environ.get("DEVICE_LAB_HIDDEN_PACKAGES", "").split(",") if name)
_REFUSED_DISTRIBUTIONS = re.compile(
    "^(" + "|".join(re.escape(name).replace("_", "[-_]") for name in REFUSED) + r")([-_.].*)?$", re.IGNORECASE
)


def refused(name: str) -> bool:
    """`name` is one of REFUSED or a submodule of one."""
    return name.partition(".")[0] in REFUSED


class WithoutPackages(importlib.abc.MetaPathFinder):
    """The path finder, less the hidden packages."""

    def __init__(self, path_finder: Any) -> None:
        self.path_finder = path_finder

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if refused(name):
            return None
        return self.path_finder.find_spec(name, path, target)

    def find_distributions(self, *args: Any, **kwargs: Any) -> Iterable[Any]:
        for distribution in self.path_finder.find_distributions(*args, **kwargs):
            if not _REFUSED_DISTRIBUTIONS.match(distribution.metadata["Name"] or ""):
                yield distribution

    def invalidate_caches(self) -> None:
        self.path_finder.invalidate_caches()


def install() -> None:
    """Put the finder where the path finder was (once per process)."""
    if any(isinstance(finder, WithoutPackages) for finder in sys.meta_path):
        return
    sys.meta_path[:] = [WithoutPackages(finder) if finder is importlib.machinery.PathFinder else finder for finder in sys.meta_path]
    loaded = [name for name in sys.modules if refused(name)]
    if loaded:
        raise RuntimeError(f"already imported before sitecustomize: {', '.join(loaded)}")


install()
