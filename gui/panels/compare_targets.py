"""The Compare tab's targets: checkboxes built from the detected devices, plus a free-text field.

The typed targets use `core.compare.targets.parse_targets` syntax; ticked and typed
ones are joined, each target once. Typed text that is not a target turns the field
red, and a line below it says which part is wrong and the forms allowed.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QCheckBox, QGridLayout, QGroupBox, QLabel, QLineEdit, QVBoxLayout, QWidget

from core.backends.available import installed_backends
from core.compare.targets import TARGET_FORMS, CompareTarget, parse_targets
from core.config import ConfigError, backend_title
from core.machine.types import DeviceReport
from gui.style import ERROR_COLOR, INVALID_FIELD_STYLE

Offer = tuple[str, str, str, bool]  # checkbox text, target spec, tooltip, ticked by default
COLUMNS = 2  # targets a row: with long device names, three a row made the window wider than 1024 px
TEXT_CHARS = 36  # a checkbox's text is elided past about this many average characters (the tooltip has it whole)


def typed_targets_error(text: str) -> str:
    """Why the typed targets are not understood, in words with the allowed forms ('' when they are, or when empty)."""
    if not text.strip():
        return ""
    try:
        parse_targets(text)
    except ConfigError as exc:
        return f"“{exc.given}” is not a target. Use {exc.allowed}."
    return ""


def target_offers(report: DeviceReport, devices_known: bool) -> list[Offer]:
    """CPU:0, each GPU, Mirrored over all GPUs / 2 logical CPUs, and (once devices are known) multi-worker:2."""
    usable = [d for d in report.devices if d.available and d.tf_name]
    cpus = [d for d in usable if d.kind == "CPU"]
    gpus = [d for d in usable if d.kind == "GPU"]
    offers: list[Offer] = []
    if cpus:
        offers.append((f"{cpus[0].tf_name} — {cpus[0].name}", cpus[0].tf_name, cpus[0].name, True))
    for index, gpu in enumerate(gpus):
        offers.append((f"{gpu.tf_name} — {gpu.name}", gpu.tf_name, gpu.name, index == 0))
    if len(gpus) >= 2:
        names = ",".join(g.tf_name for g in gpus)
        offers.append((f"Mirrored over all {len(gpus)} GPUs", f"mirrored:{names}", names, True))
    if len(cpus) >= 2:
        names = ",".join(c.tf_name for c in cpus[:2])
        tip = f"{names}: logical devices that share the same physical cores, so this measures the strategy, not more hardware."
        offers.append(("Mirrored over 2 logical CPUs", f"mirrored:{names}", tip, not gpus))
    if devices_known:
        offers.append(
            ("Multi-worker: 2 local processes", "multi-worker:2", "Two worker processes on this machine, one replica each.", False)
        )
    for backend in installed_backends():
        if backend != "tensorflow" and cpus:
            title = backend_title(backend)
            tip = f"The same job with Keras on {title}, on {cpus[0].name}: a child process of its own, from the same weights."
            offers.append((f"{title} on CPU:0", f"{backend}:CPU:0", tip, False))
    return offers


class CompareTargetsBox(QGroupBox):
    """The target checkboxes (two a row, long device names elided), the typed-targets field and, until devices are listed, a note."""

    changed = Signal()  # a box was ticked or unticked, or the typed text changed

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Targets: the same job on each, in interleaved rounds", parent)
        self.setObjectName("compareTargets")
        self._boxes: list[tuple[QCheckBox, str]] = []
        self.grid = QGridLayout()
        self.edit = QLineEdit()
        self.edit.setObjectName("compareTargetsEdit")
        self.edit.setPlaceholderText("More targets, e.g. GPU:1; mirrored:GPU:0,GPU:1; multi-worker:4")
        self.edit.setToolTip("Extra targets: " + TARGET_FORMS)
        self.edit.textChanged.connect(self._check_typed)
        self.edit.textChanged.connect(self.changed)
        self.error_label = QLabel()
        self.error_label.setObjectName("compareTargetsError")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet(f"color: {ERROR_COLOR};")
        self.error_label.setVisible(False)
        self.devices_note = QLabel("Detecting devices… the targets appear once TensorFlow has listed them.")
        self.devices_note.setObjectName("compareDevicesNote")
        self.devices_note.setWordWrap(True)
        self.devices_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        layout = QVBoxLayout(self)
        layout.addLayout(self.grid)
        layout.addWidget(self.edit)
        layout.addWidget(self.error_label)
        layout.addWidget(self.devices_note)

    def set_offers(self, offers: Sequence[Offer], devices_known: bool) -> None:
        """Rebuild the checkboxes, keeping ticked what was ticked (the defaults when nothing was)."""
        checked = {spec for box, spec in self._boxes if box.isChecked()}
        for box, _ in self._boxes:
            self.grid.removeWidget(box)
            box.deleteLater()
        self._boxes = []
        for position, (text, spec, tip, default) in enumerate(offers):
            box = QCheckBox()
            metrics = box.fontMetrics()
            box.setText(metrics.elidedText(text, Qt.TextElideMode.ElideRight, TEXT_CHARS * metrics.averageCharWidth()))
            box.setObjectName(f"compareTarget{position}")
            box.setToolTip(f"{spec}: {tip}" if tip else spec)
            box.setChecked(spec in checked if checked else default)
            box.toggled.connect(self.changed)
            self.grid.addWidget(box, position // COLUMNS, position % COLUMNS)
            self._boxes.append((box, spec))
        self.devices_note.setVisible(not devices_known)

    def targets(self) -> list[CompareTarget]:
        """The ticked targets then the typed ones, each once; raises ConfigError on a bad typed target."""
        specs = [spec for box, spec in self._boxes if box.isChecked()]
        text = self.edit.text().strip()
        found = parse_targets(";".join([*specs, text])) if specs or text else []
        unique: dict[str, CompareTarget] = {}
        for target in found:
            unique.setdefault(target.label, target)
        return list(unique.values())

    def set_targets(self, specs: Sequence[str]) -> None:
        """Tick exactly the checkboxes whose target is in `specs` (the rest go to the text field)."""
        remaining = list(specs)
        for box, spec in self._boxes:
            box.setChecked(spec in remaining)
            if spec in remaining:
                remaining.remove(spec)
        self.edit.setText("; ".join(remaining))

    def typed_error(self) -> str:
        """Why the typed targets are not understood ('' when they are)."""
        return typed_targets_error(self.edit.text())

    def target_specs(self) -> list[str]:
        """The target texts the checkboxes offer, in order."""
        return [spec for _, spec in self._boxes]

    def chosen_targets(self) -> list[str]:
        """The ticked target texts, then the typed ones (what `set_targets` takes back)."""
        typed = [part.strip() for part in self.edit.text().split(";") if part.strip()]
        return [spec for box, spec in self._boxes if box.isChecked()] + typed

    def _check_typed(self) -> None:
        error = self.typed_error()
        self.edit.setStyleSheet(INVALID_FIELD_STYLE if error else "")
        self.error_label.setText(error)
        self.error_label.setVisible(bool(error))
