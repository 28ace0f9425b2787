"""Start the GUI: window first, TensorFlow later (in a worker thread)."""

from __future__ import annotations

import os
import sys

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget

from core.logs import setup_logging
from core.machine.runtime import quiet_tensorflow_logs
from gui.dialogs.about import app_version
from gui.icons import app_icon
from gui.main_window import MainWindow
from gui.qt_threads import wait_for_threads
from gui.settings import APPLICATION, ORGANIZATION, effective_runtime_settings, open_settings

EXIT_WAIT_S = 120.0
FIRST_PAINT_FALLBACK_MS = 2000


class _AfterFirstPaint(QObject):
    """Calls `callback` once, just after the window's first expose (and so its first paint) or after a fallback delay.

    Detection imports TensorFlow in a thread that holds the GIL for most of two
    seconds; started before the first paint, it would hold back the window too.
    """

    def __init__(self, window: QWidget, callback):
        super().__init__(window)
        self._callback = callback
        self._called = False
        window.windowHandle().installEventFilter(self)
        QTimer.singleShot(FIRST_PAINT_FALLBACK_MS, self._call)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Expose and watched.isExposed():
            watched.removeEventFilter(self)
            QTimer.singleShot(0, self._call)  # after this expose's paint
        return False

    def _call(self) -> None:
        if not self._called:
            self._called = True
            self._callback()


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
    settings = open_settings()
    runtime, note = effective_runtime_settings(settings)
    window = MainWindow(settings, runtime, note, charts_later=True)
    window.show()
    _AfterFirstPaint(window, window.start)
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
