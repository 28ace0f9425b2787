"""Where a run trains: the strategy menu and the Devices row of the run form.

The strategy menu lists every strategy, those this machine cannot run greyed
out with the reason as their tooltip; the Devices row shows what the chosen
strategy needs: one device, a checkable list, or a note on how it places itself.
The choices themselves live in the form's state (`gui.state.run_form`): these
widgets show them once the devices are listed.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QLabel, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from core.formatting import format_value
from core.machine.types import DeviceInfo
from core.training.strategies import StrategyChoice
from gui.run_form.note_label import NoteLabel

TPU_BEST_PER_CORE = 128
DEVICE_HINTS = {
    "default": "TensorFlow places ops itself (the first GPU if there is one, else the CPU).",
    "multi-worker": "Each worker process trains on its share of its machine's CPU/GPU.",
    "tpu": "All cores of the connected TPU.",
}


def tpu_batch_note(batch_size: int, cores: int) -> str:
    """How a global batch splits over TPU cores, and the size that keeps them busy."""
    best = f"use a multiple of {cores} × {TPU_BEST_PER_CORE} = {format_value(cores * TPU_BEST_PER_CORE, 'count')} for best TPU use"
    batch = format_value(batch_size, "count")
    if batch_size % cores:
        return f"Global batch {batch} does not split evenly over {cores} cores: {best}."
    return f"Global batch {batch} = {format_value(batch_size // cores, 'count')} per core on {cores} cores; {best}."


def strategy_widgets() -> tuple[QComboBox, QLabel]:
    """The strategy menu and the muted note under it (why some strategies cannot run here)."""
    combo = QComboBox()
    combo.setObjectName("strategyCombo")
    combo.setToolTip("The tf.distribute strategy: where and across how many devices the model trains.")
    reason = NoteLabel()
    reason.setObjectName("strategyReason")
    reason.setWordWrap(True)
    reason.setStyleSheet("font-size: 9pt;")
    reason.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    return combo, reason


def fill_strategy_combo(combo: QComboBox, choices: Sequence[StrategyChoice], wanted: str, keep_unavailable: bool = False) -> None:
    """Refill the strategy menu, unavailable entries disabled; choose `wanted` if it is available (or if `keep_unavailable`),
    else the first available one.

    Emits no signal: the caller refreshes what depends on the strategy.
    """
    combo.blockSignals(True)
    combo.clear()
    model = combo.model()
    for choice in choices:
        combo.addItem(choice.label, choice.name)
        index = combo.count() - 1
        combo.setItemData(index, choice.reason or choice.label, Qt.ItemDataRole.ToolTipRole)
        if not choice.available and isinstance(model, QStandardItemModel):
            model.item(index).setEnabled(False)
    chosen = next((c for c in choices if c.name == wanted and (c.available or keep_unavailable)), choices[0])
    combo.setCurrentIndex(combo.findData(chosen.name))
    combo.blockSignals(False)


def unavailable_note(choices: Sequence[StrategyChoice]) -> str:
    """One line per strategy that cannot run here, with why ('' when all can)."""
    return "\n".join(f"{c.label.split(' (')[0]} unavailable: {c.reason}" for c in choices if not c.available)


class DevicePicker(QWidget):
    """The Devices row: a menu for one-device, a checkable list for mirrored, else a note."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.device_combo = QComboBox()
        self.device_combo.setObjectName("deviceCombo")
        self.device_combo.setToolTip("The one device to train on.")
        self.device_list = QListWidget()
        self.device_list.setObjectName("deviceList")
        self.device_list.setToolTip("Tick the devices to mirror the model on (two or more of one kind).")
        self.device_list.setMaximumHeight(90)
        self.device_hint = NoteLabel()
        self.device_hint.setObjectName("deviceHint")
        self.device_hint.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.device_combo, self.device_list, self.device_hint):
            layout.addWidget(widget)

    def fill(self, devices: Sequence[DeviceInfo], device: str = "", ticked: Sequence[str] = ()) -> None:
        """Offer the usable devices: `device` chosen if usable, else the first GPU; `ticked` ticked if all are usable,
        else the GPUs when two or more, else the CPUs. Emits no signal."""
        usable = [d for d in devices if d.available and d.tf_name]
        self.device_combo.blockSignals(True)
        self.device_combo.clear()
        for info in usable:
            self.device_combo.addItem(f"{info.tf_name} — {info.name}", info.tf_name)
        gpu_index = next((i for i, d in enumerate(usable) if d.kind == "GPU"), 0)
        self.device_combo.setCurrentIndex(gpu_index if usable else -1)
        self.device_combo.blockSignals(False)
        self.show_device(device)
        self.device_list.blockSignals(True)
        self.device_list.clear()
        preferred_kind = "GPU" if sum(1 for d in usable if d.kind == "GPU") >= 2 else "CPU"
        for info in usable:
            item = QListWidgetItem(f"{info.tf_name} — {info.name}")
            item.setData(Qt.ItemDataRole.UserRole, info.tf_name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if info.kind == preferred_kind else Qt.CheckState.Unchecked)
            self.device_list.addItem(item)
        self.device_list.blockSignals(False)
        self.show_ticked(ticked)

    def chosen_device(self) -> str:
        """The TensorFlow name of the one device chosen ('' when none is listed)."""
        return self.device_combo.currentData() or ""

    def ticked_devices(self) -> tuple[str, ...]:
        """The TensorFlow names of the devices ticked, in the list's order."""
        items = [self.device_list.item(row) for row in range(self.device_list.count())]
        return tuple(item.data(Qt.ItemDataRole.UserRole) for item in items if item.checkState() == Qt.CheckState.Checked)

    def show_device(self, device: str) -> None:
        """Choose `device` if it is listed (it may be one not listed yet: then nothing changes). Emits no signal."""
        index = self.device_combo.findData(device)
        if index >= 0 and index != self.device_combo.currentIndex():
            self.device_combo.blockSignals(True)
            self.device_combo.setCurrentIndex(index)
            self.device_combo.blockSignals(False)

    def show_ticked(self, devices: Sequence[str]) -> None:
        """Tick exactly `devices` if all are listed (else nothing changes). Emits no signal."""
        rows = {self.device_list.item(row).data(Qt.ItemDataRole.UserRole): row for row in range(self.device_list.count())}
        if not devices or not set(devices) <= rows.keys() or tuple(devices) == self.ticked_devices():
            return
        self.device_list.blockSignals(True)
        for name, row in rows.items():
            self.device_list.item(row).setCheckState(Qt.CheckState.Checked if name in devices else Qt.CheckState.Unchecked)
        self.device_list.blockSignals(False)

    def show_strategy(self, strategy: str) -> None:
        """Show the part of the row that `strategy` reads."""
        self.device_combo.setVisible(strategy == "one-device")
        self.device_list.setVisible(strategy == "mirrored")
        self.device_hint.setVisible(strategy not in ("one-device", "mirrored"))

    def show_hint(self, strategy: str, tpu_cores: int, batch_size: int | None) -> None:
        """The note for strategies that place themselves; for a TPU, how `batch_size` (None: invalid) splits."""
        hint = DEVICE_HINTS.get(strategy, "")
        if strategy == "tpu" and tpu_cores and batch_size is not None:
            hint += " " + tpu_batch_note(batch_size, tpu_cores)
        self.device_hint.setText(hint)
