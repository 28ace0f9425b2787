"""Device Lab entry point: no arguments start the window, a subcommand runs headless.

python main.py                      # the desktop app
python main.py devices | models | run | compare | history | export | worker ...
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import time
from collections.abc import Iterable, Mapping

# What Qt's xcb platform plugin loads (`ldd` on PySide6's plugins/platforms/libqxcb.so and on
# lib/libQt6XcbQpa.so.6), each with its Debian/Ubuntu package. Qt aborts without any of them.
XCB_LIBRARIES = {
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libfontconfig.so.1": "libfontconfig1",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libdbus-1.so.3": "libdbus-1-3",
}
HEADLESS_HINT = "the CLI needs no display: python main.py --help"
# pyproject.toml's dependencies each entry imports, by import name, with the distribution pip installs. TensorFlow and JAX are
# left out: a job on another backend runs without them, and a command that needs one says so (a test holds this to pyproject).
CLI_PACKAGES = {
    "numpy": "numpy",
    "scipy": "scipy",
    "psutil": "psutil",
    "cpuinfo": "py-cpuinfo",
    "platformdirs": "platformdirs",
    "keras": "keras",
}
WINDOW_PACKAGES = {**CLI_PACKAGES, "PySide6": "PySide6-Essentials", "pyqtgraph": "pyqtgraph", "psygnal": "psygnal"}
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/python main.py"


def main(argv: list[str] | None = None) -> int:
    """Start the GUI, or run the CLI subcommand named in `argv`."""
    argv = sys.argv[1:] if argv is None else argv
    headless = bool(argv) and not argv[0].startswith("-platform")
    problem = packages_problem(CLI_PACKAGES if headless else WINDOW_PACKAGES)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    if headless:
        from core.cli import main as cli_main

        return cli_main(argv)
    problem = window_problem(argv, os.environ)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    from gui.app import run_app

    return run_app([sys.argv[0], *argv])


def packages_problem(packages: Mapping[str, str]) -> str:
    """Which of `packages` (import name: distribution) this Python lacks and how to install Device Lab, in one line; "" when none.

    Checked before anything is imported: Python's own answer is a traceback ("No module named 'psutil'").
    """
    missing = [distribution for module, distribution in packages.items() if importlib.util.find_spec(module) is None]
    if not missing:
        return ""
    verb = "is" if len(missing) == 1 else "are"
    return (
        f"Device Lab: {', '.join(missing)} {verb} not installed for this Python ({sys.executable}). Install Device Lab into a "
        f"virtual environment and start it from there: {INSTALL} (README: Install and start)"
    )


def window_problem(argv: list[str], environ: Mapping[str, str], libraries: Mapping[str, str] = XCB_LIBRARIES) -> str:
    """Why the window cannot open on X11 (a library Qt's xcb plugin needs, or no display), in one line; "" when it can.

    Checked before Qt loads: Qt's own answer is an abort ("Could not load the Qt platform plugin xcb").
    Only for the xcb platform, the default on Linux outside a Wayland session.
    """
    if platform_name(argv, environ) != "xcb":
        return ""
    missing = missing_libraries(libraries)
    if missing:
        packages = " ".join(dict.fromkeys(libraries[name] for name in missing))
        return (
            f"Device Lab: the window needs {', '.join(missing)} (for Qt's xcb platform), not found on this system. "
            f"Install with: apt-get install {packages} (as root; Debian/Ubuntu names); {HEADLESS_HINT}"
        )
    display = environ.get("DISPLAY", "")
    if not display:
        return f"Device Lab: no X display to open the window on (DISPLAY is not set). Start it from a desktop session; {HEADLESS_HINT}"
    if not can_connect(display):
        return f"Device Lab: could not connect to the X display {display!r} (DISPLAY). Check that the X server runs and lets you in (xauth); {HEADLESS_HINT}"
    return ""


def platform_name(argv: list[str], environ: Mapping[str, str]) -> str:
    """The Qt platform plugin the window will try first: -platform, QT_QPA_PLATFORM, else Linux's default."""
    if "-platform" in argv[:-1]:
        chosen = argv[argv.index("-platform") + 1]
    else:
        chosen = environ.get("QT_QPA_PLATFORM", "")
    if not chosen:
        if not sys.platform.startswith("linux"):
            return ""
        wayland = environ.get("XDG_SESSION_TYPE") == "wayland" and environ.get("WAYLAND_DISPLAY")
        return "wayland" if wayland else "xcb"
    return chosen.split(";")[0].split(":")[0].strip()


def missing_libraries(names: Iterable[str]) -> list[str]:
    """The shared libraries among `names` that the dynamic loader cannot load, in order."""
    missing = []
    for name in names:
        try:
            ctypes.CDLL(name)
        except OSError:
            missing.append(name)
    return missing


def can_connect(display: str, attempts: int = 5) -> bool:
    """True when libxcb can connect to the X server `display` (as Qt will); the connection is closed at once.

    A server with no clients left resets itself (Xvfb, xvfb-run) and refuses connections for a few milliseconds,
    so a refusal is retried a few times, 0.1 s apart, before it counts.
    """
    xcb = ctypes.CDLL("libxcb.so.1")
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    for attempt in range(attempts):
        if attempt:
            time.sleep(0.1)
        connection = xcb.xcb_connect(display.encode(), None)
        try:
            if xcb.xcb_connection_has_error(connection) == 0:
                return True
        finally:
            xcb.xcb_disconnect(connection)
    return False


if __name__ == "__main__":
    sys.exit(main())
