"""The window as a user meets it: controls that stay put, a readable result, no overlap at 1024x700, the File menu, true status.

One window for the module (the state each test leaves is what a user would
leave); its history and settings live in one folder for the module, and runs
are not diagnosed except where the Result tab is the point.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, QRect, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QCheckBox, QScrollArea, QTableWidget, QWidget

from core.machine.types import DeviceInfo, DeviceReport
from core.results import RunResult, RunStatus
from core.workloads.models import MODELS
from gui.job_data import FinishedRun
from gui.qt_threads import running_threads
from gui.remembered import remember_model
from gui.run_form.controls import STOPPING
from gui.run_form.outcome import RESULT_LINK, starting_text
from gui.tuning.tuning_box import FORM_PROBLEM
from tests.gui.conftest import DETECTION_TIMEOUT_MS, RUN_TIMEOUT_MS
from tests.gui.helpers import choose, set_one_device

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shared_folders")]  # every test shares the module's window and folders

ADVICE = "Raise steps per call to 8: the host launches each step."
EVIDENCE = "Pipeline alone: 0.4 ms a step; the step's ops: 1.1 ms; between calls: 2.9 ms of 4.4 ms (66 %). " * 4


@pytest.fixture
def window(main_window, qtbot):
    qtbot.waitUntil(main_window.run_panel.start_button.isEnabled, timeout=DETECTION_TIMEOUT_MS)
    return main_window


def places(window) -> dict[str, QRect]:
    """Where Start, Stop and the status bar are, in window coordinates."""
    panel = window.run_panel

    def rect(widget: QWidget) -> QRect:
        return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())

    return {"start": rect(panel.start_button), "stop": rect(panel.stop_button), "status": rect(window.statusBar())}


def test_start_stop_and_the_status_bar_stay_put_whatever_a_run_ends_with(window, qtbot):
    panel = window.run_panel
    QApplication.processEvents()
    idle = places(window)
    seen = {"idle": idle}

    set_one_device(window, "CPU:0", steps=1_000_000)
    with qtbot.waitSignal(window.run_controller.progress, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
        # before the first step the bar shows (not only holds) the first call's elapsed time
        assert panel.progress_bar.text().startswith(starting_text(0))
    seen["running"] = places(window)
    with qtbot.waitSignal(window.run_controller.run_finished, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(panel.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.run_controller.is_running(), timeout=RUN_TIMEOUT_MS)
    assert "Stopped" in panel.result_label.text()
    seen["stopped"] = places(window)

    panel.steps_edit.setText("5")
    with qtbot.waitSignal(window.run_controller.run_finished, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.run_controller.is_running(), timeout=RUN_TIMEOUT_MS)
    assert "Completed" in panel.result_label.text()
    seen["completed"] = places(window)
    panel.show_not_started("a long reason why this run did not start, " * 12)
    seen["not started"] = places(window)
    panel.batch_edit.setText("not a number")  # the red hint under the fields appears
    seen["form problem"] = places(window)
    panel.batch_edit.setText("64")

    assert all(where == idle for where in seen.values()), {state: where for state, where in seen.items() if where != idle}


def test_the_result_tab_says_the_advice_first_and_the_evidence_without_scrolling(window, qtbot):
    result = RunResult(
        status=RunStatus.COMPLETED, config={"model": "mlp", "batch_size": 64}, steps_done=300, samples_per_s=5400.0,
        step_time_median_ms=11.8, step_time_p95_ms=13.0, bound="overhead", advice=ADVICE, bound_evidence=EVIDENCE,
    )  # fmt: skip
    finished = FinishedRun(result, 7)
    window.resize(1400, 900)
    window.result_panel.show_result(finished)
    window.run_panel.show_result(finished)
    window.run_panel.result_label.linkActivated.emit(RESULT_LINK)  # what clicking the result line's link does
    assert window.tabs.currentWidget() is window.result_panel
    QApplication.processEvents()
    text = window.result_panel.text()
    assert text.startswith(f"Try: {ADVICE}") and EVIDENCE.strip() in text and "run #7" in text
    view = window.result_panel.view
    assert view.verticalScrollBar().maximum() == 0, "the whole verdict is in view at 1400x900"
    assert EVIDENCE.strip() not in window.run_panel.result_label.text(), "the form keeps a short line; the evidence is in the tab"


def overlapping_siblings(root: QWidget) -> list[str]:
    """Pairs of visible sibling widgets under `root` whose rectangles overlap (a scroll area's insides are its own)."""
    found = []
    stack = [root]
    while stack:
        parent = stack.pop()
        children = [c for c in parent.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly) if c.isVisible()]
        children = [c for c in children if not c.isWindow() and c.width() > 0 and c.height() > 0]
        for index, first in enumerate(children):
            for second in children[index + 1 :]:
                if first.geometry().intersects(second.geometry()):
                    found.append(f"{parent.objectName() or type(parent).__name__}: {describe(first)} over {describe(second)}")
        if isinstance(parent, QScrollArea):  # its content, not its scroll bars' insides
            stack.extend([parent.widget()] if parent.widget() is not None else [])
        elif not isinstance(parent, QAbstractScrollArea):  # tables and text views draw their own insides
            stack.extend(children)
    return found


def describe(widget: QWidget) -> str:
    text = widget.text() if hasattr(widget, "text") and callable(widget.text) else ""
    return f"{type(widget).__name__}({widget.objectName() or text[:30]!r}) at {widget.geometry().getRect()}"


def test_at_1024x700_no_widget_overlaps_another_in_any_tab(window, qtbot):
    window.resize(1024, 700)
    qtbot.waitUntil(lambda: window.width() == 1024, timeout=5000)
    problems = {}
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        page = window.tabs.currentWidget()
        if page is window.sweep_panel:  # its two sub-tabs: the sweep's settings, and largest batch / autotune
            tools = page.tool_tabs
            for sub in range(tools.count()):
                tools.setCurrentIndex(sub)
                QApplication.processEvents()
                problems.update({f"Sweep/{tools.tabText(sub)}: {p}": 1 for p in overlapping_siblings(page)})
        QApplication.processEvents()
        problems.update({f"{window.tabs.tabText(index)}: {p}": 1 for p in overlapping_siblings(page)})
    problems.update({f"run form: {p}": 1 for p in overlapping_siblings(window.run_panel)})
    assert not problems, "\n".join(problems)
    window.show_panel(window.sweep_panel)
    QApplication.processEvents()
    sweep_table = window.sweep_panel.table
    assert sweep_table.viewport().height() >= 3 * sweep_table.verticalHeader().defaultSectionSize(), "room for three rows at least"
    window.show_panel(window.device_panel)
    table: QTableWidget = window.device_panel.table
    QApplication.processEvents()
    for column in range(3):  # kind, name, TF name: what tells the devices apart
        right = table.columnViewportPosition(column) + table.columnWidth(column)
        assert 0 <= table.columnViewportPosition(column) and right <= table.viewport().width(), table.horizontalHeaderItem(column).text()
    window.resize(1400, 900)


def test_at_1024_px_the_compare_tab_holds_many_targets_with_long_names(window, qtbot):
    """Eight GPUs and a long CPU name (stand-ins: no GPU exists here) still fit the Compare tab of a 1024 px window.

    Three targets a row once made the window's minimum 1076 px with two logical CPUs, JAX and an Intel CPU's name,
    so the window could not be made 1024 px wide while the targets were built.
    """
    cpu_name = "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    cpus = tuple(DeviceInfo("CPU", cpu_name, f"CPU:{i}", 8 << 30, 2 << 30, 6 << 30, {}) for i in range(2))
    gpus = tuple(DeviceInfo("GPU", "NVIDIA H100 80GB HBM3 (stand-in)", f"GPU:{i}", 80 << 30, 0, 80 << 30, {}) for i in range(8))
    detected = window.device_panel.report
    window.resize(1024, 700)
    window.show_panel(window.compare_panel)
    try:
        window.compare_panel.set_devices(DeviceReport(cpus + gpus, ()))
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)  # the boxes the rebuild replaced
        QApplication.processEvents()
        panel = window.compare_panel
        assert window.width() == 1024 and panel.minimumSizeHint().width() <= panel.width(), "the tab's content fits the tab"
        boxes = panel.targets_box.findChildren(QCheckBox)
        assert len(boxes) >= 13, "CPU:0, 8 GPUs, Mirrored over them and over the CPUs, multi-worker, JAX"
        cpu_box = panel.targets_box.findChild(QCheckBox, "compareTarget0")
        assert cpu_name not in cpu_box.text() and cpu_name in cpu_box.toolTip(), "elided in the box, whole in its tooltip"
    finally:
        window.compare_panel.set_devices(detected)
        window.resize(1400, 900)


def test_file_menu_opens_a_model_file_with_ctrl_o_and_lists_the_recent_ones(window, qtbot, module_folders):
    menus = window.menus
    assert menus.open_model_action.shortcut() == QKeySequence(QKeySequence.StandardKey.Open)
    assert menus.open_model_action.shortcut().toString() == "Ctrl+O"
    file_menu = window.menuBar().actions()[0].menu()
    assert menus.open_model_action in file_menu.actions() and menus.recent_menu.menuAction() in file_menu.actions()
    broken = module_folders / "not-a-model.keras"
    broken.write_bytes(b"this is not a zip archive")
    remember_model(window.settings, str(broken))
    menus.recent_menu.aboutToShow.emit()
    recent = [action for action in menus.recent_menu.actions() if action.text() == "not-a-model.keras"]
    assert recent and recent[0].toolTip() == str(broken)
    recent[0].trigger()
    assert "Opening not-a-model.keras" in window.run_panel.model_choice.pending()
    qtbot.waitUntil(lambda: not window.run_panel.model_choice.pending(), timeout=RUN_TIMEOUT_MS)
    choose(window.run_panel.model_combo, "mlp")


def test_the_autotune_box_and_the_form_s_result_line_follow_the_model(window, qtbot):
    box, panel = window.sweep_panel.tuning_box, window.run_panel
    choose(panel.model_combo, "cnn")
    assert box.job_label.text().startswith(MODELS["cnn"].title)
    assert f"{MODELS['cnn'].title}: no run yet" in panel.result_label.text() and panel.progress_bar.text() == "Idle"
    assert window.statusBar().currentMessage() == f"Model: {MODELS['cnn'].title}.", "no older job's words left"
    choose(panel.model_combo, "mlp")
    assert box.job_label.text().startswith("MLP on "), "never an earlier model's job"
    panel.batch_edit.setText("not a number")
    assert box.job_label.text() == FORM_PROBLEM
    panel.batch_edit.setText("64")
    assert box.job_label.text().startswith("MLP")
    qtbot.waitUntil(lambda: not running_threads(), timeout=RUN_TIMEOUT_MS)  # the models' parameters counted meanwhile


def test_a_comparison_of_history_runs_replaces_the_last_comparisons_outcome(window):
    from core.compare.table import compare_results

    compare = window.compare_panel
    compare.progress_label.setText("Comparison done: 2 of 2 runs completed, each saved to the history.")
    result = RunResult(status=RunStatus.COMPLETED, config={"model": "mlp", "devices": ["CPU:0"]}, steps_done=10, samples_per_s=100.0)
    compare.show_comparison(compare_results([("CPU:0 #1", result), ("CPU:0 #2", result)]), "Runs #1, #2 from the history.")
    assert "Comparison done" not in compare.progress_label.text()


def test_quick_start_names_every_sample_model(window):
    dialog = window.show_help()
    shown = dialog.browser.toPlainText()
    for model in MODELS.values():
        assert model.title in shown, model.title
    dialog.close()


def test_after_a_search_ends_the_status_bar_and_its_bar_say_it_has_ended(ready_window, qtbot):
    """A one-probe largest-batch search (up to 32 under 2 GiB) from the Sweep tab: while it runs, then once it has ended."""
    box = ready_window.sweep_panel.tuning_box
    ready_window.show_panel(ready_window.sweep_panel)
    box.memory_edit.setText("2GiB")
    box.up_to_edit.setText("32")
    with qtbot.waitSignal(box.controller.result_ready, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(box.max_batch_button, Qt.MouseButton.LeftButton)
        assert ready_window.statusBar().currentMessage() == "A search is running in the Sweep tab…"
    qtbot.waitUntil(lambda: not box.controller.is_running(), timeout=10_000)
    assert ready_window.statusBar().currentMessage() == "The search has ended: its results are in the Sweep tab."
    assert box.progress_bar.value() in (0, 100), "over: never left part-way"
    assert ready_window.run_panel.progress_bar.text() == "Search ended"


def test_installed_backends_are_compare_targets_and_f5_finds_one_installed_meanwhile(ready_window, qtbot, tmp_path, monkeypatch):
    """JAX (installed with the tests) is a box to tick; a PyTorch that appears while the app runs shows up on F5.

    PyTorch cannot be installed here (GBs of CUDA wheels): a package named `torch` on the path stands in for
    it being installed (only whether it can be found is asked; nothing imports it).
    """
    import sys

    specs = ready_window.compare_panel.target_specs()
    assert "jax:CPU:0" in specs and "torch:CPU:0" not in specs
    combo = ready_window.run_panel.backend_combo
    torch_item = combo.model().item(combo.findData("torch"))
    assert not torch_item.isEnabled() and 'pip install -e ".[torch]"' in combo.itemData(
        combo.findData("torch"), Qt.ItemDataRole.ToolTipRole
    )

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('a stand-in: only found, never imported')\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    combo.setCurrentIndex(combo.findData("jax"))
    with qtbot.waitSignal(ready_window.device_panel.devices_changed, timeout=DETECTION_TIMEOUT_MS):
        refresh = next(a for a in ready_window.menuBar().actions()[2].menu().actions() if a.text() == "Refresh")
        assert refresh.shortcut() == QKeySequence("F5")
        refresh.trigger()
    assert "torch:CPU:0" in ready_window.compare_panel.target_specs()
    assert combo.model().item(combo.findData("torch")).isEnabled() and combo.backend() == "jax", "the choice is kept"


def test_the_first_stop_says_stopping_at_once_on_the_bar(ready_window, qtbot):
    """Stop after steps have come in: the bar says "Stopping…" at once, not "Running" until the call in flight ends."""
    set_one_device(ready_window, steps=1_000_000)
    panel = ready_window.run_panel
    with qtbot.waitSignal(ready_window.run_controller.run_finished, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: panel.progress_bar.maximum() == 1_000_000, timeout=RUN_TIMEOUT_MS)  # steps have come in
        qtbot.mouseClick(panel.stop_button, Qt.MouseButton.LeftButton)
        assert panel.progress_bar.text().startswith(STOPPING)
        assert ready_window.statusBar().currentMessage() == "Stopping after the step in flight…"
