"""Local workers in the cluster box: can they be reached from the network, and do they crowd this machine?

Local workers run in a private network namespace where the system allows it
(`core.cluster.isolation`); whether it does is tried once, off the GUI thread.
Where it does not, Start stays disabled until the user ticks "Start them
anyway" and confirms that the workers will be reachable from the network;
the run form then sets `RunConfig.allow_network_workers`. The answer and the
confirmation go into the form's state (for this session only: never saved).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QLabel, QMessageBox, QVBoxLayout, QWidget

from core.cluster.isolation import isolation_problem, known_isolation_problem
from core.cluster.topology import oversubscription_warning
from core.config import RunConfig
from gui.qt_threads import run_in_background
from gui.run_form.bindings import bind_check
from gui.run_form.note_label import NoteLabel
from gui.state.run_form import ALLOW_NETWORK_WORKERS, RunFormState
from gui.style import SUCCESS_COLOR, WARNING_COLOR

CHECKING = "Checking whether the local workers can be kept off the network…"
ISOLATED = "The local workers run in a private network of their own (loopback only): no other machine can reach them."
WARNING_STYLE = f"color: {WARNING_COLOR}; font-size: 9pt;"
CONFIRM_TITLE = "Local workers reachable from the network"


class LocalWorkersNotes(QWidget):
    """The isolation status of local workers, the permission to run them exposed, and the crowding warning."""

    isolation_checked = Signal(str)  # "" when local workers can be isolated here, else why not

    def __init__(self, state: RunFormState, parent: QWidget | None = None):
        super().__init__(parent)
        self._state = state
        self._checking = False
        self._closed = False
        self._crowding_for: tuple[int, bool] | None = None
        self.confirm_dialog: QMessageBox | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.isolation_label = _label("clusterIsolationLabel")
        self.allow_check = QCheckBox(ALLOW_NETWORK_WORKERS)
        self.allow_check.setObjectName("allowNetworkWorkersCheck")
        self.allow_check.setToolTip("Run local workers whose TensorFlow servers listen on every network interface (asks first).")
        self.allow_check.setVisible(False)
        bind_check(state, "allow_network_workers", self.allow_check)
        self.allow_check.clicked.connect(self._on_allow_clicked)
        self.crowding_label = _label("clusterOversubscriptionLabel")
        self.crowding_label.setStyleSheet(WARNING_STYLE)
        for widget in (self.isolation_label, self.allow_check, self.crowding_label):
            layout.addWidget(widget)

    def check_isolation(self) -> None:
        """Find out (once, in a worker thread) whether local workers can be isolated here."""
        known = known_isolation_problem()
        if known is not None:
            self._show_problem(known)
            return
        if self._checking or self._closed:
            return
        self._checking = True
        self._show_isolation(CHECKING, "")
        run_in_background(
            isolation_problem,
            on_result=self._show_problem,
            on_error=self._show_problem,
            on_finished=self._on_check_finished,
            name="worker-isolation-check",
        )

    def show_config(self, config: RunConfig | None) -> None:
        """The crowding warning for `config`'s local workers (worked out again only when their number changes)."""
        key = (config.workers, bool(config.cluster_hosts)) if config and config.strategy == "multi-worker" else None
        if key == self._crowding_for:
            return
        self._crowding_for = key
        text = oversubscription_warning(config) if config and key else ""
        self.crowding_label.setText(f"⚠ {text}" if text else "")
        self.crowding_label.setVisible(bool(text))

    def close_down(self) -> None:
        """The window is closing: start no more background work."""
        self._closed = True

    def _show_problem(self, problem: str) -> None:
        self._state.isolation_problem = problem
        if problem:
            self._show_isolation(f"⚠ The local workers cannot be isolated from the network here: {problem}.", WARNING_STYLE)
        else:
            self._show_isolation(ISOLATED, f"color: {SUCCESS_COLOR}; font-size: 9pt;")
        self.allow_check.setVisible(bool(problem))
        self.isolation_checked.emit(problem)

    def _on_check_finished(self) -> None:
        self._checking = False

    def _show_isolation(self, text: str, style: str) -> None:
        self.isolation_label.setText(text)
        self.isolation_label.setStyleSheet(style)
        self.isolation_label.setVisible(True)

    def _on_allow_clicked(self, checked: bool) -> None:
        """Ticking asks first (the box stays unticked until the user agrees); unticking takes effect at once."""
        if not checked:
            return
        self.allow_check.setChecked(False)
        self.confirm_dialog = QMessageBox(
            QMessageBox.Icon.Warning,
            CONFIRM_TITLE,
            f"This system cannot isolate the local workers ({self._state.isolation_problem}).\n\n"
            "Each worker's TensorFlow server will listen on every network interface, unauthenticated and "
            "unencrypted: anyone who can reach this machine can reach them while the run trains.\n\n"
            "Start local workers that are reachable from the network?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            self,
        )
        self.confirm_dialog.setObjectName("allowNetworkWorkersDialog")
        self.confirm_dialog.setDefaultButton(QMessageBox.StandardButton.No)
        self.confirm_dialog.finished.connect(self._on_confirm_finished)
        self.confirm_dialog.open()

    def _on_confirm_finished(self, answer: int) -> None:
        self.allow_check.setChecked(answer == QMessageBox.StandardButton.Yes)
        if self.confirm_dialog is not None:
            self.confirm_dialog.deleteLater()
        self.confirm_dialog = None


def _label(name: str) -> QLabel:
    label = NoteLabel()
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setVisible(False)
    return label
