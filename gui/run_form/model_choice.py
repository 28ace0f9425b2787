"""What to train: the run form's model menu (sample models, recent model files, "Open model…"), what the model is, its data.

Counting a sample model's parameters builds it, which imports TensorFlow: that
runs in a worker thread (`gui.qt_threads`), one model at a time. A model file is
described by `gui.run_form.model_file` (a child process, off the GUI thread);
until it is described the form waits, and a file that cannot be opened leaves
the previous choice in place with one message under the menu.
"""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import QObject, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QComboBox, QFormLayout, QLabel, QProgressBar, QWidget

from core.formatting import format_value
from core.results import RunResult
from core.workloads.data import DATASETS
from core.workloads.models import MODELS
from core.workloads.user_workload import PYTHON_DATA, SYNTHETIC
from core.workloads.workload import is_model_file
from gui.qt_threads import run_in_background
from gui.remembered import FOLDER_DATA, FOLDER_MODEL, ask_open_file, recent_models, remember_model
from gui.run_form.bindings import bind_text
from gui.run_form.fields import ParsedField
from gui.run_form.model_file import ModelFileOpener, OpenedModel, OpenOutcome, details_html, dialog_parent, open_ranges_needed
from gui.run_form.note_label import NoteLabel
from gui.state.run_form import DEFAULT_DATASET, DEFAULT_MODEL, VOCAB, ModelFile, RunFormState
from gui.style import ERROR_COLOR, WARNING_COLOR
from gui.window_words import window_words

OPEN_MODEL = "open-model:"  # the data of the "Open model…" entry (never a model name or a path)
OPEN_NPZ = "open-npz:"
MODEL_FILTERS = "Keras or Python model (*.keras *.h5 *.hdf5 *.py);;All files (*)"
NPZ_FILTERS = "NumPy arrays (*.npz);;All files (*)"


def _count_parameters(key: tuple[str, str]) -> tuple[tuple[str, str], int]:
    """((model, data set), parameter count) of a sample model built for that data; builds it, so TensorFlow is imported."""
    from core.workloads.workload import sample_param_count

    return key, sample_param_count(*key)


def _muted(label: QLabel) -> QLabel:
    label.setWordWrap(True)
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)  # muted, in light and dark themes
    return label


class ModelChoice(QObject):
    """The Model and Data set rows, bound to the form's state; `changed` fires whenever what the form would train changes.

    The state's model is the one chosen (a file while it is being opened: `pending` says so), its data set the one
    offered for it; a model or data set set in the state elsewhere (a restore) is chosen here as if picked.
    """

    changed = Signal()
    params_counted = Signal()  # a model's parameters were counted (or counting failed): after the first, start-up work is over
    recent_changed = Signal()  # a model file was opened and is now first among the recent ones (File > Recent models follows)

    def __init__(self, settings: QSettings, state: RunFormState, parent: QWidget | None = None):
        super().__init__(parent)
        self._settings = settings
        self._state = state
        self._writing = False  # setting the state's fields itself: not a choice made elsewhere
        self._params: dict[tuple[str, str], int] = {}  # (sample model, data set) -> parameters of the model that trains on it
        self._may_count = False  # TensorFlow has loaded: counting may build models
        self._counting: tuple[str, str] | None = None  # the (model, data set) being counted
        self._count_failed: set[tuple[str, str]] = set()
        self._closed = False
        self._current = DEFAULT_MODEL  # the model the form describes: a sample's name or a described file's path
        self._files: dict[str, OpenedModel] = {}
        self._data_files: dict[str, list[str]] = {}  # model file -> the .npz files checked against it
        self._measured: dict[str, RunResult] = {}
        self._checking_data = False
        self._followed = ""  # the model the data sets were last filled for
        self.opener = ModelFileOpener(settings, self)
        self._build()
        self.opener.opened.connect(self._on_opened)
        self.opener.failed.connect(self._on_failed)
        self.opener.busy_changed.connect(self._on_busy)
        self.model_combo.currentIndexChanged.connect(self._on_model_chosen)
        self.dataset_combo.currentIndexChanged.connect(self._on_dataset_chosen)
        bind_text(state, "vocab", self.vocab_edit)
        state.events.model.connect(self._on_state_model)
        state.events.dataset.connect(self._on_state_dataset)
        state.events.optimizer.connect(self._show_info)
        state.events.precision.connect(self._show_info)

    def _build(self) -> None:
        self.model_combo = QComboBox()
        self.model_combo.setObjectName("modelCombo")
        self.model_combo.setToolTip("The model to train: a sample model, a model file opened lately, or Open model… for your own.")
        self.model_busy = QProgressBar()
        self.model_busy.setObjectName("modelBusy")
        self.model_busy.setRange(0, 0)
        self.model_busy.setMaximumHeight(8)
        self.model_busy.setTextVisible(False)
        self.model_info = _muted(NoteLabel())
        self.model_info.setObjectName("modelInfo")
        self.model_info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.model_error = NoteLabel()
        self.model_error.setObjectName("modelError")
        self.model_error.setWordWrap(True)
        self.model_error.setStyleSheet(f"color: {ERROR_COLOR};")
        self.dataset_combo = QComboBox()
        self.dataset_combo.setObjectName("datasetCombo")
        self.dataset_combo.setToolTip("Synthetic data measures the device alone; real data sets load from disk or download once.")
        self.dataset_note = NoteLabel()
        self.dataset_note.setObjectName("datasetNote")
        self.dataset_note.setWordWrap(True)
        self.dataset_note.setStyleSheet(f"color: {WARNING_COLOR};")
        self.vocab_edit = ParsedField("Vocabulary", VOCAB, "vocabEdit")
        self.vocab_edit.setToolTip("How many different ids the integer inputs take (synthetic ids are drawn from 0 to this - 1).")

    def add_rows(self, form: QFormLayout) -> None:
        """Lay out the model menu, its busy bar, description and error, the data set menu, its note and the vocabulary."""
        self._form = form
        form.addRow("Model", self.model_combo)
        form.addRow("", self.model_busy)
        form.addRow("", self.model_info)
        form.addRow("", self.model_error)
        form.addRow("Data set", self.dataset_combo)
        form.addRow("", self.dataset_note)
        form.addRow("Vocabulary", self.vocab_edit)
        for widget in (self.model_busy, self.model_error, self.dataset_note, self.vocab_edit):
            form.setRowVisible(widget, False)

    def fill_models(self) -> None:
        """List the sample models (each described in its tooltip), the recent model files and Open model…; pick the default."""
        for spec in MODELS.values():
            self.model_combo.addItem(spec.title, spec.name)
            self.model_combo.setItemData(self.model_combo.count() - 1, spec.description, Qt.ItemDataRole.ToolTipRole)
        self._fill_files(DEFAULT_MODEL)

    # --- what the form trains ------------------------------------------------

    def model(self) -> str:
        """The model the form describes: a sample model's name or a described model file's path."""
        return self._current

    def dataset(self) -> str:
        return self.dataset_combo.currentData()

    def opened_file(self) -> OpenedModel | None:
        """The described model file the form trains, or None for a sample model."""
        return self._files.get(self._current)

    def pending(self) -> str:
        """What is being opened or checked right now ('' when nothing): Start waits for it."""
        return self._state.pending

    def input_widgets(self) -> list[QWidget]:
        return [self.model_combo, self.dataset_combo, self.vocab_edit]

    # --- opening files -------------------------------------------------------

    def open_model_file(self, path: str) -> None:
        """Open a model file (what "Open model…" does once a file is chosen): described in the background."""
        path = os.path.abspath(os.path.expanduser(path))
        self._fill_files(path, extra=path)
        self._set_error("")
        self._write(pending=f"Opening {os.path.basename(path)}: reading its inputs and outputs in a separate process…", model=path)
        self._checking_data = False
        self.opener.open(path)

    def ask_model_file(self) -> None:
        """Ask for a model file (starting in the folder last used for one) and open it; nothing when cancelled."""
        path = ask_open_file(dialog_parent(self), FOLDER_MODEL, "Open a model file", MODEL_FILTERS, self._settings)
        if path:
            self.open_model_file(path)

    def open_data_file(self, path: str) -> None:
        """Train the opened model file on an .npz: checked against the model in the background first."""
        opened = self.opened_file()
        if opened is None:
            return
        path = os.path.abspath(os.path.expanduser(path))
        self._set_error("")
        self._write(pending=f"Checking {os.path.basename(path)} against {opened.name}…")
        self._checking_data = True
        self.opener.open(opened.path, path)

    def _on_model_chosen(self, index: int) -> None:
        chosen = self.model_combo.itemData(index)
        if chosen == OPEN_MODEL:
            self._select(self.model_combo, self._current)
            self.ask_model_file()
        elif is_model_file(chosen):
            self.open_model_file(chosen)
        elif chosen is not None:
            self._set_current(chosen)
            self._set_error("")
            self.follow_model()

    def _on_state_model(self, model: str) -> None:
        """A model set in the state elsewhere (a restore): chosen as if picked in the menu."""
        if self._writing or model == self._current:
            return
        if model in MODELS:
            self._select(self.model_combo, model)
            self._set_current(model)
            self._set_error("")
            self.follow_model(say_switch=False)  # the data set it had was no choice made for this model
        elif is_model_file(model):
            self.open_model_file(model)
        else:
            self._write(model=self._current)

    def _on_state_dataset(self, dataset: str) -> None:
        """A data set set in the state elsewhere: chosen if the model offers it, else the one offered stays."""
        if self._writing:
            return
        index = self.dataset_combo.findData(dataset)
        if index >= 0 and dataset != OPEN_NPZ:
            self.dataset_combo.setCurrentIndex(index)
        else:
            self._write(dataset=self.dataset())

    def _on_dataset_chosen(self, index: int) -> None:
        if self.dataset_combo.itemData(index) == OPEN_NPZ:
            self._select(self.dataset_combo, self._state.dataset)
            title = f"Data for {os.path.basename(self._current)}"
            path = ask_open_file(dialog_parent(self), FOLDER_DATA, title, NPZ_FILTERS, self._settings)
            if path:
                self.open_data_file(path)
            return
        self._write(dataset=self.dataset())
        self.dataset_note.clear()
        self._form.setRowVisible(self.dataset_note, False)
        self._show_vocab()
        self._show_info()
        self.changed.emit()

    def _on_opened(self, outcome: OpenOutcome) -> None:
        opened = outcome.opened
        if opened is None:
            return  # the opener emits `opened` only with a model
        self._write(pending="")
        if outcome.data is None:
            self._set_error("")
            self._files[opened.path] = opened
            remember_model(self._settings, opened.path)
            self.recent_changed.emit()
            self._set_current(opened.path)
            self._fill_files(opened.path)
            self.follow_model()
            return
        data_files = self._data_files.setdefault(opened.path, [])
        if outcome.data not in data_files:
            data_files.append(outcome.data)
        self._write(dataset=outcome.data)
        self.follow_model()

    def _on_failed(self, path: str, message: str) -> None:
        self._write(pending="")
        message = window_words(message)
        if self._checking_data:
            self._set_error(f"Data not used: {message}")
        else:
            self._set_error(f"Could not open {os.path.basename(path)}: {message} The model stays {self._title(self._current)}.")
            self._fill_files(self._current)
            self._write(model=self._current)
        self._show_info()
        self.changed.emit()

    def _on_busy(self, busy: bool) -> None:
        self._form.setRowVisible(self.model_busy, busy)
        if busy:
            self._say(self.model_info, self._state.pending)
        self.changed.emit()

    # --- following the model -------------------------------------------------

    def follow_model(self, say_switch: bool = True) -> None:
        """Offer the data sets the model accepts, keeping the current one if it is among them; then `changed`.

        A data set the model cannot train on is switched to one it can, which a note says (unless `say_switch` is False).
        """
        previous: str | None = self._state.dataset
        if self.opened_file() is None and self._followed and self._followed not in MODELS:
            previous = None  # back from a model file to a sample: the sample's own default data set, not the file's (Synthetic)
        note = ""
        self.dataset_combo.blockSignals(True)
        self.dataset_combo.clear()
        if self.opened_file() is not None:  # another file starts on its own data (a .py's build_dataset()); the same keeps its choice
            self._fill_file_datasets(self._files[self._current], previous if self._followed == self._current else None)
        else:
            note = self._fill_sample_datasets(previous)
        note = note if say_switch else ""
        self.dataset_combo.blockSignals(False)
        self._followed = self._current
        self._write(dataset=self.dataset())
        self._say(self.dataset_note, note)
        self._form.setRowVisible(self.dataset_note, bool(note))
        self._show_vocab()
        self._show_info()
        self.changed.emit()

    def _fill_sample_datasets(self, previous: str | None) -> str:
        """Fill the sample model's data sets; returns a note when the previous choice had to change."""
        spec = MODELS[self._current]
        for dataset in DATASETS.values():
            if spec.accepts(dataset):
                self._add_item(
                    self.dataset_combo, dataset.title + ("" if dataset.offline else " (download)"), dataset.name, dataset.description
                )
        preferred = previous if self.dataset_combo.findData(previous) >= 0 else None
        if spec.name == DEFAULT_MODEL and previous is None:
            preferred = DEFAULT_DATASET
        index = self.dataset_combo.findData(preferred or spec.default_dataset)
        self.dataset_combo.setCurrentIndex(max(0, index))
        if previous in DATASETS and preferred is None:
            now = self.dataset_combo.currentText()
            return f"Data set switched from {DATASETS[previous].title} to {now}: {spec.title} cannot train on {DATASETS[previous].title}."
        return ""

    def _fill_file_datasets(self, opened: OpenedModel, previous: str | None) -> None:
        self._add_item(self.dataset_combo, "Synthetic (random, shaped like its inputs)", SYNTHETIC,
                       "Random inputs in each input's shape and dtype; targets to fit each output's loss.")  # fmt: skip
        if opened.description.get("has_build_dataset"):
            self._add_item(self.dataset_combo, "build_dataset() in the file", PYTHON_DATA, "The tf.data.Dataset the Python file builds.")
        for path in self._data_files.get(opened.path, []):
            self._add_item(self.dataset_combo, os.path.basename(path), path, path)
        self._add_item(self.dataset_combo, "Open .npz…", OPEN_NPZ, "Arrays x and y, or one array per input and output name.")
        wanted = previous if self.dataset_combo.findData(previous) >= 0 and previous != OPEN_NPZ else opened.description.get("data")
        self.dataset_combo.setCurrentIndex(max(0, self.dataset_combo.findData(wanted)))

    def show_measured(self, result: RunResult) -> None:
        """A run ended: a model file's details add what it measured (FLOPs per step, peak memory)."""
        opened = self._files.get(str(result.config.get("model")))
        if opened is not None and result.config.get("model_sha256") in ("", None, opened.sha256):
            self._measured[opened.path] = result
            self._show_info()

    # --- showing -------------------------------------------------------------

    def _show_info(self) -> None:
        if self._state.pending:
            return
        opened = self.opened_file()
        role = QPalette.ColorRole.WindowText if opened is not None else QPalette.ColorRole.PlaceholderText
        self.model_info.setForegroundRole(role)  # a file's details in full colour; a sample's one line muted
        if opened is not None:
            training = (self._state.optimizer, self._state.precision)
            self._say(self.model_info, details_html(opened, *training, self._measured.get(opened.path)))
            self.model_info.setToolTip(opened.path)
            return
        name, dataset = self._current, self.dataset()
        count = self._params.get((name, dataset))
        data = DATASETS[dataset].title if dataset in DATASETS else dataset
        counted = f"{format_value(count, 'count')} parameters, as built for {data}" if count is not None else ""
        self._say(self.model_info, f"{MODELS[name].description}\n{counted or 'parameters: counting once TensorFlow has loaded…'}")
        self.model_info.setToolTip("")
        if count is None:
            self._count_next()

    def _vocab_needed(self) -> bool:
        opened = self.opened_file()
        return opened is not None and self.dataset() == SYNTHETIC and bool(open_ranges_needed(opened.description))

    def _show_vocab(self) -> None:
        self._form.setRowVisible(self.vocab_edit, self._vocab_needed())

    def _say(self, label: QLabel, text: str) -> None:
        """Set a wrapped row's text and lay the form out again (QFormLayout keeps the row's old height otherwise)."""
        label.setText(text)
        QTimer.singleShot(0, self, self._form.invalidate)  # after the layout pass this text change starts

    def _set_current(self, model: str) -> None:
        """The form now describes `model` (a sample, or a described file): the state's model, and what it knows of the file."""
        self._current = model
        opened = self._files.get(model)
        facts = None
        if opened is not None:
            layers = tuple(opened.description.get("tf_only_layers") or ())
            facts = ModelFile(opened.path, opened.sha256, opened.trusted, opened.custom_objects,
                              tuple(open_ranges_needed(opened.description)), layers)  # fmt: skip
        self._write(model=model, model_file=facts)

    def _write(self, **values: Any) -> None:
        """Set fields of the state this menu decided (not taken for choices made elsewhere)."""
        self._writing = True
        try:
            for name, value in values.items():
                setattr(self._state, name, value)
        finally:
            self._writing = False

    def _set_error(self, text: str) -> None:
        self._say(self.model_error, text)
        self._form.setRowVisible(self.model_error, bool(text))

    def _title(self, model: str) -> str:
        return MODELS[model].title if model in MODELS else os.path.basename(model)

    def _fill_files(self, selected: str, extra: str = "") -> None:
        """Refill the menu after the samples: recent files (with `extra`, being opened, and the file in use), Open model…; select `selected`."""
        combo = self.model_combo
        combo.blockSignals(True)
        while combo.count() > len(MODELS):
            combo.removeItem(combo.count() - 1)
        combo.insertSeparator(combo.count())
        files = recent_models(self._settings)
        in_use = self._current if self._current in self._files else ""
        for path in list(dict.fromkeys(p for p in (extra, in_use) if p and p not in files)) + files:
            self._add_item(combo, os.path.basename(path), path, path)
        self._add_item(combo, "Open model…", OPEN_MODEL, "Open a .keras, .h5 or .py model file of your own.")
        combo.setCurrentIndex(max(0, combo.findData(selected)))
        combo.blockSignals(False)

    @staticmethod
    def _add_item(combo: QComboBox, title: str, data: str, tooltip: str) -> None:
        combo.addItem(title, data)
        combo.setItemData(combo.count() - 1, tooltip, Qt.ItemDataRole.ToolTipRole)

    @staticmethod
    def _select(combo: QComboBox, data: str | None) -> None:
        combo.blockSignals(True)
        combo.setCurrentIndex(max(0, combo.findData(data)))
        combo.blockSignals(False)

    # --- sample models' parameter counts --------------------------------------

    def load_param_counts(self) -> None:
        """TensorFlow has loaded: count the parameters of the selected model as built for the selected data, in a worker thread."""
        self._may_count = True
        self._count_next()

    def _count_next(self) -> None:
        key = (self._current, self.dataset())
        if not self._may_count or self._counting or self._closed or self._current not in MODELS:
            return
        if key in self._params or key in self._count_failed:
            return
        self._counting = key
        run_in_background(_count_parameters, key, on_result=self._on_param_count, on_error=self._on_param_count_failed, name="param-count")

    def close_down(self) -> None:
        """The window is closing: count and open nothing more."""
        self._closed = True
        self.opener.close_down()

    def _on_param_count(self, counted: tuple[tuple[str, str], int]) -> None:
        key, count = counted
        self._params[key] = count
        self._counting = None
        self._show_info()
        self.params_counted.emit()

    def _on_param_count_failed(self, message: str) -> None:
        if self._counting is not None:
            self._count_failed.add(self._counting)
        self._counting = None
        self.params_counted.emit()
        if self._current in MODELS:
            self._say(self.model_info, f"{MODELS[self._current].description}\nparameters unknown: {message}")
