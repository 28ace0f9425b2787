"""The main window: composition only. It makes the controllers and the views; run form on the left, tabs on the right, menus, status bar.

Other panels join with `add_panel(widget, title)`; they can overlay runs on the
live plots through `window.plots` and follow runs through
`window.run_controller.run_finished` (a FinishedRun with its history id).

With `charts_later=True` (the app) the window shows before its chart panels
(Training, Compare, History; see gui.charts) exist: they are built on
first use of `plots`, `run_controller`, `compare_panel` or `history_panel`, on
opening their tab, or just after the devices are listed.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QLabel,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QWidget,
)

from core.config import ConfigError, RunConfig
from core.formatting import format_duration
from core.machine.runtime import RuntimeSettings
from core.machine.types import DeviceReport
from core.results import RunStatus
from core.training.hooks import RunHook
from gui.dialogs.about import AboutDialog
from gui.dialogs.help import HelpDialog
from gui.dialogs.settings import RESTART_NOTE, SettingsDialog
from gui.icons import app_icon
from gui.job_data import FinishedRun, Progress
from gui.menus import WindowMenus
from gui.panels.devices import DevicePanel
from gui.panels.log_dock import LogDock
from gui.qt_threads import wait_for_threads
from gui.remembered import WindowMemory, fit_on_screen
from gui.run_form.hooks_box import RunOptionsBox
from gui.run_form.outcome import RunResultPanel
from gui.run_form.panel import RunPanel
from gui.settings import KEY_WINDOW_GEOMETRY, KEY_WINDOW_STATE, read_bytes, report_bad_setting, take_setting_notes

if TYPE_CHECKING:
    from gui.charts import ChartPanels
    from gui.controllers.run import RunController
    from gui.panels.compare import ComparePanel
    from gui.panels.history import HistoryPanel
    from gui.plotting.plots import PlotsWidget

CLOSE_TIMEOUT_S = 30.0
CHART_TITLES = ("Training", "Compare", "History")  # the tabs of gui.charts, in ChartPanels.widgets() order
STATUS_TIMEOUT_MS = 8000


class MainWindow(QMainWindow):
    """Device Lab's window. Call `start()` once shown: it detects devices in the background."""

    def __init__(
        self,
        settings: QSettings,
        runtime: RuntimeSettings,
        runtime_note: str = "",
        parent: QWidget | None = None,
        charts_later: bool = False,
    ):
        super().__init__(parent)
        self._hook_providers: list[Callable[[RunConfig], list[RunHook]]] = []
        self._run_config: RunConfig | None = None
        self.setObjectName("mainWindow")
        self.setWindowTitle("Device Lab")
        self.settings = settings
        self.runtime = runtime
        self.runtime_note = runtime_note
        self.restart_requested = False
        self._params_requested = False
        self.device_panel = DevicePanel()
        self.run_panel = RunPanel()
        self.run_options = RunOptionsBox(settings, self.run_panel.state)
        self.run_panel.add_section(self.run_options)
        self._charts: ChartPanels | None = None
        self._chart_placeholders = [QLabel("Loading…") for _ in CHART_TITLES]
        self.tabs = QTabWidget()
        self.tabs.setObjectName("mainTabs")
        self.tabs.setDocumentMode(True)
        self.add_panel(self.device_panel, "Devices")
        for placeholder, title in zip(self._chart_placeholders, CHART_TITLES, strict=True):
            placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
            self.add_panel(placeholder, title)
        self.result_panel = RunResultPanel()
        self.tabs.insertTab(self.tabs.indexOf(self._chart_placeholders[0]) + 1, self.result_panel, "Result")
        self._add_sweep_tab()
        self.log_dock = LogDock(self)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log_dock)
        self.log_dock.hide()
        self._layout()
        self.menus = WindowMenus(self)
        self.start_action, self.stop_action = self.menus.start_action, self.menus.stop_action
        self.settings_action = self.menus.settings_action
        self.diagnose_action = self.menus.diagnose_action
        self.memory = WindowMemory(settings, self.run_panel.state, self.splitter, self)
        self.status_detail = QLabel()
        self.statusBar().addPermanentWidget(self.status_detail)
        self.statusBar().showMessage("Detecting devices… (TensorFlow is loading in the background)")
        self._wire()
        self._wire_options()
        self._restore_geometry()
        if charts_later:
            self.tabs.currentChanged.connect(self._on_tab_changed)
            self.device_panel.devices_changed.connect(lambda _report: QTimer.singleShot(0, self.charts))
        else:
            self.charts()

    # --- public API ----------------------------------------------------------

    def add_panel(self, widget: QWidget, title: str, select: bool = False) -> int:
        """Add a tab (compare, history, …); returns its index."""
        index = self.tabs.addTab(widget, title)
        if select:
            self.tabs.setCurrentIndex(index)
        return index

    def show_panel(self, widget: QWidget) -> None:
        self.tabs.setCurrentWidget(widget)

    def charts(self) -> ChartPanels:
        """The Training, Compare and History panels, built and wired on the first call."""
        if self._charts is None:
            from gui.charts import build_chart_panels
            from gui.plotting.theme import ThemeFollower

            current = self.tabs.currentIndex()
            self._charts = build_chart_panels(self, self.run_panel.config, self.run_panel.errors)
            for placeholder, widget in zip(self._chart_placeholders, self._charts.widgets(), strict=True):
                index = self.tabs.indexOf(placeholder)
                title = self.tabs.tabText(index)
                self.tabs.removeTab(index)
                self.tabs.insertTab(index, widget, title)
                placeholder.deleteLater()
            self._chart_placeholders.clear()
            self.tabs.setCurrentIndex(current)
            self._wire_charts()
            self.theme = ThemeFollower(self)
        return self._charts

    @property
    def plots(self) -> PlotsWidget:
        return self.charts().plots

    @property
    def run_controller(self) -> RunController:
        return self.charts().run_controller

    @property
    def compare_panel(self) -> ComparePanel:
        return self.charts().compare_panel

    @property
    def history_panel(self) -> HistoryPanel:
        return self.charts().history_panel

    def start(self) -> None:
        """Once shown: fit the window on its screen, then detect devices (importing TensorFlow, applying the start-up settings) off the GUI thread.

        Fitted after it is shown, when its frame is known: a geometry saved on a larger screen, or the first start's
        1400 x 880 on a smaller one (a 1024 x 700 screen, 2026-11-28), would otherwise open with Start and Stop out of reach.
        """
        fit_on_screen(self)
        self.device_panel.detect(self.runtime)

    # --- building ------------------------------------------------------------

    def _layout(self) -> None:
        scroll = QScrollArea()
        scroll.setObjectName("runPanelScroll")
        scroll.setWidget(self.run_panel)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(380)
        self.splitter = splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setObjectName("mainSplitter")
        splitter.addWidget(scroll)
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([430, 970])
        splitter.setChildrenCollapsible(False)
        self.setCentralWidget(splitter)

    def _wire(self) -> None:
        self.device_panel.devices_changed.connect(self._on_devices)
        self.run_panel.tpu_probed.connect(self.device_panel.show_tpu_probe)
        self.add_run_hook_provider(self.run_panel.cluster_box.run_hooks_of)
        self.device_panel.detection_failed.connect(lambda text: self.statusBar().showMessage(text))
        self.run_panel.start_requested.connect(self._start_run)
        self.run_panel.stop_requested.connect(self._stop_run)
        self.run_panel.start_enabled_changed.connect(self.start_action.setEnabled)
        self.run_panel.result_label.linkActivated.connect(lambda _link: self.show_panel(self.result_panel))
        self.run_panel.model_changed.connect(lambda title: self.statusBar().showMessage(f"Model: {title}.", STATUS_TIMEOUT_MS))

    def _wire_charts(self) -> None:
        """Connect the chart panels, and bring them up to date with the devices already listed."""
        self.run_controller.run_started.connect(self._on_run_started)
        self.run_controller.progress.connect(self._on_progress)
        self.run_controller.run_finished.connect(self._on_run_finished)
        self.run_controller.failed.connect(self._on_run_failed)  # the engine could not even start the run
        self.run_controller.diagnosing.connect(self.run_panel.show_diagnosing)
        self.run_controller.running_changed.connect(self._on_running_changed)
        self.device_panel.devices_changed.connect(self.compare_panel.set_devices)
        self.device_panel.devices_changed.connect(self.memory.compare_ready)
        self.memory.attach_compare(self.compare_panel)
        if self.device_panel.devices():
            self.compare_panel.set_devices(self.device_panel.report)
            self.memory.compare_ready()
        self.run_controller.running_changed.connect(self.compare_panel.set_blocked)
        self.run_controller.run_finished.connect(self.history_panel.refresh)
        self.compare_panel.running_changed.connect(self._on_running_changed)
        self.compare_panel.follow_in(self.run_panel.progress_bar, self.run_panel.result_label)  # not "Idle" while comparing
        self.run_panel.stop_requested.connect(self.compare_panel.stop)
        self.compare_panel.run_saved.connect(self.history_panel.refresh)
        self.history_panel.compare_requested.connect(self.compare_panel.show_comparison)
        for panel in (self.compare_panel, self.history_panel):
            panel.message.connect(self.statusBar().showMessage)
            panel.show_requested.connect(self.show_panel)
        self.run_controller.run_hooks.connect(self.run_options.follow_run)
        self.run_controller.run_finished.connect(self.run_options.show_outputs)
        self.run_controller.running_changed.connect(self.run_options.set_running)
        if self.history_panel.notice:
            self.statusBar().showMessage(self.history_panel.notice)

    def _wire_options(self) -> None:
        """Logging & profiling hooks, remembered settings and icon (the plot theme comes with the charts)."""
        self.run_panel.start_requested.connect(self.memory.save)
        self.memory.restore()
        self.help_dialog: HelpDialog | None = None
        self.setWindowIcon(app_icon())

    def _add_sweep_tab(self) -> None:
        """The Sweep tab (gui.tuning): the run form's job over one or two settings; "Use these settings" fills the form."""
        from gui.controllers.sweep import SweepController
        from gui.controllers.tuning import TuningController
        from gui.tuning.sweep_panel import SweepPanel

        self.sweep_controller = SweepController(self)
        self.tuning_controller = TuningController(self)
        self.sweep_panel = SweepPanel(
            self.sweep_controller, self.tuning_controller, self.run_panel.config, self.run_panel.errors, self._job_in_flight
        )
        self.add_panel(self.sweep_panel, "Sweep")
        self.sweep_panel.settings_chosen.connect(self.run_panel.apply_settings)
        self.sweep_panel.running_changed.connect(self._on_sweep_running)
        self.sweep_panel.row_saved.connect(self._on_sweep_row_saved)
        self.sweep_panel.message.connect(self.statusBar().showMessage)
        self.sweep_panel.follow_in(self.run_panel.progress_bar, self.run_panel.result_label)  # never an older job's words
        self.run_panel.stop_requested.connect(self.sweep_panel.stop)
        self.run_panel.form_changed.connect(self.sweep_panel.tuning_box.follow_form)
        self.sweep_panel.tuning_box.follow_form(self.run_panel.config())

    def _job_in_flight(self) -> bool:
        """A run or comparison is in flight (a sweep waits for it)."""
        return self._charts is not None and (self.run_controller.is_running() or self.compare_panel.is_running())

    def _on_sweep_running(self, running: bool) -> None:
        self._on_running_changed(running)
        if self._charts is not None:
            self.compare_panel.set_blocked(running)

    def _on_sweep_row_saved(self, _row: object) -> None:
        if self._charts is not None:
            self.history_panel.refresh()

    # --- reacting ------------------------------------------------------------

    def _on_tab_changed(self, index: int) -> None:
        if self.tabs.widget(index) in self._chart_placeholders:
            self.charts()

    def _on_devices(self, report: DeviceReport) -> None:
        self.run_panel.set_devices(report)
        usable = sum(1 for d in report.devices if d.available)
        self.statusBar().showMessage(f"Ready: {usable} usable device{'s' if usable != 1 else ''}. Press Start (Ctrl+R).", STATUS_TIMEOUT_MS)
        self.status_detail.setText(" · ".join(d.tf_name for d in report.devices if d.available and d.tf_name))
        if not self._params_requested:
            self._params_requested = True
            # TensorFlow and Keras are loaded now: ~300,000 long-lived objects that each full
            # garbage collection would scan, pausing every thread for 150-250 ms. Freeze them.
            gc.freeze()
            self.run_panel.model_choice.params_counted.connect(self._settle_heap, Qt.ConnectionType.SingleShotConnection)
            self.run_panel.load_param_counts()

    def _settle_heap(self) -> None:
        """Start-up is over (models counted, charts built): collect its garbage once, then freeze what lives on.

        What the parameter counts left (Keras's and TensorFlow's caches of four sample
        models) and the chart panels would otherwise be scanned by every full collection
        during a run: pauses of ~30 ms on the GUI thread. The collect runs once, while idle.
        """
        self.charts()
        gc.collect()
        gc.freeze()

    def add_run_hook_provider(self, provider: Callable[[RunConfig], list[RunHook]]) -> None:
        """Register a function giving a view's own hooks for each run (the cluster box's watcher of the workers).

        The run's standard hooks (TensorBoard, profiler, GPU use, …) are not a view's: the job service builds them from
        `config.hooks` (`core.jobs.run_hooks`) and hands them to the views through `RunController.run_hooks`.
        """
        self._hook_providers.append(provider)

    def _start_run(self, config: RunConfig, label: str) -> None:
        """Start the form's run: its config records its hooks (`config.hooks`), from which the job service builds them."""
        from core.hooks.profiler import check_profile

        try:
            self.run_options.check()
            check_profile(config)  # a profile past the run's steps, or of a multi-worker run: refused before it starts
        except ConfigError as exc:
            self.run_panel.show_not_started(str(exc))
            self.result_panel.show_failure("Not started", str(exc))
            self.statusBar().showMessage(f"Not started: {exc}", STATUS_TIMEOUT_MS)
            return
        self._run_config = config
        self.run_controller.diagnose = self.diagnose_action.isChecked()
        own = [hook for provider in self._hook_providers for hook in provider(config)]
        if not self.run_controller.start(config, label, own):
            self.statusBar().showMessage("A run is already in flight: stop it first.", STATUS_TIMEOUT_MS)

    def _stop_run(self) -> None:
        self.run_controller.stop()
        self.statusBar().showMessage("Stopping after the step in flight…")

    def _on_run_started(self, key: str, label: str) -> None:
        self.plots.describe_run(key, None, self._run_config.to_dict() if self._run_config else None)
        self.run_panel.show_starting(label)
        self.result_panel.show_running(label)
        self.show_panel(self.plots)
        self.statusBar().showMessage(f"Training {label}…")

    def _on_progress(self, progress: Progress) -> None:
        self.run_panel.show_progress(progress.done, progress.total, progress.samples_per_s, progress.eta_s)
        if progress.samples_per_s:
            eta = f", ETA {format_duration(progress.eta_s)}" if progress.eta_s is not None else ""
            self.statusBar().showMessage(
                f"Training: step {progress.done:,} of {progress.total:,}, {progress.samples_per_s:,.0f} samples/s{eta}"
            )

    def _on_run_finished(self, finished: FinishedRun) -> None:
        self.plots.describe_run(self.run_controller.current_key, finished.run_id, finished.result.config)
        self.run_panel.show_result(finished)
        self.result_panel.show_result(finished)
        result = finished.result
        rate = f", {result.samples_per_s:,.0f} samples/s" if result.samples_per_s else ""
        text = f"Run {result.status} after {result.steps_done:,} steps{rate}."
        if result.status == RunStatus.FAILED:
            text += " " + result.message
        self.statusBar().showMessage(text)

    def _on_run_failed(self, message: str) -> None:
        self.run_panel.show_error(message)
        self.result_panel.show_failure("Failed", message)
        self.statusBar().showMessage(f"Run failed: {message}")

    def _on_running_changed(self, running: bool) -> None:
        self.run_panel.set_running(running)
        self.stop_action.setEnabled(running)
        self.settings_action.setEnabled(not running)

    # --- settings, restart, close --------------------------------------------

    def open_settings(self) -> SettingsDialog:
        """Show the device settings; when saved settings need a restart, offer one."""
        dialog = SettingsDialog(self.settings, self.runtime, self.runtime_note, self)
        if dialog.exec() == SettingsDialog.DialogCode.Accepted and dialog.needs_restart():
            self.offer_restart()
        return dialog

    def offer_restart(self) -> None:
        answer = QMessageBox.question(
            self,
            "Restart Device Lab?",
            RESTART_NOTE + "\n\nRestart now? A run in flight is stopped and kept in the history.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.restart_requested = True
            self.close()
        else:
            self.statusBar().showMessage("Device settings saved: they take effect after a restart.")

    def closeEvent(self, event: QCloseEvent) -> None:
        """Stop a run in flight and wait for every worker thread before the window goes."""
        self.memory.save()
        self.settings.setValue(KEY_WINDOW_GEOMETRY, self.saveGeometry())
        self.settings.setValue(KEY_WINDOW_STATE, self.saveState())
        charts = self._charts
        if charts is not None:
            self._say_stopping(charts)
            charts.compare_panel.shutdown(CLOSE_TIMEOUT_S)
        self.sweep_panel.shutdown(CLOSE_TIMEOUT_S)
        self.run_panel.close_down()
        self.run_options.shutdown()
        self.device_panel.close_down()
        if charts is not None:
            charts.run_controller.shutdown(CLOSE_TIMEOUT_S)
        if not wait_for_threads(CLOSE_TIMEOUT_S):
            print("Device Lab: a background task is still running; waiting for it before exiting.", file=sys.stderr)
        self.log_dock.view.close_down()
        if charts is not None:
            charts.history_panel.close_store()
        event.accept()

    def _say_stopping(self, charts: ChartPanels) -> None:
        """Ask a run or comparison in flight to stop, and say so at once: the close waits for it (seconds) without painting."""
        busy = {"run": charts.run_controller.is_running(), "comparison": charts.compare_panel.is_running()}
        jobs = [name for name, running in busy.items() if running]
        if not jobs:
            return
        charts.run_controller.stop()
        charts.compare_panel.stop()
        self.statusBar().showMessage(f"Stopping the {' and the '.join(jobs)} after the step in flight, then closing…")
        self.run_panel.progress_bar.setFormat("Stopping…")
        self.run_panel.stop_button.setEnabled(False)
        self.repaint()  # now: the event loop does not run again before the window goes

    def _restore_geometry(self) -> None:
        """The saved size, place and dock layout; a value that is not one (or that Qt cannot restore) is ignored, said once,
        and the default used. Then the settings ignored so far (this one, the file's unsafe values, the device settings…)
        are said in the status bar, after what it says already."""
        geometry = read_bytes(self.settings, KEY_WINDOW_GEOMETRY)
        self._restored_geometry = geometry is not None and self.restoreGeometry(geometry)
        if geometry is not None and not self._restored_geometry:
            report_bad_setting(KEY_WINDOW_GEOMETRY, geometry, "the window geometry as Device Lab saves it", self.settings.fileName())
        if not self._restored_geometry:
            self.resize(1400, 880)
        state = read_bytes(self.settings, KEY_WINDOW_STATE)
        if state is not None and not self.restoreState(state):
            report_bad_setting(KEY_WINDOW_STATE, state, "the window layout as Device Lab saves it", self.settings.fileName())
        notes = take_setting_notes(self.settings.fileName())
        if notes:
            keys = ", ".join(dict.fromkeys(key for key, _ in notes))
            said = self.statusBar().currentMessage()
            self.statusBar().showMessage(f"{said} Ignored unreadable settings ({keys}): the defaults are used; the log says why.".strip())

    def show_about(self) -> None:
        AboutDialog(self).exec()

    def show_help(self) -> HelpDialog:
        """Help > Quick start (F1): how to use the window, beside it (one dialog, brought forward)."""
        if self.help_dialog is None:
            self.help_dialog = HelpDialog(self)
        self.help_dialog.show()
        self.help_dialog.raise_()
        self.help_dialog.activateWindow()
        return self.help_dialog
