"""The foot of the run form, always in view: why a run cannot start, Start and Stop, the progress bar, the last result.

It sits below the scrolling fields, so a short window (1024×700 with the log
dock open) still shows Start and Stop. The last result grows with its text up
to RESULT_MAX_HEIGHT and scrolls beyond that, so it never pushes them away.
"""

from __future__ import annotations

import html
import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QScrollArea, QVBoxLayout, QWidget

from gui.controllers.training_worker import FinishedRun
from gui.plotting.theme import ERROR_COLOR, WARNING_COLOR
from gui.run_form.outcome import diagnosing_text, failure_html, final_progress_text, progress_text, result_html, starting_text

RESULT_MAX_HEIGHT = 150
IDLE_STEPS = 300  # the idle bar's range before any run
TICK_MS = 1000  # the first call's elapsed time is updated this often


class ResultLabel(QLabel):
    """The last result (selectable, to copy figures or an error); `text_set` fires on every new text."""

    text_set = Signal()

    def setText(self, text: str) -> None:
        super().setText(text)
        self.text_set.emit()


class RunControls(QWidget):
    """Hint and warning lines, Start/Stop, the progress bar and the last result."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("runControls")
        self.hint_label = self._line("formHint", f"color: {ERROR_COLOR};")
        self.warning_label = self._line("formWarning", "")
        self.start_button = self._button("Start", "startButton", "Start the run (Ctrl+R)")
        self.stop_button = self._button("Stop", "stopButton", "Stop after the step in flight (Esc)")
        self.progress_bar = QProgressBar()
        self.progress_bar.setObjectName("progressBar")
        self.progress_bar.setRange(0, IDLE_STEPS)
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat("Idle")
        self.progress_bar.setTextVisible(True)
        self.result_label = ResultLabel()
        self.result_label.setObjectName("resultLabel")
        self.result_label.setWordWrap(True)
        self.result_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result_area = QScrollArea()
        self.result_area.setObjectName("resultScroll")
        self.result_area.setWidget(self.result_label)
        self.result_area.setWidgetResizable(True)
        self.result_area.setFrameShape(QFrame.Shape.NoFrame)
        self.result_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.result_label.text_set.connect(self._fit_result)
        self._starting_since: float | None = None
        self._stopping = False
        self._tick = QTimer(self)
        self._tick.setInterval(TICK_MS)
        self._tick.timeout.connect(self._show_starting_time)
        self.stop_button.clicked.connect(self._on_stop)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.stop_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.hint_label, self.warning_label):
            layout.addWidget(widget)
        layout.addLayout(buttons)
        layout.addWidget(self.progress_bar)
        layout.addWidget(self.result_area)
        self._fit_result()

    def show_hints(self, errors: list[str], warnings: list[str], muted: bool) -> None:
        """Errors in red (what to fix), else warnings (amber, or grey while `muted`: devices not listed yet)."""
        self.hint_label.setText("\n".join(errors))
        self.hint_label.setVisible(bool(errors))
        self.warning_label.setText("\n".join(warnings))
        self.warning_label.setStyleSheet("color: #555;" if muted else f"color: {WARNING_COLOR};")
        self.warning_label.setVisible(bool(warnings) and not errors)

    def show_progress(self, done: int, total: int, samples_per_s: float | None, eta_s: float | None) -> None:
        """Update the progress bar: steps done of total, throughput and time left."""
        self._end_starting()
        if total > 0:
            self.progress_bar.setRange(0, total)
            self.progress_bar.setValue(min(done, total))
        else:
            self.progress_bar.setRange(0, 0)
        self.progress_bar.setFormat(progress_text(done, total, samples_per_s, eta_s))

    def show_diagnosing(self, what: str) -> None:
        """A completed run is being diagnosed (short probe runs; Stop ends them): a busy bar saying what it does."""
        self._end_starting()
        self.progress_bar.setRange(0, 0)
        self.progress_bar.setFormat(diagnosing_text(what))

    def show_starting(self, label: str) -> None:
        """A run was handed to the worker: a busy bar until its first step."""
        self.progress_bar.setRange(0, 0)
        self._starting_since, self._stopping = time.monotonic(), False
        self._show_starting_time()
        self._tick.start()
        self.result_label.setText(f"Running {html.escape(label)}")

    def _show_starting_time(self) -> None:
        if self._starting_since is not None:
            self.progress_bar.setFormat(starting_text(time.monotonic() - self._starting_since, self._stopping))

    def _on_stop(self) -> None:
        """Stop before the first step: it takes effect when the first call ends, and the bar says so."""
        if self._starting_since is not None:
            self._stopping = True
            self._show_starting_time()

    def _end_starting(self) -> None:
        self._tick.stop()
        self._starting_since = None

    def show_result(self, finished: FinishedRun) -> None:
        """The outcome of a run: headline figures, or the error and what to do."""
        result = finished.result
        self._end_starting()
        if self.progress_bar.maximum() == 0:  # still the "starting" busy bar: the run ended before its first step
            self.progress_bar.setRange(0, max(1, result.steps_done))
        self.progress_bar.setValue(min(result.steps_done, self.progress_bar.maximum()))
        self.result_label.setText(result_html(finished))
        self.progress_bar.setFormat(final_progress_text(result))

    def show_failure(self, head: str, message: str) -> None:
        """A red `head` ("Failed", "Not started") and why, where the result would appear."""
        self._end_starting()
        self.result_label.setText(failure_html(head, message))

    def resizeEvent(self, event: QResizeEvent) -> None:
        """A new width wraps the result anew: fit its area again."""
        super().resizeEvent(event)
        self._fit_result()

    def _fit_result(self) -> None:
        """As tall as the result's text (nothing when empty), at most RESULT_MAX_HEIGHT; it scrolls beyond."""
        text = self.result_label.text()
        needed = self.result_label.heightForWidth(max(1, self.result_area.viewport().width())) if text else 0
        self.result_area.setFixedHeight(min(RESULT_MAX_HEIGHT, max(needed, 0)))

    @staticmethod
    def _line(name: str, style: str) -> QLabel:
        label = QLabel()
        label.setObjectName(name)
        label.setWordWrap(True)
        label.setStyleSheet(style)
        label.setVisible(False)
        return label

    @staticmethod
    def _button(text: str, name: str, tooltip: str) -> QPushButton:
        button = QPushButton(text)
        button.setObjectName(name)
        button.setToolTip(tooltip)
        button.setEnabled(False)
        return button
