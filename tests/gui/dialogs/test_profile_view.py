"""The profile view: a capture's ops by time in a table, read in a worker thread, and how to open the full trace.

That it opens by itself when a run profiled from the window ends: tests/gui/test_ecosystem.py.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QTableWidget

from gui.dialogs.profile_view import ProfileViewDialog
from tests.fakes.xplane_trace import write_trace
from tests.gui.helpers import choose

US = 1_000_000  # picoseconds in a microsecond


def open_dialog(qtbot, trace_dir, how_to: str = "") -> ProfileViewDialog:
    dialog = ProfileViewDialog(trace_dir, how_to)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: not dialog.loading)
    return dialog


def table_rows(dialog: ProfileViewDialog) -> list[list[str]]:
    table = dialog.findChild(QTableWidget, "profileTable")
    return [[table.item(row, column).text() for column in range(table.columnCount())] for row in range(table.rowCount())]


def test_ops_are_listed_longest_first_by_type_or_by_name(qtbot, tmp_path):
    threads = {
        "tf_Compute/1": [("dense/MatMul:MatMul", 0, 600 * US, ""), ("dense/Relu:Relu", 700 * US, 100 * US, "")],
        "tf_Compute/2": [("while/body/_1/while/dense_1/MatMul:MatMul", 0, 300 * US, "")],
    }
    how_to = "Full trace (timeline, input pipeline): tensorboard --logdir /runs, then the Profile tab."
    dialog = open_dialog(qtbot, write_trace(tmp_path, [("/host:CPU", threads)]), how_to)
    assert table_rows(dialog) == [["MatMul", "0.900", "90.0%", "2"], ["Relu", "0.100", "10.0%", "1"]]
    header = dialog.findChild(QLabel, "profileSummaryLabel").text()
    assert "2 ops, 1.00 ms in all" in header and "2 timelines" in header and "not of the wall clock" in header
    assert "tensorboard --logdir /runs" in dialog.findChild(QLabel, "profileHowTo").text()

    choose(dialog.group_combo, "name")
    qtbot.waitUntil(lambda: not dialog.loading and len(table_rows(dialog)) == 3)
    assert [row[0] for row in table_rows(dialog)] == ["dense/MatMul", "dense_1/MatMul", "dense/Relu"]


def test_a_folder_without_a_trace_says_so(qtbot, tmp_path):
    dialog = open_dialog(qtbot, tmp_path)
    assert dialog.summary is None and table_rows(dialog) == []
    assert "No profiler trace" in dialog.findChild(QLabel, "profileSummaryLabel").text()
