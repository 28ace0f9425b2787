"""The quick start (F1) says what the app does: the verdicts it can give and what the history keeps."""

from __future__ import annotations

from core.diagnosis.verdict import Bound
from gui.dialogs.help import HelpDialog


def test_the_quick_start_names_no_verdict_the_app_cannot_give_and_no_history_it_does_not_keep(qtbot):
    dialog = HelpDialog()
    qtbot.addWidget(dialog)
    text = dialog.browser.toPlainText()
    verdict = text[text.index("Read the verdict") : text.index("Find fast settings")]
    assert "memory" not in verdict, "there is no memory verdict (core.diagnosis.verdict)"
    assert str(Bound.UNKNOWN) in verdict
    tuning = text[text.index("Find fast settings") :]
    assert "their trials are not saved in the history" in tuning  # max-batch and autotune record no runs
