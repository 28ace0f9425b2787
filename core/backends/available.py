"""Which Keras backends are installed here, without importing any of them, and how to install the others."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from core.config import BACKEND_TITLES, BACKENDS

INSTALL_HINTS = {
    "tensorflow": "pip install tensorflow",
    "jax": 'pip install -e ".[jax]" in the checkout (or: pip install jax), then Devices > Refresh (F5)',
    "torch": 'pip install -e ".[torch]" in the checkout (or: pip install torch; on Linux the PyPI wheel brings several GB of CUDA '
    "libraries), then Devices > Refresh (F5)",
}


@dataclass(frozen=True)
class BackendInfo:
    """One backend: its name ("jax"), title ("JAX"), whether it can be imported here, and how to install it."""

    name: str
    title: str
    installed: bool
    install_hint: str

    @property
    def note(self) -> str:
        """'' when installed, else why not and what to do."""
        return "" if self.installed else f"{self.title} is not installed: {self.install_hint}"


def is_installed(name: str) -> bool:
    """True when the backend's package can be imported (it is not imported here), installed since this process began or not."""
    importlib.invalidate_caches()  # the finders' listings of site-packages are cached: a package installed meanwhile was missed
    return importlib.util.find_spec(name) is not None


def backends() -> list[BackendInfo]:
    """Every backend Keras 3 trains on, installed or not, in BACKENDS order."""
    return [BackendInfo(name, BACKEND_TITLES[name], is_installed(name), INSTALL_HINTS[name]) for name in BACKENDS]


def installed_backends() -> list[str]:
    """The names of the installed backends."""
    return [info.name for info in backends() if info.installed]
