"""The Log dock: the app's and TensorFlow's log lines, read-only, inside the window instead of the terminal.

Fed from `core.logs.log_buffer()`: the entries so far when it opens, then each
new one as it is logged. Listeners run in the thread that logged, so the view
only emits a signal there; the line is added in the GUI thread.
"""

from __future__ import annotations

import logging

import shiboken6
from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFontDatabase
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.logs import LogBuffer, LogEntry, default_log_dir, log_buffer

MAX_LINES = 5000
LEVELS = (("Everything", logging.NOTSET), ("Info and above", logging.INFO), ("Warnings and errors", logging.WARNING))


class LogView(QWidget):
    """Log lines at or above the chosen level, newest at the bottom; Clear, and Open log folder."""

    entry_logged = Signal(object)  # LogEntry, emitted in the thread that logged

    def __init__(self, buffer: LogBuffer | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("logView")
        self._buffer = buffer if buffer is not None else log_buffer()
        self.text = QPlainTextEdit()
        self.text.setObjectName("logText")
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(MAX_LINES)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setToolTip("Device Lab's and TensorFlow's log messages (also written to the log file).")
        self.level_combo = QComboBox()
        self.level_combo.setObjectName("logLevelCombo")
        for label, level in LEVELS:
            self.level_combo.addItem(label, level)
        self.level_combo.setCurrentIndex(1)
        self.level_combo.setToolTip("Show messages of this level and above.")
        self.clear_button = QPushButton("Clear")
        self.clear_button.setObjectName("clearLogButton")
        self.clear_button.setToolTip("Empty the view (the log file keeps everything).")
        self.folder_button = QPushButton("Open log folder")
        self.folder_button.setObjectName("openLogFolderButton")
        self.folder_button.setToolTip(f"Open {default_log_dir()} in the file manager.")
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Show"))
        controls.addWidget(self.level_combo)
        controls.addStretch(1)
        controls.addWidget(self.clear_button)
        controls.addWidget(self.folder_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(controls)
        layout.addWidget(self.text, 1)

        self.entry_logged.connect(self._append)
        self.level_combo.currentIndexChanged.connect(self._refill)
        self.clear_button.clicked.connect(self.clear)
        self.folder_button.clicked.connect(self._open_folder)
        self._unsubscribe = self._buffer.subscribe(self._on_entry)
        self.destroyed.connect(self._unsubscribe)
        self._refill()

    def level(self) -> int:
        return int(self.level_combo.currentData())

    def clear(self) -> None:
        """Forget the lines so far (the log file keeps them)."""
        self._buffer.clear()
        self.text.clear()

    def close_down(self) -> None:
        """Stop following the log (the window is closing)."""
        self._unsubscribe()

    def _on_entry(self, entry: LogEntry) -> None:
        """Runs in the thread that logged: hand the entry to the GUI thread."""
        if shiboken6.isValid(self):
            self.entry_logged.emit(entry)

    def _append(self, entry: LogEntry) -> None:
        if entry.level >= self.level():
            self.text.appendPlainText(entry.format())

    def _refill(self) -> None:
        level = self.level()
        self.text.setPlainText("\n".join(e.format() for e in self._buffer.entries() if e.level >= level))
        self.text.verticalScrollBar().setValue(self.text.verticalScrollBar().maximum())

    def _open_folder(self) -> None:
        folder = default_log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))


class LogDock(QDockWidget):
    """The log view as a dock at the bottom of the window; View > Log shows and hides it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Log", parent)
        self.setObjectName("logDock")
        self.view = LogView(parent=self)
        self.setWidget(self.view)
        self.toggleViewAction().setToolTip("Show or hide Device Lab's and TensorFlow's log messages.")
