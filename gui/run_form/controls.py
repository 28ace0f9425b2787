"""The foot of the run form, always in view: why a run cannot start, the last result, Start and Stop, the progress bar.

It sits below the scrolling fields, so a short window (1024×700 with the log
dock open) still shows Start and Stop. Start, Stop and the progress bar are
the last rows, and everything above them that changes (the hints, the last
result in its box of fixed height) only takes room from the fields: the
buttons never move, whatever a run ends with. The verdict in full, advice
first, is in the Result tab (gui.panels.run_result).
"""

from __future__ import annotations

import html
import time

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QHelpEvent, QPaintEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QStyle,
    QStyleOptionProgressBar,
    QStylePainter,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from gui.job_data import FinishedRun
from gui.run_form.outcome import diagnosing_text, failure_html, final_progress_text, progress_text, result_html, starting_text
from gui.style import ERROR_COLOR, WARNING_COLOR

RESULT_HEIGHT = 96  # the last result's box: the same height empty or full (it scrolls beyond)
NO_RUN_YET = "<span style='color:#777'>No run yet: the last run's result appears here, its verdict in full in the Result tab.</span>"
STOPPING = "Stopping after the call in flight… |"
IDLE_STEPS = 300  # the idle bar's range before any run
TICK_MS = 1000  # the first call's elapsed time is updated this often


class FittedProgressBar(QProgressBar):
    """A progress bar whose text is cut short with "…" where the bar is too narrow for it (whole in its tooltip).

    The style draws a bar's text centred and uncut: "Stopping after the call in flight… | 1,200 / 100,000 steps ·
    5,400 samples/s · ETA 3:12" ran past both ends of a 390 px bar. `text()` stays whole; `shown_text()` is what is drawn.
    """

    TEXT_MARGIN = 4  # pixels kept clear at each end of the text's room

    def text_room(self) -> int:
        """The width the style gives the bar's text, less a margin at each end."""
        option = QStyleOptionProgressBar()
        self.initStyleOption(option)
        room = self.style().subElementRect(QStyle.SubElement.SE_ProgressBarLabel, option, self).width()
        return max(0, room - 2 * self.TEXT_MARGIN)

    def shown_text(self) -> str:
        """The text as drawn: whole when it fits, else cut at the end with "…"."""
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, self.text_room())

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QStylePainter(self)
        option = QStyleOptionProgressBar()
        self.initStyleOption(option)
        option.text = self.shown_text()
        painter.drawControl(QStyle.ControlElement.CE_ProgressBar, option)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent) and not self.toolTip():
            if self.isTextVisible() and self.shown_text() != self.text():
                QToolTip.showText(event.globalPos(), self.text(), self)
            else:
                QToolTip.hideText()
            return True
        return super().event(event)


class RunControls(QWidget):
    """Hint and warning lines, Start/Stop, the progress bar and the last result."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("runControls")
        self.hint_label = self._line("formHint", f"color: {ERROR_COLOR};")
        self.warning_label = self._line("formWarning", "")
        self.start_button = self._button("Start", "startButton", "Start the run (Ctrl+R)")
        self.stop_button = self._button("Stop", "stopButton", "Stop after the step in flight (Esc)")
        self.progress_bar = FittedProgressBar()
        self.progress_bar.setObjectName("progressBar")
        self.progress_bar.setRange(0, IDLE_STEPS)
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat("Idle")
        self.progress_bar.setTextVisible(True)
        self.result_label = QLabel(NO_RUN_YET)
        self.result_label.setObjectName("resultLabel")
        self.result_label.setWordWrap(True)
        self.result_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)  # select text, follow the link
        self.result_label.setOpenExternalLinks(False)
        self.result_area = QScrollArea()
        self.result_area.setObjectName("resultScroll")
        self.result_area.setWidget(self.result_label)
        self.result_area.setWidgetResizable(True)
        self.result_area.setFrameShape(QFrame.Shape.NoFrame)
        self.result_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.result_area.setFixedHeight(RESULT_HEIGHT)
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
        layout.addStretch(1)  # room the foot is given beyond its rows goes above them: the buttons keep to the bottom
        for widget in (self.hint_label, self.warning_label, self.result_area):
            layout.addWidget(widget)
        layout.addLayout(buttons)
        layout.addWidget(self.progress_bar)

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
        text = progress_text(done, total, samples_per_s, eta_s)
        self.progress_bar.setFormat(f"{STOPPING} {text}" if self._stopping else text)

    def show_diagnosing(self, what: str) -> None:
        """A completed run is being diagnosed (short probe runs; Stop ends them): the full bar says what it does."""
        self._end_starting()
        self._say_on_bar(diagnosing_text(what), done=True)

    def show_starting(self, label: str) -> None:
        """A run was handed to the worker: until its first step the bar counts the first call (build, trace, compile)."""
        self._starting_since, self._stopping = time.monotonic(), False
        self._show_starting_time()
        self._tick.start()
        self.result_label.setText(f"Running {html.escape(label)}")

    def _show_starting_time(self) -> None:
        if self._starting_since is not None:
            self._say_on_bar(starting_text(time.monotonic() - self._starting_since, self._stopping), done=False)

    def _on_stop(self) -> None:
        """Stop pressed: the bar says so at once (before the first step: when the first call ends; after: after the call in flight)."""
        self._stopping = True
        if self._starting_since is not None:
            self._show_starting_time()
        elif not self.progress_bar.format().startswith(STOPPING):
            self.progress_bar.setFormat(f"{STOPPING} {self.progress_bar.format()}")

    def _end_starting(self) -> None:
        self._tick.stop()
        self._starting_since = None

    def show_model_changed(self, title: str) -> None:
        """Another model is chosen: an idle bar, and a line saying earlier results stay in their tabs."""
        self.progress_bar.setRange(0, IDLE_STEPS)
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat("Idle")
        self.result_label.setText(
            f"<span style='color:#777'>{html.escape(title)}: no run yet. Earlier results stay in the Result, Compare and History tabs.</span>"
        )

    def _say_on_bar(self, text: str, done: bool) -> None:
        """Text on an empty or full bar (a busy bar, range 0..0, shows no text in the Fusion style)."""
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(1 if done else 0)
        self.progress_bar.setFormat(text)

    def show_result(self, finished: FinishedRun) -> None:
        """The outcome of a run: headline figures, or the error and what to do."""
        result = finished.result
        self._end_starting()
        if self.progress_bar.maximum() <= 1:  # still the "starting" bar: the run ended before its first step
            self.progress_bar.setRange(0, max(1, result.steps_done))
        self.progress_bar.setValue(min(result.steps_done, self.progress_bar.maximum()))
        self.result_label.setText(result_html(finished))
        self.progress_bar.setFormat(final_progress_text(result))

    def show_failure(self, head: str, message: str) -> None:
        """A red `head` ("Failed", "Not started") and why, where the result would appear."""
        self._end_starting()
        self.result_label.setText(failure_html(head, message))

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
