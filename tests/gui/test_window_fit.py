"""Issue 38 item 18, the window at 1400x900 and 1024x700: notes whole, bar text inside its bar, the Sweep tab's rows,
the window's words, File > Recent models, the data set after a model file, and a largest-batch search's bar.

One window for the module, as a user keeps one open; its history and settings live in one folder for the module.
Sizes are read from the real widgets' geometry (offscreen, the tests' fonts).
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, QRect, Qt
from PySide6.QtGui import QFont, QHelpEvent
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QLabel, QMenu, QToolTip, QWidget

from core.cluster.isolation import SWITCH
from core.machine.types import DeviceInfo, DeviceReport
from core.results import RunStatus
from core.workloads.user_workload import SYNTHETIC
from gui.dialogs.settings import SettingsDialog
from gui.qt_threads import running_threads
from gui.run_form.model_choice import DEFAULT_DATASET
from gui.tuning.sweep_panel import ROWS_IN_VIEW
from gui.window_words import DEVICE_SETTINGS, LOGICAL_CPUS, LOGICAL_CPUS_PATH
from tests.gui.conftest import DETECTION_TIMEOUT_MS, RUN_TIMEOUT_MS, opened_main_window
from tests.gui.helpers import choose, names_a_flag, set_one_device

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shared_folders")]  # every test shares the module's window and folders

SIZES = [(1400, 900), (1024, 700)]
SMALL_FONT_PT = 8  # a desktop font smaller than the tests': the 9 pt strategy note then wrapped past its row and was cut
LAYOUT_PASSES = 3
SETTLE_MS = 300  # how long after a choice the form is watched: the rows that stayed cut were so within 50 ms
ONE_CPU = DeviceReport((DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {}),), ())


@pytest.fixture
def window(main_window, qtbot):
    qtbot.waitUntil(main_window.run_panel.start_button.isEnabled, timeout=DETECTION_TIMEOUT_MS)
    yield main_window
    main_window.resize(1400, 900)


def resize(window, qtbot, size: tuple[int, int]) -> None:
    """The window at `size` (a window whose contents need more than that cannot be made so small: the wait fails)."""
    window.resize(*size)
    try:
        qtbot.waitUntil(lambda: window.size().toTuple() == size, timeout=5000)
    except qtbot.TimeoutError:
        pytest.fail(f"the window stays {window.size().toTuple()}, its least {window.minimumSizeHint().toTuple()}: not {size}")
    QApplication.processEvents()


def in_window(widget: QWidget, window: QWidget) -> QRect:
    return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())


def cut_notes(panel: QWidget) -> list[str]:
    """The visible word-wrapped labels of the run form lower than their text at their width (the result line scrolls: left out)."""
    cut = []
    for label in panel.findChildren(QLabel):
        if label.isVisible() and label.wordWrap() and label.text() and label.objectName() != "resultLabel":
            needed = label.heightForWidth(label.width())
            if label.height() < needed:
                cut.append(f"{label.objectName() or label.text()[:30]!r}: {label.height()} px of {needed}")
    return cut


def overlapping(root: QWidget) -> list[str]:
    """Visible sibling widgets under `root` whose rectangles overlap (scroll areas, tables and text views draw their own insides)."""
    found, stack = [], [root]
    while stack:
        parent = stack.pop()
        children = [c for c in parent.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly) if c.isVisible()]
        children = [c for c in children if not c.isWindow() and not isinstance(c, QMenu) and c.width() > 0 and c.height() > 0]
        for index, first in enumerate(children):
            found += [
                f"{first.objectName() or type(first).__name__} over {second.objectName() or type(second).__name__}"
                for second in children[index + 1 :]
                if first.geometry().intersects(second.geometry())
            ]
        stack.extend(c for c in children if not isinstance(c, QAbstractScrollArea))
    return found


def settled_cut_notes(panel: QWidget, qtbot) -> list[str]:
    """The notes cut once the form has laid out what a choice changed, or at any moment in the SETTLE_MS after
    (the background work the choice started, such as the cluster's isolation check, answers in that time)."""
    for _ in range(LAYOUT_PASSES):  # the layout requests the choice posted (and zero timers)
        QApplication.processEvents()
    seen = cut_notes(panel)
    if not seen:
        try:
            qtbot.waitUntil(lambda: bool(seen.extend(cut_notes(panel)) or seen), timeout=SETTLE_MS)
        except qtbot.TimeoutError:
            pass
    return seen


def walk_the_form(window, qtbot, where: str) -> None:
    """Each strategy, then each sample model under it: after each choice, every note of the run form is whole.

    On one CPU not split, as a user's laptop without a GPU: Mirrored cannot run, and the strategy note says why in full."""
    panel = window.run_panel
    detected = window.device_panel.report
    panel.set_devices(ONE_CPU)
    try:
        walk_the_choices(panel, qtbot, where)
    finally:
        panel.set_devices(detected)


def walk_the_choices(panel: QWidget, qtbot, where: str) -> None:
    for strategy in ("default", "one-device", "multi-worker"):
        choose(panel.strategy_combo, strategy)
        for model in (None, "cnn", "mlp"):
            if model is not None:
                choose(panel.model_combo, model)
            qtbot.waitUntil(lambda: not running_threads(), timeout=RUN_TIMEOUT_MS)  # what the choice started (the cluster's checks)
            cut = settled_cut_notes(panel, qtbot)
            assert not cut, f"{where}, {strategy}, {model or 'as it was'}: {cut}"
    choose(panel.strategy_combo, "default")


@pytest.mark.parametrize("size", SIZES, ids=["1400x900", "1024x700"])
def test_the_form_s_notes_are_whole_in_every_strategy_and_model(window, qtbot, size) -> None:
    resize(window, qtbot, size)
    walk_the_form(window, qtbot, f"{size}")


def test_with_a_smaller_desktop_font_the_form_s_notes_are_whole_at_both_sizes(main_window, qtbot, monkeypatch) -> None:
    """A window opened with an 8 pt font at 1024x700, then made 1400x900: once Multi-worker was chosen and the check of
    its local workers' isolation answered (in a worker thread, as in a fresh app), the 9 pt strategy note and the
    Devices hint were cut at top and bottom (QFormLayout kept their rows' old heights)."""
    monkeypatch.setenv(SWITCH, "on: asked afresh by this window")  # not known in this process yet: checked in a thread
    original = QFont(QApplication.font())
    small = QFont(original)
    small.setPointSize(SMALL_FONT_PT)
    QApplication.setFont(small)
    try:
        opened = opened_main_window(diagnose=False, size=(1024, 700))
        window = next(opened)
        try:
            qtbot.waitUntil(window.run_panel.start_button.isEnabled, timeout=DETECTION_TIMEOUT_MS)
            for size in SIZES:  # opened at 1024x700, made 1400x900 before any strategy is chosen: then 1024x700 again
                resize(window, qtbot, size)
                walk_the_form(window, qtbot, f"{SMALL_FONT_PT} pt, {size}")
        finally:
            next(opened, None)  # closes it, waiting for its threads
    finally:
        QApplication.setFont(original)


@pytest.mark.parametrize("size", SIZES, ids=["1400x900", "1024x700"])
def test_the_progress_bar_s_text_stays_inside_the_bar(window, qtbot, size) -> None:
    panel, bar = window.run_panel, window.run_panel.progress_bar
    resize(window, qtbot, size)
    long_what = "probe run 1: batch 8 instead of 64, 31 steps, then the input pipeline timed alone for 40 steps"
    try:
        for show in (
            lambda: panel.show_progress(1_200, 100_000, 5_400.0, 192.0),
            lambda: panel.show_diagnosing(long_what),
            lambda: panel.show_progress(3, 300, None, None),
        ):
            show()
            QApplication.processEvents()
            room = bar.text_room()
            assert 0 < room <= bar.contentsRect().width()
            shown = bar.shown_text()
            assert bar.fontMetrics().horizontalAdvance(shown) <= room, (shown, room)
            whole = bar.fontMetrics().horizontalAdvance(bar.text()) <= room
            assert shown == bar.text() if whole else shown.endswith("…") and bar.text().startswith(shown[:-1])
            if not whole:  # the whole text is its tooltip
                QApplication.sendEvent(bar, QHelpEvent(QEvent.Type.ToolTip, QPoint(5, 5), bar.mapToGlobal(QPoint(5, 5))))
                assert QToolTip.text() == bar.text()
                QToolTip.hideText()
        assert bar.text().startswith("3 / 300 steps"), "a short text is whole"
    finally:
        panel.controls.show_model_changed("MLP")


def sweep_and_wait(qtbot, panel):
    """Click Start sweep and wait until it has ended; returns the SweepOutcome."""
    with qtbot.waitSignal(panel.controller.sweep_ready, timeout=RUN_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=RUN_TIMEOUT_MS)
    return blocker.args[0]


def test_the_sweep_tab_keeps_three_rows_in_view_and_nothing_overlaps(window, qtbot) -> None:
    """At 1024x700 the table showed one row of three beside the autotune box, whose "Use the result…" row lay over the
    text above it, and the window could not be 700 px tall; the notes under the chart took the rows' room."""
    panel = window.sweep_panel
    set_one_device(window, "CPU:0", steps=5)
    choose(window.run_panel.model_combo, "mlp")
    window.show_panel(panel)
    panel.axes_box.set_axes("batch_size", "8,16,32", "precision", "off,bfloat16")
    panel.axes_box.slow_check.setChecked(True)  # bfloat16 runs whether or not this CPU has AVX-512
    outcome = sweep_and_wait(qtbot, panel)
    assert [row.status for row in outcome.sweep.rows] == [RunStatus.COMPLETED] * 6
    assert panel.notes_label.text(), "the notes under the chart (what the star compares, the learning-rate rule)"
    # notes longer than a 1400x900 tab shows whole: they held the window at 1400x900 once they took their room there
    panel.notes_label.setText(panel.notes_label.text() + "<br>" + "Another note on this sweep. " * 60)
    table = panel.table
    for size in SIZES:
        resize(window, qtbot, size)
        for tab in range(panel.tool_tabs.count()):
            panel.tool_tabs.setCurrentIndex(tab)
            for _ in range(3):  # the tab's layout requests, and the window's resize if its minimum grew
                QApplication.processEvents()
            where = f"{size}, {panel.tool_tabs.tabText(tab)}"
            assert window.size().toTuple() == size, f"{where}: the window grew to hold the tab"
            table.scrollToTop()
            last = table.visualRect(table.model().index(ROWS_IN_VIEW - 1, 0))
            assert table.rowCount() == 6 and 0 < last.bottom() < table.viewport().height(), f"{where}: the third row whole"
            heat_map = panel.heat_map  # beside the table: every column whole ("16,5…" was cut at 1024 px)
            assert heat_map.isVisible() and heat_map.columnCount() == 2, where
            right = heat_map.columnViewportPosition(1) + heat_map.columnWidth(1)
            assert right <= heat_map.viewport().width() and heat_map.horizontalScrollBar().maximum() == 0, where
            for column in range(2):  # as wide as its header and its cells ask, padding included
                needed = max(heat_map.sizeHintForColumn(column), heat_map.horizontalHeader().sectionSizeHint(column))
                assert heat_map.columnWidth(column) >= needed, (where, column, heat_map.columnWidth(column), needed)
            assert not overlapping(panel), where
            notes, rows = in_window(panel.notes_area, window), in_window(table, window)
            assert not notes.intersects(rows) and notes.top() > rows.bottom(), where
            notes_label = panel.notes_label
            shown = notes_label.heightForWidth(panel.notes_area.viewport().width())
            assert panel.notes_area.height() >= min(shown, 3 * notes_label.fontMetrics().lineSpacing()), f"{where}: three lines at least"
            box = panel.tuning_box
            if box.isVisible():  # "Use in the run form" on the bar's row, clear of the result text and the line above it
                apply, text = in_window(box.apply_button, window), in_window(box.result_text, window)
                assert not apply.intersects(text) and not apply.intersects(in_window(box.progress_label, window)), where
                assert text.height() >= box.result_text.minimumHeight(), where
    # longer words than this sweep's: "batch 128 (tied: not better beyond noise)" beside Use these settings made the
    # window 1061 px wide, and three lines of "No point is best beyond noise: batch 8, … are tied" made it taller than 700
    panel.chosen_label.setText(panel.chosen_label.text() + " with a long name" * 10)
    panel.progress_label.setText(panel.progress_label.text() + " And more to say." * 40)
    for tab in range(panel.tool_tabs.count()):
        panel.tool_tabs.setCurrentIndex(tab)
        for _ in range(3):
            QApplication.processEvents()
        assert window.size().toTuple() == SIZES[1] and panel.minimumSizeHint().width() <= panel.width(), tab
        last = table.visualRect(table.model().index(ROWS_IN_VIEW - 1, 0))
        assert 0 < last.bottom() < table.viewport().height(), tab
    panel.tool_tabs.setCurrentIndex(0)


def test_the_strategy_note_names_the_device_settings_menu_that_exists(window, qtbot) -> None:
    panel = window.run_panel
    detected = window.device_panel.report
    panel.set_devices(ONE_CPU)  # one CPU, not split: Mirrored cannot run, and the note says how to split it
    try:
        note = panel.strategy_reason.text()
        assert LOGICAL_CPUS_PATH in note and "Settings >" not in note and not names_a_flag(note)
        assert not names_a_flag(next(c for c in panel.state.strategies if c.name == "mirrored").reason), (
            "the menu entry's tooltip and the hint too"
        )
    finally:
        panel.set_devices(detected)
    menu_title, entry = DEVICE_SETTINGS
    menus = {action.text().replace("&", ""): action.menu() for action in window.menuBar().actions()}
    assert menu_title in menus and window.menus.settings_action in menus[menu_title].actions()
    assert window.menus.settings_action.text() == entry
    dialog = SettingsDialog(window.settings, window.runtime, window.runtime_note, window)
    try:
        assert LOGICAL_CPUS in [label.text() for label in dialog.findChildren(QLabel)], "the field the note names"
    finally:
        dialog.deleteLater()


def test_a_model_file_enables_recent_models_at_once_and_a_sample_after_it_gets_its_own_data_set(window, qtbot, module_folders) -> None:
    from tests.core.workloads.conftest import two_io_model

    menus, choice = window.menus, window.run_panel.model_choice
    assert not menus.recent_menu.isEnabled(), "no model file opened yet in this settings folder"
    path = module_folders / "two_io.keras"
    two_io_model().save(path)
    window.run_panel.open_model_file(str(path))  # what File > Open model… does once the file is chosen
    qtbot.waitUntil(lambda: not choice.pending(), timeout=RUN_TIMEOUT_MS)
    assert choice.opened_file() is not None and choice.dataset() == SYNTHETIC
    assert menus.recent_menu.isEnabled() and menus.recent_menu.menuAction().isEnabled(), "before any restart"
    assert [action.toolTip() for action in menus.recent_menu.actions()] == [str(path)]

    choose(window.run_panel.model_combo, "mlp")
    assert choice.dataset() == DEFAULT_DATASET, "the sample's own data set, not the file's Synthetic"
    assert not window.run_panel.model_choice.dataset_note.isVisible(), "nothing was switched away from"
    choose(window.run_panel.model_combo, "cnn")
    choose(window.run_panel.model_combo, "mlp")
    assert choice.dataset() == DEFAULT_DATASET


def test_a_search_in_the_autotune_box_says_the_window_s_fields_and_its_bar_ends_full(window, qtbot) -> None:
    """A real largest-batch search (one probe: up to 32 under 2 GiB) ends with a full bar beside its result; a 5 s autotune's
    notes (the backend not tuned, a larger budget) name the box's fields and the run form's, never a flag."""
    box = window.sweep_panel.tuning_box
    set_one_device(window, "CPU:0", steps=100)
    choose(window.run_panel.model_combo, "mlp")
    window.show_panel(window.sweep_panel)
    window.sweep_panel.tool_tabs.setCurrentWidget(box)
    box.memory_edit.setText("2GiB")
    box.up_to_edit.setText("32")
    with qtbot.waitSignal(box.controller.result_ready, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(box.max_batch_button, Qt.MouseButton.LeftButton)
        assert box.progress_bar.maximum() == 0, "busy while it probes"
    qtbot.waitUntil(lambda: not box.controller.is_running(), timeout=RUN_TIMEOUT_MS)
    assert "Largest batch: 32" in box.result_text.toPlainText()
    assert box.progress_bar.maximum() == box.progress_bar.value() == 100 and box.progress_bar.text() == "100%"

    box.memory_edit.clear()
    box.budget_edit.setText("5")
    with qtbot.waitSignal(box.controller.result_ready, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(box.autotune_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not box.controller.is_running(), timeout=RUN_TIMEOUT_MS)
    said = box.result_text.toPlainText()
    assert "the search keeps the run form's Backend" in said and not names_a_flag(said), said
    assert box.progress_bar.value() == box.progress_bar.maximum()
    window.sweep_panel.tool_tabs.setCurrentIndex(0)
