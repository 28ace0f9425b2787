"""`python main.py` where the window cannot open: a missing xcb library or no X display is one line and exit 1, not Qt's abort."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from main import XCB_LIBRARIES, can_connect, missing_libraries, platform_name, window_problem

ROOT = Path(__file__).resolve().parents[2]
ABSENT = "libdevice-lab-absent.so.9"  # no such library anywhere
WITH_ABSENT = {**XCB_LIBRARIES, ABSENT: "device-lab-absent9"}


def free_display() -> str:
    """An X display number nothing serves here."""
    number = next(n for n in range(917, 1017) if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists())
    return f":{number}"


def app_env(tmp_path: Path, **changes: str) -> dict[str, str]:
    env = {
        key: value for key, value in os.environ.items() if key not in ("DISPLAY", "QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")
    }
    env.update(
        DEVICE_LAB_DATA_DIR=str(tmp_path / "data"),
        DEVICE_LAB_SETTINGS_DIR=str(tmp_path / "settings"),
        DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"),
    )
    env.update(changes)
    return env


def test_missing_libraries_names_only_those_the_loader_cannot_load():
    assert missing_libraries([ABSENT, "libc.so.6", "libm.so.6"]) == [ABSENT]
    assert missing_libraries(["libc.so.6"]) == []


def test_a_missing_xcb_library_is_one_line_naming_it_and_the_package_to_install():
    problem = window_problem([], {"DISPLAY": ":0"}, WITH_ABSENT)
    assert "\n" not in problem
    assert ABSENT in problem and "apt-get install" in problem and "device-lab-absent9" in problem.split("apt-get install", 1)[1]
    assert "python main.py --help" in problem


def test_the_check_only_applies_to_the_xcb_platform():
    assert platform_name([], {}) == "xcb"
    assert platform_name([], {"QT_QPA_PLATFORM": "xcb:nograb"}) == "xcb"
    assert platform_name([], {"QT_QPA_PLATFORM": "offscreen"}) == "offscreen"
    assert platform_name(["-platform", "offscreen"], {"QT_QPA_PLATFORM": "xcb"}) == "offscreen"
    assert platform_name([], {"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0"}) == "wayland"
    assert window_problem([], {"QT_QPA_PLATFORM": "offscreen"}, WITH_ABSENT) == ""
    assert window_problem(["-platform", "offscreen"], {}, WITH_ABSENT) == ""


def test_no_display_or_one_nobody_serves_is_said_plainly():
    no_display = window_problem([], {}, {"libc.so.6": "libc6"})
    assert no_display.startswith("Device Lab: no X display") and "DISPLAY is not set" in no_display
    display = free_display()
    assert not can_connect(display)
    unreachable = window_problem([], {"DISPLAY": display}, {"libc.so.6": "libc6"})
    assert unreachable.startswith("Device Lab: could not connect to the X display") and repr(display) in unreachable


@pytest.mark.timeout(60)
def test_main_without_a_display_prints_one_line_and_exits_1_before_qt_loads(tmp_path):
    out = subprocess.run([sys.executable, "main.py"], cwd=ROOT, env=app_env(tmp_path), capture_output=True, text=True, timeout=50)
    assert out.returncode == 1, out.stderr[-2000:]
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Device Lab: "), out.stderr
    assert "Qt platform plugin" not in out.stderr and out.stdout == ""
    if not missing_libraries(XCB_LIBRARIES):
        assert "DISPLAY is not set" in lines[0]


ABSENT_SCRIPT = f"""
import sys
import main
main.XCB_LIBRARIES[{ABSENT!r}] = "device-lab-absent9"
code = main.main([])
print("PySide6 loaded:", "PySide6" in sys.modules)
sys.exit(code)
"""


@pytest.mark.timeout(60)
def test_main_with_a_missing_library_names_it_and_the_install_command(tmp_path):
    env = app_env(tmp_path, DISPLAY=free_display())
    out = subprocess.run([sys.executable, "-c", ABSENT_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=50)
    assert out.returncode == 1, out.stderr[-2000:]
    [line] = out.stderr.splitlines()
    assert ABSENT in line and "apt-get install" in line and "device-lab-absent9" in line
    assert out.stdout.strip() == "PySide6 loaded: False"


@pytest.fixture
def xvfb():
    """A real X server (Xvfb) on a display it picks itself (so no other test's server can take it), stopped afterwards."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    reader, writer = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(writer), "-nolisten", "tcp", "-screen", "0", "1280x800x24"],
        pass_fds=(writer,),
        stderr=subprocess.DEVNULL,
    )
    os.close(writer)
    try:
        ready, _, _ = select.select([reader], [], [], 20)
        assert ready, "Xvfb did not start within 20 s"
        number = os.read(reader, 32).decode().strip()
        assert number.isdigit(), f"Xvfb gave no display number ({number!r})"
        yield f":{number}"
    finally:
        os.close(reader)
        server.terminate()
        server.wait(10)


@pytest.mark.slow
def test_a_server_resetting_after_its_last_client_left_still_counts_as_reachable(xvfb):
    """Xvfb refuses connections for a moment after each last client leaves; a bare probe failed ~6% of such calls."""
    if missing_libraries(["libxcb.so.1"]):
        pytest.skip("libxcb is not installed (apt-get install libxcb1)")
    assert all(can_connect(xvfb) for _ in range(100))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_main_opens_the_window_on_a_real_x_server_and_sigterm_closes_it(tmp_path, xvfb):
    if missing_libraries(XCB_LIBRARIES):
        assert window_problem([], {"DISPLAY": xvfb}).startswith("Device Lab: the window needs")
        return
    assert can_connect(xvfb) and window_problem([], {"DISPLAY": xvfb}) == ""
    env = app_env(tmp_path, DISPLAY=xvfb)
    app = subprocess.Popen([sys.executable, "main.py"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        history = tmp_path / "data" / "history.sqlite3"
        deadline = time.monotonic() + 180
        while not history.exists():  # the History panel opens it once the devices are listed
            assert app.poll() is None, app.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the window did not list the devices within 180 s"
            time.sleep(0.2)
        app.send_signal(signal.SIGTERM)
        _, errors = app.communicate(timeout=60)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(10)
    assert app.returncode == 128 + signal.SIGTERM, errors[-2000:]
    assert "SIGTERM received" in errors and "Qt platform plugin" not in errors
