"""What to train: the run form's model menu, what the model is, and the data sets it accepts.

Counting a model's parameters builds it, which imports TensorFlow: that runs in
a worker thread (`gui.qt_threads`), one model at a time, the selected one first.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QComboBox, QFormLayout, QLabel

from core.formatting import format_value
from core.workloads.data import DATASETS
from core.workloads.models import MODELS
from gui.qt_threads import FunctionWorker, start_worker

DEFAULT_MODEL = "mlp"
DEFAULT_DATASET = "digits"


def _count_parameters(name: str) -> tuple[str, int]:
    """(name, parameter count) of a sample model; builds it, so TensorFlow is imported."""
    from core.workloads.models import param_count

    return name, param_count(name)


class ModelChoice(QObject):
    """The Model and Data set rows; `changed` fires once the data sets follow a newly picked model."""

    changed = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._params: dict[str, int] = {}
        self._closed = False
        self.model_combo = QComboBox()
        self.model_combo.setObjectName("modelCombo")
        self.model_combo.setToolTip("The sample model to train (hover an entry for what it is).")
        self.model_info = QLabel()
        self.model_info.setObjectName("modelInfo")
        self.model_info.setWordWrap(True)
        self.model_info.setForegroundRole(QPalette.ColorRole.PlaceholderText)  # muted, in light and dark themes
        self.dataset_combo = QComboBox()
        self.dataset_combo.setObjectName("datasetCombo")
        self.dataset_combo.setToolTip("Synthetic data measures the device alone; real data sets load from disk or download once.")
        self.model_combo.currentIndexChanged.connect(self.follow_model)

    def add_rows(self, form: QFormLayout) -> None:
        """Lay out the model menu, its description and the data set menu."""
        form.addRow("Model", self.model_combo)
        form.addRow("", self.model_info)
        form.addRow("Data set", self.dataset_combo)

    def fill_models(self) -> None:
        """List the sample models (each described in its tooltip) and pick the default one."""
        for spec in MODELS.values():
            self.model_combo.addItem(spec.title, spec.name)
            self.model_combo.setItemData(self.model_combo.count() - 1, spec.description, Qt.ItemDataRole.ToolTipRole)
        self.model_combo.setCurrentIndex(self.model_combo.findData(DEFAULT_MODEL))

    def model(self) -> str:
        return self.model_combo.currentData()

    def dataset(self) -> str:
        return self.dataset_combo.currentData()

    def follow_model(self) -> None:
        """Offer the data sets the model accepts, keeping the current one if it is among them; then `changed`."""
        spec = MODELS[self.model()]
        previous = self.dataset()
        self.dataset_combo.blockSignals(True)
        self.dataset_combo.clear()
        for dataset in DATASETS.values():
            if spec.accepts(dataset):
                title = dataset.title + ("" if dataset.offline else " (download)")
                self.dataset_combo.addItem(title, dataset.name)
                self.dataset_combo.setItemData(self.dataset_combo.count() - 1, dataset.description, Qt.ItemDataRole.ToolTipRole)
        preferred = previous if self.dataset_combo.findData(previous) >= 0 else None
        if spec.name == DEFAULT_MODEL and previous is None:
            preferred = DEFAULT_DATASET
        index = self.dataset_combo.findData(preferred or spec.default_dataset)
        self.dataset_combo.setCurrentIndex(max(0, index))
        self.dataset_combo.blockSignals(False)
        self._show_model_info()
        self.changed.emit()

    def load_param_counts(self) -> None:
        """Count the models' parameters in a worker thread, the selected model first (builds each once)."""
        missing = [name for name in MODELS if name not in self._params]
        if not missing or self._closed:
            return
        current = self.model()
        name = current if current in missing else missing[0]
        worker = FunctionWorker(_count_parameters, name)
        worker.done.connect(self._on_param_count)
        worker.failed.connect(self._on_param_count_failed)
        start_worker(worker, "param-count")

    def close_down(self) -> None:
        """The window is closing: count no more parameters."""
        self._closed = True

    def _on_param_count(self, counted: tuple[str, int]) -> None:
        name, count = counted
        self._params[name] = count
        self._show_model_info()
        self.load_param_counts()

    def _on_param_count_failed(self, message: str) -> None:
        self.model_info.setText(f"{MODELS[self.model()].description}\nparameters unknown: {message}")

    def _show_model_info(self) -> None:
        name = self.model()
        counted = f"{format_value(self._params[name], 'count')} parameters" if name in self._params else ""
        self.model_info.setText(f"{MODELS[name].description}\n{counted or 'parameters: counting once TensorFlow has loaded…'}")
