"""Where a run trains: the strategy menu and the Devices row of the run form.

The strategy menu lists every strategy, those this machine cannot run greyed
out with the reason as their tooltip; the Devices row shows what the chosen
strategy needs: one device, a checkable list, or a note on how it places itself.
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


def fill_strategy_combo(combo: QComboBox, choices: Sequence[StrategyChoice]) -> None:
    """Refill the strategy menu, unavailable entries disabled; keep the current one if it is still available.

    Emits no signal: the caller refreshes what depends on the strategy.
    """
    current = combo.currentData() or "default"
    combo.blockSignals(True)
    combo.clear()
    model = combo.model()
    for choice in choices:
        combo.addItem(choice.label, choice.name)
        index = combo.count() - 1
        combo.setItemData(index, choice.reason or choice.label, Qt.ItemDataRole.ToolTipRole)
        if not choice.available and isinstance(model, QStandardItemModel):
            model.item(index).setEnabled(False)
    chosen = next((c for c in choices if c.name == current and c.available), choices[0])
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

    def fill(self, devices: Sequence[DeviceInfo]) -> None:
        """Offer the usable devices: the first GPU preselected; the GPUs ticked when two or more, else the CPUs."""
        usable = [d for d in devices if d.available and d.tf_name]
        self.device_combo.blockSignals(True)
        self.device_combo.clear()
        for device in usable:
            self.device_combo.addItem(f"{device.tf_name} — {device.name}", device.tf_name)
        gpu_index = next((i for i, d in enumerate(usable) if d.kind == "GPU"), 0)
        self.device_combo.setCurrentIndex(gpu_index if usable else -1)
        self.device_combo.blockSignals(False)
        self.device_list.blockSignals(True)
        self.device_list.clear()
        preferred_kind = "GPU" if sum(1 for d in usable if d.kind == "GPU") >= 2 else "CPU"
        for device in usable:
            item = QListWidgetItem(f"{device.tf_name} — {device.name}")
            item.setData(Qt.ItemDataRole.UserRole, device.tf_name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if device.kind == preferred_kind else Qt.CheckState.Unchecked)
            self.device_list.addItem(item)
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

    def selected(self, strategy: str) -> tuple[str, ...]:
        """The TensorFlow names of the devices `strategy` trains on; () when it places itself."""
        if strategy == "one-device":
            name = self.device_combo.currentData()
            return (name,) if name else ()
        if strategy == "mirrored":
            return tuple(
                self.device_list.item(row).data(Qt.ItemDataRole.UserRole)
                for row in range(self.device_list.count())
                if self.device_list.item(row).checkState() == Qt.CheckState.Checked
            )
        return ()

    def errors(self, strategy: str) -> list[str]:
        """What is missing from the selection for `strategy`, with what to do."""
        devices = self.selected(strategy)
        if strategy == "one-device" and not devices:
            return ["Devices: pick the device to train on."]
        if strategy == "mirrored" and len(devices) < 2:
            return ["Devices: tick two or more devices of one kind for mirrored."]
        return []
