"""Start the GUI: window first, TensorFlow later (in a worker thread)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

from core.logs import setup_logging
from core.runtime import quiet_tensorflow_logs
from gui.about_dialog import app_version
from gui.icons import app_icon
from gui.main_window import MainWindow
from gui.settings import APPLICATION, ORGANIZATION, effective_runtime_settings, open_settings
from gui.workers import wait_for_threads

STYLE_SHEET = Path(__file__).resolve().parent.parent / "resources" / "style.qss"
EXIT_WAIT_S = 120.0


def run_app(argv: list[str]) -> int:
    """Show the main window, run the event loop, and restart the process when the user asked to."""
    try:
        setup_logging()  # the app's and TensorFlow's log to a file and the Log dock, not the terminal
    except OSError as exc:
        print(f"Device Lab: cannot write the log file ({exc}); set DEVICE_LAB_LOG_DIR to a writable folder.", file=sys.stderr)
        quiet_tensorflow_logs()
    app = QApplication.instance() or QApplication(argv)
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationVersion(app_version())
    app.setDesktopFileName("device-lab")
    app.setWindowIcon(app_icon())
    app.setStyle("Fusion")
    if STYLE_SHEET.exists():
        app.setStyleSheet(STYLE_SHEET.read_text(encoding="utf-8"))
    settings = open_settings()
    runtime, note = effective_runtime_settings(settings)
    window = MainWindow(settings, runtime, note)
    window.show()
    window.start()
    code = app.exec()
    restart = window.restart_requested
    settings.sync()
    if not wait_for_threads(EXIT_WAIT_S):
        # A thread stuck inside TensorFlow cannot be interrupted; exiting the normal way would
        # destroy its QThread while it runs and abort. Leave without tearing anything down.
        print("Device Lab: a background task did not end; exiting without cleanup.", file=sys.stderr)
        os._exit(code)
    if restart:
        os.execv(sys.executable, [sys.executable, *sys.argv])
    return code
