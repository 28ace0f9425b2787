"""The notes under the Compare table: FLOPs per step and the fairness warnings, scrolling past a few lines.

Kept to NOTES_MAX_LINES of height so that, in a small window (1024x700), long
warnings scroll instead of squeezing the table above them to one row.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QWidget

from core.compare.table import Comparison
from gui.style import WARNING_COLOR
from gui.window_words import window_words

NOTES_MAX_LINES = 5


class CompareNotes(QScrollArea):
    """A selectable label of notes in a frameless scroll area, hidden while there is nothing to say."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("compareWarningsScroll")
        self.label = QLabel("")
        self.label.setObjectName("compareWarnings")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.setWidget(self.label)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setMaximumHeight(self.fontMetrics().lineSpacing() * NOTES_MAX_LINES + 6)
        self.setVisible(False)

    def show_comparison(self, comparison: Comparison | None) -> None:
        """FLOPs per step (when counted) and each fairness warning, one a line."""
        lines = []
        if comparison is not None and comparison.rows:
            if comparison.flops_per_step is not None:
                lines.append(f"FLOPs per training step: {comparison.flops_per_step:.3g} ({html.escape(comparison.flops_method)}).")
            lines += [
                f"<span style='color:{WARNING_COLOR}'>⚠ {html.escape(window_words(warning))}</span>" for warning in comparison.warnings
            ]
        self.label.setText("<br>".join(lines))
        self.setVisible(bool(lines))
