"""The run form's Backend choice: the Keras backends installed here, the others listed with how to install them."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QWidget

from core.backends.available import backends


class BackendCombo(QComboBox):
    """TensorFlow, JAX and PyTorch; one not installed is shown greyed out with why and how to install it (its tooltip).

    JAX and PyTorch jobs train in a child process of their own that imports no TensorFlow.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("backendCombo")
        self.refresh()
        self.setToolTip("The Keras backend that trains the model: the same model, weights and data on each.")

    def refresh(self) -> None:
        """List the backends again (Devices > Refresh): one installed since the app started becomes a choice; the choice is kept."""
        chosen = self.currentData()
        self.blockSignals(True)
        self.clear()
        for info in backends():
            self.addItem(info.title if info.installed else f"{info.title} (not installed)", info.name)
            index = self.count() - 1
            item = self.model().item(index)  # type: ignore[attr-defined]  # a QComboBox's own model is a QStandardItemModel
            if not info.installed:
                item.setEnabled(False)
            tip = (
                info.note
                if not info.installed
                else (
                    "Trains in this process."
                    if info.name == "tensorflow"
                    else f"Trains in a child process of its own with Keras on {info.title}: no TensorFlow there."
                )
            )
            self.setItemData(index, tip, Qt.ItemDataRole.ToolTipRole)
        self.setCurrentIndex(max(0, self.findData(chosen)))
        self.blockSignals(False)

    def backend(self) -> str:
        """The chosen backend's name ("tensorflow", "jax", "torch")."""
        return str(self.currentData())
