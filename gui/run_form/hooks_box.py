"""The run form's "Logging & profiling" box: TensorBoard event files, TensorBoard itself, a profiler capture.

The box's choices are fields of the run form's state (`gui.state.run_form`),
which records them in the run's config (`config.hooks`), from which the job service builds the run's TensorBoard writer
and profiler capture (`core.jobs.run_hooks`); the box follows the hooks the run
was given (`follow_run`) and, after the run, says where the event files and the
trace went and how to open them. "Open in TensorBoard"
starts a local TensorBoard in a worker thread (it imports TensorFlow: seconds)
and opens the browser; the server is stopped when the window closes. The
choices are remembered with the form's state (`gui.remembered`).
"""

from __future__ import annotations

import atexit
import html
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSettings, Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QCheckBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from core.config import MAX_STEPS, ConfigError
from core.hooks.tensorboard import TensorBoardMissing, TensorBoardProcess, launch_tensorboard
from gui.dialogs.profile_view import ProfileViewDialog, open_profile_view
from gui.qt_threads import run_in_background
from gui.remembered import FOLDER_LOGS, ask_folder
from gui.run_form.bindings import bind_check, bind_spin, bind_text
from gui.run_form.note_label import NoteLabel
from gui.state.run_form import RunFormState
from gui.style import ERROR_COLOR

if TYPE_CHECKING:
    from core.jobs import RunHooks

TENSORBOARD_FIELD = "tensorboard_dir"

log = logging.getLogger(__name__)


def default_tensorboard_dir() -> Path:
    """`tensorboard/` beside the run history (user data folder, or $DEVICE_LAB_DATA_DIR)."""
    from core.history.store import default_path

    return default_path().parent / "tensorboard"


@dataclass(frozen=True)
class LaunchOutcome:
    """What starting TensorBoard gave: a running server, or the reason there is none."""

    server: TensorBoardProcess | None
    error: str = ""


def start_tensorboard(logdir: Path, cancelled: threading.Event) -> LaunchOutcome:
    """Start TensorBoard on `logdir` (blocks until it answers); stop it again if `cancelled` was set meanwhile."""
    try:
        server = launch_tensorboard(logdir)
    except (TensorBoardMissing, RuntimeError, OSError) as exc:
        return LaunchOutcome(None, str(exc))
    atexit.register(server.stop)  # a last resort should the window never get to stop it
    if cancelled.is_set():
        server.stop()
        return LaunchOutcome(None, "Device Lab closed before TensorBoard had started.")
    return LaunchOutcome(server)


class RunOptionsBox(QGroupBox):
    """TensorBoard logging, "Open in TensorBoard" and "Profile steps A–B" for the next run."""

    def __init__(self, settings: QSettings, state: RunFormState, parent: QWidget | None = None):
        super().__init__("Logging && profiling", parent)
        self.setObjectName("runOptionsBox")
        self._settings = settings
        self._state = state
        self._hooks: RunHooks | None = None
        self.profile_view: ProfileViewDialog | None = None
        self._server: TensorBoardProcess | None = None
        self._launching = False
        self._cancel_launch = threading.Event()
        self._build()
        self._bind()
        self._connect()
        self._sync()

    # --- public API ----------------------------------------------------------

    def log_dir(self) -> Path | None:
        """The TensorBoard folder typed in the box (None when empty)."""
        text = self.logdir_edit.text().strip()
        return Path(text).expanduser() if text else None

    def profile_steps(self) -> tuple[int, int] | None:
        """The steps to profile, or None when profiling is off."""
        if not self.profile_check.isChecked():
            return None
        return self.first_step_spin.value(), self.last_step_spin.value()

    def check(self) -> None:
        """Raise ConfigError when TensorBoard logging is on without a folder for its event files."""
        if self.tensorboard_check.isChecked() and self.log_dir() is None:
            raise ConfigError(TENSORBOARD_FIELD, "", "a folder for the TensorBoard event files (Browse…)")

    def follow_run(self, hooks: RunHooks) -> None:
        """A run's hooks are built (it is about to start): its event files and trace are said once it ends (`show_outputs`)."""
        self._hooks = hooks
        self.outputs_label.setVisible(False)

    def outputs_text(self) -> str:
        """Where the last run's event files and trace are and how to open them ('' when it had neither)."""
        hooks = self._hooks
        lines = []
        if hooks is not None and hooks.tensorboard is not None and hooks.tensorboard.run_dir is not None:
            lines.append(f"TensorBoard event files: {hooks.tensorboard.run_dir} (Open in TensorBoard shows them).")
        if hooks is not None and hooks.profiler is not None:
            lines.append(hooks.profiler.how_to_view())
        return "\n".join(lines)

    def show_outputs(self, *_: object) -> None:
        """A run ended: say where its event files and trace are, and show a captured profile's op breakdown."""
        text = self.outputs_text()
        self.outputs_label.setText(html.escape(text).replace("\n", "<br>"))
        self.outputs_label.setVisible(bool(text))
        if text:
            log.info("%s", text)
        capture = self._hooks.profiler if self._hooks is not None else None
        if capture is not None and capture.captured is not None and capture.trace_dir is not None:
            self.profile_view = open_profile_view(self.window(), capture.trace_dir, capture.how_to_view())

    def set_running(self, running: bool) -> None:
        """Lock the options while a run is in flight (TensorBoard can still be opened)."""
        for widget in (self.tensorboard_check, self.logdir_edit, self.browse_button, self.profile_check):
            widget.setEnabled(not running)
        self._sync(running)

    def open_tensorboard(self) -> None:
        """Open TensorBoard on the folder in the box: start it first (in the background) unless it already runs there."""
        folder = self.log_dir()
        if folder is None:
            self._say("Choose a folder for TensorBoard first (Browse…).", error=True)
            return
        if self._server is not None and self._server.running and self._server.logdir == folder:
            QDesktopServices.openUrl(QUrl(self._server.url))
            return
        if self._launching:
            return
        self.stop_tensorboard()
        self._launching = True
        self.open_button.setEnabled(False)
        self._say(f"Starting TensorBoard on {folder}… (it loads TensorFlow: a few seconds)")
        run_in_background(
            start_tensorboard,
            folder,
            self._cancel_launch,
            on_result=self._on_launched,
            on_error=self._on_launch_failed,
            on_finished=self._on_launch_finished,
            name="tensorboard-launch",
        )

    @property
    def tensorboard(self) -> TensorBoardProcess | None:
        """The TensorBoard server this box started (None when none runs)."""
        return self._server

    def stop_tensorboard(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def shutdown(self) -> None:
        """The window is closing: stop TensorBoard, and a TensorBoard still starting once it is up."""
        self._cancel_launch.set()
        self.stop_tensorboard()

    # --- building ------------------------------------------------------------

    def _build(self) -> None:
        self.tensorboard_check = QCheckBox("Write TensorBoard logs")
        self.tensorboard_check.setObjectName("tensorboardCheck")
        self.tensorboard_check.setToolTip(
            "Write loss, step time, samples/s and device memory per step as TensorBoard event files, one folder per run."
        )
        self.logdir_edit = QLineEdit()
        self.logdir_edit.setObjectName("tensorboardDirEdit")
        self.logdir_edit.setPlaceholderText("Folder for the event files")
        self.logdir_edit.setToolTip("Each run gets its own sub-folder here; TensorBoard shows them side by side.")
        self.browse_button = QPushButton("Browse…")
        self.browse_button.setObjectName("tensorboardBrowseButton")
        self.browse_button.setToolTip("Choose the folder for TensorBoard event files and profiles.")
        self.open_button = QPushButton("Open in TensorBoard")
        self.open_button.setObjectName("openTensorBoardButton")
        self.open_button.setToolTip("Start TensorBoard on this folder (127.0.0.1 only) and open it in the browser.")
        self.profile_check = QCheckBox("Profile steps")
        self.profile_check.setObjectName("profileCheck")
        self.profile_check.setToolTip(
            "Record a TensorFlow profiler trace of these steps (whole calls of the compiled step) into the run's folder."
        )
        self.first_step_spin = QSpinBox()
        self.first_step_spin.setObjectName("profileFirstSpin")
        self.first_step_spin.setRange(1, MAX_STEPS)
        self.first_step_spin.setToolTip("First step to profile (steps count from 1; step 1 includes compilation).")
        self.last_step_spin = QSpinBox()
        self.last_step_spin.setObjectName("profileLastSpin")
        self.last_step_spin.setRange(1, MAX_STEPS)
        self.last_step_spin.setToolTip("Last step to profile; keep the range short, traces grow quickly.")
        self.status_label = NoteLabel()
        self.status_label.setObjectName("runOptionsStatus")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status_label.setVisible(False)
        self.outputs_label = NoteLabel()
        self.outputs_label.setObjectName("runOutputsLabel")
        self.outputs_label.setWordWrap(True)
        self.outputs_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.outputs_label.setVisible(False)

        folder_row = QHBoxLayout()
        folder_row.addWidget(self.logdir_edit, 1)
        folder_row.addWidget(self.browse_button)
        tensorboard_row = QHBoxLayout()
        tensorboard_row.addWidget(self.tensorboard_check, 1)
        tensorboard_row.addWidget(self.open_button)
        profile_row = QHBoxLayout()
        profile_row.addWidget(self.profile_check)
        profile_row.addWidget(self.first_step_spin, 1)
        profile_row.addWidget(QLabel("to"))
        profile_row.addWidget(self.last_step_spin, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(tensorboard_row)
        layout.addLayout(folder_row)
        layout.addLayout(profile_row)
        layout.addWidget(self.status_label)
        layout.addWidget(self.outputs_label)

    def _connect(self) -> None:
        self.tensorboard_check.toggled.connect(self._on_changed)
        self.profile_check.toggled.connect(self._on_changed)
        self.logdir_edit.textChanged.connect(self._on_changed)
        self.first_step_spin.valueChanged.connect(self._on_first_step)
        self.last_step_spin.valueChanged.connect(self._on_changed)
        self.browse_button.clicked.connect(self._browse)
        self.open_button.clicked.connect(self.open_tensorboard)

    def _bind(self) -> None:
        """Show the state's choices and write the edits into it; the folder starts as the one beside the history."""
        state = self._state
        if not state.tensorboard_dir:
            state.tensorboard_dir = str(default_tensorboard_dir())
        bind_check(state, "tensorboard", self.tensorboard_check)
        bind_text(state, "tensorboard_dir", self.logdir_edit)
        bind_check(state, "profile", self.profile_check)
        bind_spin(state, "profile_first", self.first_step_spin)
        self.last_step_spin.setMinimum(self.first_step_spin.value())
        bind_spin(state, "profile_last", self.last_step_spin)

    # --- reacting ------------------------------------------------------------

    def _on_first_step(self, first: int) -> None:
        self.last_step_spin.setMinimum(first)
        self._on_changed()

    def _on_changed(self) -> None:
        self._sync()

    def _sync(self, running: bool = False) -> None:
        profiling = self.profile_check.isChecked() and not running
        self.first_step_spin.setEnabled(profiling)
        self.last_step_spin.setEnabled(profiling)
        self.open_button.setEnabled(not self._launching)

    def _browse(self) -> None:
        fallback = str(self.log_dir() or default_tensorboard_dir())
        folder = ask_folder(self, FOLDER_LOGS, "Folder for TensorBoard logs", fallback, self._settings)
        if folder:
            self.logdir_edit.setText(folder)

    def _on_launched(self, outcome: LaunchOutcome) -> None:
        if outcome.server is not None and self._cancel_launch.is_set():
            outcome.server.stop()
            return
        if outcome.server is None:
            self._say(outcome.error, error=True)
            return
        self._server = outcome.server
        self._say(f"TensorBoard runs at {outcome.server.url} (stopped when Device Lab closes).")
        QDesktopServices.openUrl(QUrl(outcome.server.url))

    def _on_launch_failed(self, message: str) -> None:
        self._say(f"Could not start TensorBoard: {message}", error=True)

    def _on_launch_finished(self) -> None:
        self._launching = False
        self.open_button.setEnabled(True)

    def _say(self, text: str, error: bool = False) -> None:
        self.status_label.setText(text)
        self.status_label.setStyleSheet(f"color: {ERROR_COLOR};" if error else "")
        self.status_label.setVisible(bool(text))
