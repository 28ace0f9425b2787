"""The run form's TPU row: an address, a time limit and Connect (Cancel while probing), probed in a worker thread.

`probe_tpu` initialises the TPU in a child process and can hang for minutes on
an address where nothing answers, so it runs through `gui.qt_threads` under the
time limit the user sets (a grpc:// port that refuses fails at once); Cancel
kills the probe. The GUI thread only shows what came back. Connect and Cancel
take each other's place, keyboard focus moving with them (a disabled button
would throw it to the next field of the form).
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFormLayout, QHBoxLayout, QLineEdit, QPushButton, QSpinBox, QWidget

from core.config import MAX_TPU_TIMEOUT_S, MIN_TPU_TIMEOUT_S
from core.machine.tpu import probe_tpu
from core.machine.types import TpuProbe
from gui.qt_threads import run_in_background
from gui.run_form.bindings import bind_spin, bind_text
from gui.run_form.note_label import NoteLabel
from gui.state.run_form import RunFormState
from gui.style import FAILED_COLOR


class TpuConnect(QObject):
    """The TPU address field, its probe time limit, Connect and the probe's outcome.

    It makes the widgets (the address and the time limit are the form's state's)
    and `add_rows` lays them out in the run form; `probed`
    fires with the `TpuProbe` once a probe has answered, after `connected` and
    `cores` have taken its outcome.
    """

    probed = Signal(object)  # TpuProbe

    def __init__(self, state: RunFormState, parent: QObject | None = None):
        super().__init__(parent)
        self._probing = False
        self._running = False
        self._closed = False
        self.connected = False
        self.cores = 0
        self.address_edit = QLineEdit()
        self.address_edit.setObjectName("tpuAddressEdit")
        self.address_edit.setToolTip("Where the TPU is: 'local' on a TPU VM, a Cloud TPU name, or grpc://host:8470.")
        self.address_edit.setPlaceholderText("local, a TPU name, or grpc://host:8470")
        self.connect_button = QPushButton("Connect")
        self.connect_button.setObjectName("tpuConnectButton")
        self.connect_button.setToolTip("Try to initialise the TPU at this address, in a child process (gives up after the time limit).")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("tpuCancelButton")
        self.cancel_button.setToolTip("Stop trying to connect (the probe's child process is ended).")
        self.cancel_button.setVisible(False)
        self._cancel = threading.Event()
        self.timeout_spin = QSpinBox()
        self.timeout_spin.setObjectName("tpuTimeoutSpin")
        self.timeout_spin.setRange(MIN_TPU_TIMEOUT_S, MAX_TPU_TIMEOUT_S)
        self.timeout_spin.setSuffix(" s")
        self.timeout_spin.setToolTip("Time limit of the TPU probe: an address where nothing answers can otherwise hang for minutes.")
        self.status_label = NoteLabel("Not connected.")
        self.status_label.setObjectName("tpuStatusLabel")
        self.status_label.setWordWrap(True)
        bind_text(state, "tpu_address", self.address_edit)
        bind_spin(state, "tpu_timeout_s", self.timeout_spin)
        self.connect_button.clicked.connect(self.connect_tpu)
        self.cancel_button.clicked.connect(self.cancel)

    def add_rows(self, form: QFormLayout) -> None:
        """Lay out the address row (field, time limit, Connect) and the status line under it."""
        row = QHBoxLayout()
        row.addWidget(self.address_edit, 1)
        row.addWidget(self.timeout_spin)
        row.addWidget(self.connect_button)
        row.addWidget(self.cancel_button)
        form.addRow("TPU address", row)
        form.addRow("", self.status_label)

    def address(self) -> str:
        """The typed address, stripped ('' when empty)."""
        return self.address_edit.text().strip()

    @property
    def timeout_s(self) -> float:
        """Time limit of the probe, in seconds (the spin box next to Connect)."""
        return float(self.timeout_spin.value())

    @timeout_s.setter
    def timeout_s(self, seconds: float) -> None:
        self.timeout_spin.setValue(round(seconds))

    def input_widgets(self) -> list[QWidget]:
        """The fields a running job must not change, in form order."""
        return [self.address_edit, self.timeout_spin, self.connect_button]

    def set_running(self, running: bool) -> None:
        """A run started or ended: Connect is re-enabled after a probe only while none runs."""
        self._running = running

    def close_down(self) -> None:
        """The window is closing: start no more probes, and end the one in flight."""
        self._closed = True
        self._cancel.set()

    def cancel(self) -> None:
        """End the probe in flight (its child process is killed within a fraction of a second)."""
        if self._probing:
            self._cancel.set()  # the button stays enabled: a disabled one would throw keyboard focus to the next field
            self.status_label.setText("Cancelling…")

    def connect_tpu(self) -> None:
        """Probe the TPU at the typed address ('local' when empty) in a worker thread."""
        if self._probing or self._closed:
            return
        address = self.address() or "local"
        self._probing = True
        self._cancel = threading.Event()
        self._swap_buttons(probing=True)
        self.status_label.setStyleSheet("")
        self.status_label.setText(f"Connecting to {address!r}… (gives up after {self.timeout_s:g} s; Cancel stops it)")
        run_in_background(
            probe_tpu,
            address,
            self.timeout_s,
            self._cancel,
            on_result=self._on_probed,
            on_error=self._on_probe_failed,
            on_finished=self._on_probe_finished,
            name="tpu-probe",
        )

    def _on_probed(self, probe: TpuProbe) -> None:
        self.connected = probe.ok
        self.cores = len(probe.devices) if probe.ok else 0
        prefix = "Connected" if probe.ok else "Not connected"
        self.status_label.setText(f"{prefix} ({probe.elapsed_s:.1f} s): {probe.message}")
        self.status_label.setStyleSheet("" if probe.ok else f"color: {FAILED_COLOR};")
        self.probed.emit(probe)

    def _on_probe_failed(self, message: str) -> None:
        self.status_label.setText(f"TPU probe failed: {message}")

    def _on_probe_finished(self) -> None:
        self._probing = False
        self._swap_buttons(probing=False)

    def _swap_buttons(self, probing: bool) -> None:
        """Show Cancel in Connect's place while probing (and back), handing keyboard focus over."""
        shown, hidden = (self.cancel_button, self.connect_button) if probing else (self.connect_button, self.cancel_button)
        shown.setEnabled(probing or not self._running)
        shown.setVisible(True)
        if hidden.hasFocus():
            shown.setFocus()
        hidden.setVisible(False)
