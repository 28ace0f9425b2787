"""The multi-worker group of the run form: local workers or a real cluster, the other hosts' commands, the wait.

Local workers listen on free 127.0.0.1 ports, in a private network of their own
where the system allows it (`LocalWorkersNotes` says which, and asks before
running them reachable from the network). For a real cluster the user lists
the workers' host:port addresses (this machine first: it runs the chief) or
reads them from TF_CONFIG / Slurm; the box shows the exact command to start on
every other host. While a run waits for its workers, `ClusterWatcher` (a hook
in the training thread) reports through this box's signals, which Qt queues
into the GUI thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from core.cluster.topology import GRPC_WARNING, ClusterHook, WorkerInfo, cluster_from_environment, worker_commands
from core.config import MAX_CLUSTER_TIMEOUT_S, MAX_WORKERS, MIN_CLUSTER_TIMEOUT_S, RunConfig
from core.training.hooks import RunContext, RunHook
from gui.qt_threads import run_in_background
from gui.run_form.bindings import bind_plain_text, bind_spin
from gui.run_form.note_label import NoteLabel
from gui.run_form.worker_network import LocalWorkersNotes
from gui.state.run_form import RunFormState
from gui.style import FAILED_COLOR, SUCCESS_COLOR, WARNING_COLOR

ALL_INTERFACES_NOTE = (
    "Each worker's server listens on all network interfaces of its host: keep the workers' ports closed to untrusted networks (firewall)."
)
HOSTS_PLACEHOLDER = "10.0.0.1:2222   (this machine: the chief)\n10.0.0.2:2222\n10.0.0.3:2222"
NO_ADDRESSES_YET = "Enter the workers' addresses above: the command to run on each other host appears here."
NO_COMMANDS_YET = "Fix the settings listed under the form: the commands for the other hosts appear here."
NO_ENVIRONMENT = "No cluster in the environment: TF_CONFIG is not set and this is not a Slurm job step. Type the addresses instead."


class ClusterBox(QGroupBox):
    """Where the workers of a multi-worker run are: local processes, or hosts the user starts.

    Its fields are the form's state's (local or hosts, workers, addresses, join
    timeout, the network confirmation); the run form hands its config back
    through `show_config`, so the commands for the other hosts are always those
    of the run Start would begin.
    """

    environment_read = Signal(object)  # list[str] | None, after "Read from environment"
    workers_started = Signal(object)  # Sequence[WorkerInfo]
    cluster_waiting = Signal(float, float)  # elapsed_s, timeout_s
    cluster_formed = Signal(int)  # replicas
    workers_ended = Signal(object)  # Sequence[WorkerInfo]

    def __init__(self, state: RunFormState, parent: QWidget | None = None):
        super().__init__("Multi-worker cluster", parent)
        self.setObjectName("clusterBox")
        self._state = state
        self._reading = False
        self._closed = False
        self._build()

    # --- what the form reads ---------------------------------------------------

    def is_cluster(self) -> bool:
        """True when the user names the hosts; False for local worker processes."""
        return self._state.use_hosts

    def allow_network_workers(self) -> bool:
        """True when local workers that cannot be isolated here may run reachable from the network (confirmed)."""
        return self._state.network_workers_allowed()

    def workers(self) -> int:
        return len(self._state.host_list()) if self.is_cluster() else self._state.workers

    def input_widgets(self) -> list[QWidget]:
        """The fields a running job must not change (the commands and Copy stay usable)."""
        return [
            self.local_radio,
            self.hosts_radio,
            self.workers_spin,
            self.hosts_edit,
            self.read_env_button,
            self.timeout_spin,
            self.local_notes.allow_check,
        ]

    def show_config(self, config: RunConfig | None) -> None:
        """Show the commands for the other hosts of `config` (None: the form is invalid), or how local workers fit."""
        self.local_notes.show_config(config)
        if not self.is_cluster():
            return
        if config is None or not config.cluster_hosts:
            self.commands_view.clear()
            self.commands_view.setPlaceholderText(NO_COMMANDS_YET if self._state.host_list() else NO_ADDRESSES_YET)
            self.copy_button.setEnabled(False)
            return
        lines = []
        for index, command in enumerate(worker_commands(config), start=1):
            lines.append(f"# worker {index} on {config.cluster_hosts[index]}, in its Device Lab folder:")
            lines.append(command)
        if not lines:
            lines = ["# A cluster of one: no other host to start."]
        text = "\n".join(lines)
        if text != self.commands_view.toPlainText():  # keeps the user's selection while nothing changed
            self.commands_view.setPlainText(text)
        self.copy_button.setEnabled(len(config.cluster_hosts) > 1)

    def run_hooks_of(self, config: RunConfig) -> list[RunHook]:
        """The window's own hooks for `config`: a watcher for multi-worker runs."""
        return [ClusterWatcher(self)] if config.strategy == "multi-worker" else []

    def close_down(self) -> None:
        """The window is closing: start no more background work."""
        self._closed = True
        self.local_notes.close_down()

    def showEvent(self, event: QShowEvent) -> None:
        """Shown for a multi-worker run: find out whether its local workers can be isolated."""
        super().showEvent(event)
        if not self.is_cluster():
            self.local_notes.check_isolation()

    # --- building --------------------------------------------------------------

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        self._build_mode_section(layout)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self._build_workers_section(form)
        self._build_commands_section(form)
        self._build_timeout_section(form)
        self._form = form
        layout.addLayout(form)
        self._build_status_section(layout)
        self._connect_signals()

    def _build_mode_section(self, layout: QVBoxLayout) -> None:
        """Local worker processes or the hosts of a cluster: two radio buttons."""
        self.local_radio = QRadioButton("Worker processes on this machine (127.0.0.1)")
        self.local_radio.setObjectName("clusterLocalRadio")
        self.local_radio.setToolTip("Start the workers as processes on this machine, talking over 127.0.0.1.")
        self.hosts_radio = QRadioButton("Hosts of a cluster (this machine runs the chief)")
        self.hosts_radio.setObjectName("clusterHostsRadio")
        self.hosts_radio.setToolTip("Train across machines: list one host:port per worker; start the other workers there.")
        self._mode = QButtonGroup(self)
        self._mode.addButton(self.local_radio)
        self._mode.addButton(self.hosts_radio)
        layout.addWidget(self.local_radio)
        layout.addWidget(self.hosts_radio)

    def _build_workers_section(self, form: QFormLayout) -> None:
        """How many local workers, or the cluster's addresses (typed or read from the environment)."""
        self.workers_spin = QSpinBox()
        self.workers_spin.setObjectName("workersSpin")
        self.workers_spin.setRange(1, MAX_WORKERS)
        self.workers_spin.setToolTip("Worker processes started on this machine, one replica each (or more with GPUs).")
        self.hosts_edit = QPlainTextEdit()
        self.hosts_edit.setObjectName("clusterHostsEdit")
        self.hosts_edit.setPlaceholderText(HOSTS_PLACEHOLDER)
        self.hosts_edit.setTabChangesFocus(True)
        self.hosts_edit.setFixedHeight(_lines_height(self.hosts_edit, 3))
        self.hosts_edit.setToolTip("One host:port per worker (or separated by commas), this machine first: it runs the chief.")
        self.read_env_button = QPushButton("Read from environment")
        self.read_env_button.setObjectName("clusterReadEnvButton")
        self.read_env_button.setToolTip("Take the addresses from TF_CONFIG or the Slurm job step this app runs in.")
        self.env_label = NoteLabel()
        self.env_label.setObjectName("clusterEnvLabel")
        self.env_label.setWordWrap(True)
        self.env_label.setTextFormat(Qt.TextFormat.PlainText)
        self.env_label.setVisible(False)
        self.hosts_box = QWidget()
        hosts_layout = QVBoxLayout(self.hosts_box)
        hosts_layout.setContentsMargins(0, 0, 0, 0)
        hosts_layout.addWidget(self.hosts_edit)
        env_row = QHBoxLayout()
        env_row.addWidget(self.read_env_button)
        env_row.addStretch(1)
        hosts_layout.addLayout(env_row)
        hosts_layout.addWidget(self.env_label)
        form.addRow("Workers", self.workers_spin)
        form.addRow("Addresses", self.hosts_box)

    def _build_commands_section(self, form: QFormLayout) -> None:
        """The commands to start on the other hosts, read-only, with Copy."""
        self.commands_view = QPlainTextEdit()
        self.commands_view.setObjectName("clusterCommandsView")
        self.commands_view.setReadOnly(True)
        self.commands_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.commands_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.commands_view.setFixedHeight(
            _lines_height(self.commands_view, 4) + self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        )
        self.copy_button = QPushButton("Copy")
        self.copy_button.setObjectName("clusterCopyButton")
        self.copy_button.setToolTip("Copy the commands to the clipboard.")
        self.copy_button.setEnabled(False)
        self.commands_box = QWidget()
        commands_layout = QVBoxLayout(self.commands_box)
        commands_layout.setContentsMargins(0, 0, 0, 0)
        commands_title = QHBoxLayout()
        commands_title.addWidget(QLabel("Start on each other host:"), 1)
        commands_title.addWidget(self.copy_button)
        commands_layout.addLayout(commands_title)
        commands_layout.addWidget(self.commands_view)
        form.addRow(self.commands_box)

    def _build_timeout_section(self, form: QFormLayout) -> None:
        """How long the chief waits for the workers to join."""
        self.timeout_spin = QSpinBox()
        self.timeout_spin.setObjectName("clusterTimeoutSpin")
        self.timeout_spin.setRange(MIN_CLUSTER_TIMEOUT_S, MAX_CLUSTER_TIMEOUT_S)
        self.timeout_spin.setSuffix(" s")
        self.timeout_spin.setToolTip("How long the chief waits for every worker to join before the run fails.")
        form.addRow("Join timeout", self.timeout_spin)

    def _build_status_section(self, layout: QVBoxLayout) -> None:
        """Where a running cluster stands, whether local workers are private or crowded, the warning about open ports."""
        self.status_label = NoteLabel()
        self.status_label.setObjectName("clusterStatusLabel")
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.status_label.setVisible(False)
        self.warning_label = NoteLabel(f"⚠ {GRPC_WARNING} {ALL_INTERFACES_NOTE}")
        self.warning_label.setObjectName("clusterWarningLabel")
        self.warning_label.setTextFormat(Qt.TextFormat.PlainText)
        self.warning_label.setWordWrap(True)
        self.warning_label.setStyleSheet(f"color: {WARNING_COLOR}; font-size: 9pt;")
        self.local_notes = LocalWorkersNotes(self._state)
        layout.addWidget(self.status_label)
        layout.addWidget(self.local_notes)
        layout.addWidget(self.warning_label)

    def _connect_signals(self) -> None:
        """Every edit goes into the state; the worker events queued from the training thread update the status."""
        self._show_mode(self._state.use_hosts)
        self.hosts_radio.toggled.connect(self._on_mode_chosen)
        self._state.events.use_hosts.connect(self._show_mode)
        bind_spin(self._state, "workers", self.workers_spin)
        bind_plain_text(self._state, "hosts", self.hosts_edit)
        bind_spin(self._state, "cluster_timeout_s", self.timeout_spin)
        self.read_env_button.clicked.connect(self.read_from_environment)
        self.copy_button.clicked.connect(self.copy_commands)
        self.workers_started.connect(self._on_workers_started)
        self.cluster_waiting.connect(self._on_cluster_waiting)
        self.cluster_formed.connect(self._on_cluster_formed)
        self.workers_ended.connect(self._on_workers_ended)

    def _on_mode_chosen(self, hosts: bool) -> None:
        self._state.use_hosts = hosts

    def _show_mode(self, hosts: bool) -> None:
        """Check the radio button of `hosts` (a cluster of hosts) or of local workers, and show that mode's rows."""
        (self.hosts_radio if hosts else self.local_radio).setChecked(True)
        self._on_mode_changed()

    def _on_mode_changed(self) -> None:
        cluster = self.is_cluster()
        self._form.setRowVisible(self.workers_spin, not cluster)
        self._form.setRowVisible(self.hosts_box, cluster)
        self._form.setRowVisible(self.commands_box, cluster)
        self.local_notes.setVisible(not cluster)
        self.warning_label.setVisible(cluster)
        if not cluster and self.isVisible():
            self.local_notes.check_isolation()

    # --- actions ---------------------------------------------------------------

    def copy_commands(self) -> None:
        QGuiApplication.clipboard().setText(self.commands_view.toPlainText())
        self._show_status("Commands copied: run them on the other hosts, then press Start here (or the other way round).")

    def read_from_environment(self) -> None:
        """Fill the addresses from TF_CONFIG or Slurm, in a worker thread (TensorFlow's resolvers)."""
        if self._reading or self._closed:
            return
        self._reading = True
        self.read_env_button.setEnabled(False)
        self._show_env("Reading TF_CONFIG / Slurm…", "")
        run_in_background(
            cluster_from_environment,
            on_result=self._on_environment_read,
            on_error=self._on_environment_failed,
            on_finished=self._on_environment_finished,
            name="cluster-from-environment",
        )

    def _on_environment_read(self, hosts: list[str] | None) -> None:
        if not hosts:
            self._show_env(NO_ENVIRONMENT, FAILED_COLOR)
        else:
            self.hosts_radio.setChecked(True)
            self.hosts_edit.setPlainText("\n".join(hosts))
            self._show_env(
                f"Read {len(hosts)} worker address{'es' if len(hosts) != 1 else ''} from the environment; the first is this machine (the chief).",
                SUCCESS_COLOR,
            )
        self.environment_read.emit(hosts)

    def _on_environment_failed(self, message: str) -> None:
        self._show_env(f"Could not read the cluster from the environment: {message}. Type the addresses instead.", FAILED_COLOR)
        self.environment_read.emit(None)

    def _on_environment_finished(self) -> None:
        self._reading = False
        self.read_env_button.setEnabled(self.hosts_edit.isEnabled())

    def _show_env(self, text: str, color: str) -> None:
        self.env_label.setText(text)
        self.env_label.setStyleSheet(f"color: {color};" if color else "")
        self.env_label.setVisible(True)

    # --- following a run (queued from the training thread) ---------------------

    def _on_workers_started(self, workers: Sequence[WorkerInfo]) -> None:
        pids = ", ".join(str(w.pid) for w in workers if w.pid is not None)
        self._show_status(
            f"Started {len(workers)} worker process{'es' if len(workers) != 1 else ''} here (pid {pids}); waiting for the cluster to form…"
        )

    def _on_cluster_waiting(self, elapsed_s: float, timeout_s: float) -> None:
        self._show_status(f"Waiting for workers: {elapsed_s:.0f} s of {timeout_s:.0f} s")

    def _on_cluster_formed(self, replicas: int) -> None:
        self._show_status(f"Cluster formed: {self.workers()} workers, {replicas} replicas in sync.")

    def _on_workers_ended(self, workers: Sequence[WorkerInfo]) -> None:
        codes = ", ".join(f"worker {w.index}{' (chief)' if w.index == 0 else ''} exit code {w.exit_code}" for w in workers)
        self._show_status(f"The worker processes started here have ended: {codes}.")

    def _show_status(self, text: str) -> None:
        self.status_label.setText(text)
        self.status_label.setVisible(True)


def _lines_height(edit: QPlainTextEdit, lines: int) -> int:
    """The height that shows `lines` lines of `edit`'s font, frame and margins included."""
    margins = edit.contentsMargins()
    return edit.fontMetrics().lineSpacing() * lines + 2 * round(edit.document().documentMargin()) + margins.top() + margins.bottom()


class ClusterWatcher(ClusterHook):
    """Relays a cluster run's worker events to a `ClusterBox` (runs in the training thread).

    It only emits the box's signals: the box lives in the GUI thread, so Qt
    queues each call to the box's slots there.
    """

    def __init__(self, box: ClusterBox):
        self._box = box

    def on_workers_started(self, workers: Sequence[WorkerInfo]) -> None:
        self._box.workers_started.emit(list(workers))

    def on_cluster_waiting(self, elapsed_s: float, timeout_s: float) -> None:
        self._box.cluster_waiting.emit(elapsed_s, timeout_s)

    def on_run_start(self, context: RunContext) -> None:
        self._box.cluster_formed.emit(context.replicas)

    def on_workers_ended(self, workers: Sequence[WorkerInfo]) -> None:
        self._box.workers_ended.emit(list(workers))
