"""Opening the user's own model file from the run form: described off the GUI thread, trusted only when the user says so.

`ModelFileOpener.open(path)` hashes the file and has it described by
`core.workloads.model_probe.describe_model_file` (a child process with a time
limit) in a worker thread (`gui.qt_threads`), so neither a slow nor a hostile
file can freeze or crash the window. A file that runs code when opened (any
`.py`, a `.keras`/`.h5` with a Lambda layer or custom objects) is described only
after the user trusts it in `gui.dialogs.trust`; a file whose custom layers are
not defined here is offered "Open with custom layers…" there (a trusted `.py`); a "Trust" is remembered per
file content (`gui.remembered`), so the same content is not asked about twice.
Descriptions are kept per content (and per path for a `.py`, whose imports
depend on its folder), so choosing a recent file again is immediate.
"""

from __future__ import annotations

import html
import os
import threading
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QSettings, Signal, Slot
from PySide6.QtWidgets import QWidget

from core.config import ModelRef
from core.formatting import format_bytes, format_si, format_value
from core.results import RunResult
from core.workloads.memory_estimate import estimate_from_description, optimizer_for_run
from core.workloads.model_file import PYTHON, ModelFileError, check_model_path
from core.workloads.model_probe import describe_model_file
from core.workloads.model_signature import INTEGER_DTYPES
from gui.dialogs.trust import ask_custom_objects, ask_trust
from gui.qt_threads import run_in_background
from gui.remembered import remember_trust, trusted_hashes

KIND_TITLES = {"keras": "Keras 3 file (.keras)", "h5": "legacy HDF5 file (.h5)", "python": "Python file (build_model())"}
TRUST_REASONS = {
    PYTHON: "A Python model file runs its code when it is opened: everything at its top level, then build_model().",
    "": "Keras can load this model only by running code stored in the file (a Lambda layer or custom objects).",
}
FLOPS_LATER = "counted from the model's graph when it first trains: shown here after the first run"


@dataclass(frozen=True)
class OpenedModel:
    """A described model file: where it is, its content hash, its description, whether the user trusted it."""

    path: str
    sha256: str
    description: dict[str, Any]
    trusted: bool
    custom_objects: str = ""

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True)
class OpenOutcome:
    """What opening gave: the model (with `data` checked against it), or the error and whether trust would help."""

    request: int
    path: str
    data: str | None = None
    opened: OpenedModel | None = None
    error: str = ""
    needs_trust: bool = False
    sha256: str = ""
    kind: str = ""
    needs_custom_objects: bool = False


def _cache_key(path: str, kind: str, sha256: str, data: str | None, custom_objects: str = "") -> tuple[str, ...]:
    """Same content, same description; a .py's also depends on its folder (what it imports beside it)."""
    return (path if kind == PYTHON else "", sha256, data or "", custom_objects)


def inspect_model_file(
    request: int,
    path: str,
    trusted: frozenset[str],
    known: dict,
    data: str | None = None,
    stop_event: threading.Event | None = None,
    custom_objects: str = "",
) -> OpenOutcome:
    """Describe the file (worker thread): a known description of the same content, else a child process.

    `trusted` holds the content hashes the user trusts; `known` maps cache keys to
    OpenedModel. `data` (an .npz, "build_dataset") is checked against the model too.
    `custom_objects` is a .py the user chose (and so trusted) to define its custom layers.
    Setting `stop_event` kills the child (a newer request, the window closing).
    """
    try:
        # trust=True here only keeps a .py from being refused before its hash is known; nothing runs
        source = check_model_path(path, trust=True)
    except ModelFileError as exc:
        return OpenOutcome(request, path, data, error=exc.reason)
    is_trusted = source.sha256 in trusted or bool(custom_objects)
    found = known.get(_cache_key(source.path, source.kind, source.sha256, data, custom_objects))
    if found is not None and (is_trusted or not found.trusted):
        return OpenOutcome(
            request,
            source.path,
            data,
            OpenedModel(source.path, source.sha256, {**found.description, "path": source.path}, found.trusted, custom_objects),
        )
    model = ModelRef(source.path, trust=is_trusted, custom_objects=custom_objects)  # its content is compared below
    try:
        description = describe_model_file(model, data=data, stop_event=stop_event)
    except ModelFileError as exc:
        reason = exc.reason if exc.path in (source.path, path) else f"{exc.path}: {exc.reason}"
        return OpenOutcome(
            request,
            source.path,
            data,
            error=reason,
            sha256=source.sha256,
            kind=source.kind,
            needs_trust=exc.needs_trust,
            needs_custom_objects=exc.needs_custom_objects,
        )
    if description.get("sha256") != source.sha256:
        return OpenOutcome(request, source.path, data, error="the file changed while it was being read: open it again.")
    return OpenOutcome(request, source.path, data, OpenedModel(source.path, source.sha256, description, is_trusted, custom_objects))


def open_ranges_needed(description: dict[str, Any]) -> list[str]:
    """Integer inputs whose id range no Embedding tells: synthetic data needs a vocabulary size for them."""
    return [i["name"] for i in description.get("inputs", ()) if i.get("dtype") in INTEGER_DTYPES and i.get("vocab") is None]


def _shape(shape: list[int | None]) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _input_text(info: dict[str, Any]) -> str:
    text = f"<b>{html.escape(info['name'])}</b> {_shape(info['shape'])} {html.escape(info['dtype'])}"
    if info.get("vocab") is not None:
        text += f", ids 0 to {info['vocab'] - 1:,} ({html.escape(info.get('vocab_source', ''))})"
    elif info.get("dtype") in INTEGER_DTYPES:
        text += ", id range unknown (no Embedding): give the vocabulary size below"
    return text


def _loss_text(loss: dict[str, Any]) -> str:
    name = loss["loss"].replace("_", " ") + (" (from logits)" if loss.get("from_logits") else "")
    weight = f" × {loss['weight']:g}" if loss.get("weight", 1.0) != 1.0 else ""
    return f"<b>{html.escape(loss['output'])}</b>: {html.escape(name)}{weight}, because {html.escape(loss['reason'])}"


def flops_per_step(result: RunResult) -> float | None:
    """Training FLOPs per step of a finished run, when it counted them (older runs: achieved FLOP/s × batch / samples/s)."""
    if result.flops_per_step is not None:
        return result.flops_per_step
    batch = result.config.get("batch_size")
    if not result.achieved_flops or not result.samples_per_s or not batch:
        return None
    return result.achieved_flops * batch / result.samples_per_s


def details_html(opened: OpenedModel, optimizer: str, precision: str, measured: RunResult | None = None) -> str:
    """What the form says about an opened file: inputs, outputs, parameters, FLOPs, losses and why, memory estimate."""
    d = opened.description
    trusted = " · trusted to run its code" if opened.trusted else ""
    trusted += f" · custom layers from {html.escape(os.path.basename(opened.custom_objects))}" if opened.custom_objects else ""
    lines = [
        f"<b>{html.escape(opened.name)}</b>: {KIND_TITLES.get(d.get('kind', ''), 'model file')}{trusted}",
        f"<span style='font-size:9pt'>{html.escape(opened.path)} · sha256 {opened.sha256[:12]}…</span>",
        "Inputs: " + "; ".join(_input_text(i) for i in d.get("inputs", ())),
        "Outputs: "
        + "; ".join(f"<b>{html.escape(o['name'])}</b> {_shape(o['shape'])} {html.escape(o['activation'])}" for o in d.get("outputs", ())),
        f"Parameters: {format_value(d['params'], 'count')} ({format_value(d['trainable_params'], 'count')} trainable)",
    ]
    flops = flops_per_step(measured) if measured is not None else None
    if measured is not None and flops is not None:
        lines.append(f"FLOPs per step: {format_si(flops, 'FLOP')} at batch {measured.config.get('batch_size')} (counted in the last run)")
    else:
        lines.append(f"FLOPs per step: {FLOPS_LATER}")
    lines.append("Loss: " + "; ".join(_loss_text(loss) for loss in d.get("losses", ())))
    estimate = estimate_from_description(d, optimizer, precision)
    optimizer_used, file_settings = optimizer_for_run(d, optimizer)
    whose = "the file's" if file_settings is not None else "the run's"
    if d.get("optimizer") and file_settings is None:
        whose += f", replacing the file's {d['optimizer']}"
    lines.append(f"Optimizer: {html.escape(optimizer_used)} ({html.escape(whose)})")
    lines.append(
        f"Memory before activations ({html.escape(optimizer_used)}, {estimate.optimizer_slots} slot(s)): "
        f"weights {format_bytes(estimate.weight_bytes)} + gradients {format_bytes(estimate.gradient_bytes)} + "
        f"optimizer state {format_bytes(estimate.optimizer_bytes)} = <b>{format_bytes(estimate.total_bytes)}</b>"
    )
    if measured is not None and measured.peak_memory_bytes:
        lines.append(
            f"Measured peak in the last run: {format_bytes(measured.peak_memory_bytes)} ({html.escape(measured.peak_memory_source)})"
        )
    lines += [f"Note: {html.escape(note)}" for note in (*d.get("notes", ()), estimate.note) if note]
    return "<br>".join(lines)


def dialog_parent(obj: QObject) -> QWidget | None:
    """The widget `obj`'s dialogs open over: its nearest widget ancestor, found when needed (a widget held as an attribute
    would tie the form into a reference cycle, freed only by the garbage collector, at any moment)."""
    ancestor = obj.parent()
    while ancestor is not None and not isinstance(ancestor, QWidget):
        ancestor = ancestor.parent()
    return ancestor


class ModelFileOpener(QObject):
    """Opens model files one at a time (the latest request wins); asks for trust when a file needs it.

    `opened(OpenOutcome)` carries the described model (and the data checked with it);
    `failed(str path, str message)` says why not; `busy_changed(bool)` brackets the work.
    """

    opened = Signal(object)
    failed = Signal(str, str)
    busy_changed = Signal(bool)

    def __init__(self, settings: QSettings, parent: QObject | None = None):
        super().__init__(parent)
        self._settings = settings
        self._known: dict[tuple[str, ...], OpenedModel] = {}
        self._request = 0
        self._pending: tuple[str, str | None] | None = None
        self._stop = threading.Event()
        self._closed = False

    @property
    def busy(self) -> bool:
        return self._pending is not None

    def open(self, path: str, data: str | None = None, custom_objects: str = "") -> None:
        """Describe `path` (with `data` checked against it, `custom_objects` registered) in the background; a newer request replaces this one."""
        if self._closed:
            return
        self._request += 1
        self._pending = (os.path.abspath(path), data)
        self._stop.set()  # the request this one replaces stops its child
        self._stop = threading.Event()
        run_in_background(
            inspect_model_file,
            self._request,
            self._pending[0],
            trusted_hashes(self._settings),
            dict(self._known),
            data,
            self._stop,
            custom_objects,
            on_result=self._on_done,
            on_error=self._on_error,
            name="model-file",
        )
        self.busy_changed.emit(True)

    def close_down(self) -> None:
        """The window is closing: open nothing more, ask nothing more, and stop the child describing a file."""
        self._closed = True
        self._stop.set()

    @Slot(object)
    def _on_done(self, outcome: OpenOutcome) -> None:
        if outcome.request != self._request or self._closed:
            return  # a newer request replaced it
        if outcome.opened is not None:
            kind = outcome.opened.description.get("kind", "")
            self._known[_cache_key(outcome.path, kind, outcome.opened.sha256, outcome.data, outcome.opened.custom_objects)] = outcome.opened
            self._finish()
            self.opened.emit(outcome)
        elif outcome.needs_trust and outcome.sha256:
            self._ask_trust(outcome)
        elif outcome.needs_custom_objects and outcome.sha256:
            self._ask_custom_objects(outcome)
        else:
            self._finish()
            self.failed.emit(outcome.path, outcome.error)

    @Slot(str)
    def _on_error(self, message: str) -> None:
        if self._pending is not None and not self._closed:
            path = self._pending[0]
            self._finish()
            self.failed.emit(path, message)

    def _ask_trust(self, outcome: OpenOutcome) -> None:
        reason = TRUST_REASONS[PYTHON if outcome.kind == PYTHON else ""]
        if ask_trust(outcome.path, outcome.sha256, reason, dialog_parent(self)):
            remember_trust(self._settings, outcome.sha256, outcome.path)
            self.open(outcome.path, outcome.data)
            return
        self._finish()
        self.failed.emit(outcome.path, f"not opened: it runs code when it is opened, and it was not trusted. {reason}")

    def _ask_custom_objects(self, outcome: OpenOutcome) -> None:
        reason = f"{outcome.error} The .py you choose runs its code when the model opens, and the model is trusted with it."
        chosen = ask_custom_objects(outcome.path, outcome.sha256, reason, dialog_parent(self))
        if chosen:
            self.open(outcome.path, outcome.data, chosen)
            return
        self._finish()
        self.failed.emit(outcome.path, outcome.error)

    def _finish(self) -> None:
        self._pending = None
        self.busy_changed.emit(False)
