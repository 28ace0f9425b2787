"""Start the GUI: window first, TensorFlow later (in a worker thread)."""

from __future__ import annotations

import os
import signal
import socket
import sys

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QSocketNotifier, QTimer
from PySide6.QtGui import QWindow
from PySide6.QtWidgets import QApplication, QWidget

from core.logs import setup_logging
from core.machine.runtime import quiet_tensorflow_logs
from gui.dialogs.about import app_version
from gui.icons import app_icon
from gui.main_window import MainWindow
from gui.plotting.theme import apply_theme
from gui.qt_threads import wait_for_threads
from gui.settings import APPLICATION, ORGANIZATION, effective_runtime_settings, open_settings, saved_theme

EXIT_WAIT_S = 120.0
FIRST_PAINT_FALLBACK_MS = 2000
CLOSING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))


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
        if event.type() == QEvent.Type.Expose and isinstance(watched, QWindow) and watched.isExposed():
            watched.removeEventFilter(self)
            QTimer.singleShot(0, self._call)  # after this expose's paint
        return False

    def _call(self) -> None:
        if not self._called:
            self._called = True
            self._callback()


class SignalCloser(QObject):
    """SIGTERM, SIGHUP and Ctrl-C close the window as its close button does; a second one ends the process at once.

    Python runs signal handlers only when the interpreter gets control, which it
    does not while Qt's event loop waits. So the handler only notes the signal,
    `signal.set_wakeup_fd` writes a byte to a socket, and a QSocketNotifier on
    that socket wakes the event loop, which closes the window (the run stops
    after the call in flight and is saved). While the window closes, the GUI
    thread waits in Python, where the handler runs at once: a second signal
    then leaves with `os._exit`. SQLite commits whole transactions only, so the
    run stays in the history as it was last written, and reads back as
    "interrupted" with its steps.
    """

    def __init__(self, window: QWidget):
        super().__init__()
        self.received: int | None = None
        self._window = window
        self._closing = False
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._previous = {signum: signal.signal(signum, self._on_signal) for signum in CLOSING_SIGNALS}
        self._notifier = QSocketNotifier(self._reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._on_wakeup)

    @property
    def exit_code(self) -> int | None:
        """128 + the signal's number once one closed the window (the shell's convention), else None."""
        return None if self.received is None else 128 + self.received

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.received is not None:  # the second signal: at once, whatever the first one is still waiting for
            name = signal.Signals(signum).name
            print(f"Device Lab: {name} again: quitting now; a run in flight stays in the history as interrupted.", file=sys.stderr)
            os._exit(128 + signum)
        self.received = signum

    def _on_wakeup(self) -> None:
        try:
            while self._reader.recv(64):
                pass
        except OSError:  # drained (BlockingIOError) or closed
            pass
        if self.received is None or self._closing:
            return
        self._closing = True
        name = signal.Signals(self.received).name
        print(f"Device Lab: {name} received: stopping the run in flight and closing (send it again to quit at once).", file=sys.stderr)
        if self._window.close():
            QCoreApplication.exit(self.exit_code)

    def restore(self) -> None:
        """Give the signals their previous handlers back and close the socket."""
        self._notifier.setEnabled(False)
        signal.set_wakeup_fd(self._previous_fd)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._reader.close()
        self._writer.close()


def run_app(argv: list[str]) -> int:
    """Show the main window, run the event loop, and restart the process when the user asked to."""
    try:
        setup_logging()  # the app's and TensorFlow's log to a file and the Log dock, not the terminal
    except OSError as exc:
        print(f"Device Lab: cannot write the log file ({exc}); set DEVICE_LAB_LOG_DIR to a writable folder.", file=sys.stderr)
        quiet_tensorflow_logs()
    running = QApplication.instance()
    app = running if isinstance(running, QApplication) else QApplication(argv)
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationVersion(app_version())
    app.setDesktopFileName("device-lab")
    app.setWindowIcon(app_icon())
    app.setStyle("Fusion")
    settings = open_settings()
    apply_theme(saved_theme(settings))
    runtime, note = effective_runtime_settings(settings)
    window = MainWindow(settings, runtime, note, charts_later=True)
    window.show()
    _AfterFirstPaint(window, window.start)
    closer = SignalCloser(window)
    code = app.exec()
    if closer.exit_code is not None:
        code = closer.exit_code
    restart = window.restart_requested and closer.exit_code is None
    settings.sync()
    if not wait_for_threads(EXIT_WAIT_S):
        # A thread stuck inside TensorFlow cannot be interrupted; exiting the normal way would
        # destroy its QThread while it runs and abort. Leave without tearing anything down.
        print("Device Lab: a background task did not end; exiting without cleanup.", file=sys.stderr)
        os._exit(code)
    closer.restore()
    if restart:
        os.execv(sys.executable, [sys.executable, *sys.argv])
    return code
