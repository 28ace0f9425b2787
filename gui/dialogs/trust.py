"""Asking the user to trust a model file before anything in it runs.

A `.py` model file runs its code when it is opened, and a `.keras`/`.h5` file
with a Lambda layer or custom objects runs code from the file when Keras loads
it. A model whose custom layers are not defined here can be opened with the
`.py` that defines them ("Open with custom layers…": trusted like a `.py` model). The dialog names the file, says plainly that trusting runs its code with
the user's rights, and defaults to "Don't trust". The caller remembers a "Trust"
per file content (sha256), so the same content is not asked about twice.
"""

from __future__ import annotations

import html
import os

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFileDialog, QLabel, QVBoxLayout, QWidget

CUSTOM_OBJECTS_FILTER = "Python files (*.py)"


def trust_text(path: str, sha256: str, reason: str) -> str:
    """The dialog's message as HTML: which file, why it needs trust, what trusting means."""
    name = html.escape(os.path.basename(path))
    return (
        f"<p><b>Trust {name}?</b></p>"
        f"<p>{html.escape(path)}<br><span style='font-size:9pt'>sha256 {html.escape(sha256[:16])}…</span></p>"
        f"<p>{html.escape(reason)}</p>"
        "<p><b>Trusting this file runs its code on this computer, with your rights.</b> "
        "Trust only a file you wrote or got from someone you trust. Device Lab remembers the answer "
        "for this exact content; if the file changes, it asks again.</p>"
    )


class TrustDialog(QDialog):
    """The question "Trust <file>?" with Trust and Don't trust (the default); `exec()` returns Accepted for Trust."""

    def __init__(self, path: str, sha256: str, reason: str, parent: QWidget | None = None, offer_custom_objects: bool = False):
        super().__init__(parent)
        self.custom_objects = ""
        self.setObjectName("trustDialog")
        self.setWindowTitle("Run code from this model file?")
        self.path = path
        self.message = QLabel(trust_text(path, sha256, reason))
        self.message.setObjectName("trustMessage")
        self.message.setWordWrap(True)
        buttons = QDialogButtonBox()
        self.trust_button = buttons.addButton("Trust and open", QDialogButtonBox.ButtonRole.AcceptRole)
        self.trust_button.setObjectName("trustButton")
        self.decline_button = buttons.addButton("Don't trust", QDialogButtonBox.ButtonRole.RejectRole)
        self.decline_button.setObjectName("declineTrustButton")
        self.decline_button.setDefault(True)
        self.decline_button.setAutoDefault(True)
        self.trust_button.setAutoDefault(False)
        if offer_custom_objects:
            self.custom_objects_button = buttons.addButton("Open with custom layers…", QDialogButtonBox.ButtonRole.ActionRole)
            self.custom_objects_button.setObjectName("customObjectsButton")
            self.custom_objects_button.setAutoDefault(False)
            self.custom_objects_button.clicked.connect(self._choose_custom_objects)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.message)
        layout.addWidget(buttons)
        self.setMinimumWidth(460)

    def _choose_custom_objects(self) -> None:
        chosen, _ = QFileDialog.getOpenFileName(
            self, "The .py that defines the custom layers", os.path.dirname(self.path), CUSTOM_OBJECTS_FILTER
        )
        self.use_custom_objects(chosen)

    def use_custom_objects(self, path: str) -> None:
        """Trust the model with the classes of `path` (a .py); an empty path (the file dialog cancelled) changes nothing."""
        if path:
            self.custom_objects = path
            self.accept()


def ask_custom_objects(path: str, sha256: str, reason: str, parent: QWidget | None = None) -> str:
    """Offer to open the model with the .py that defines its custom layers (trusting both); that .py's path, or ""."""
    dialog = TrustDialog(path, sha256, reason, parent, offer_custom_objects=True)
    dialog.trust_button.setVisible(False)  # trusting alone cannot define a missing class
    try:
        return dialog.custom_objects if dialog.exec() == QDialog.DialogCode.Accepted else ""
    finally:
        dialog.deleteLater()


def ask_trust(path: str, sha256: str, reason: str, parent: QWidget | None = None) -> bool:
    """Show the dialog modally; True when the user trusts the file."""
    dialog = TrustDialog(path, sha256, reason, parent)
    try:
        return dialog.exec() == QDialog.DialogCode.Accepted
    finally:
        dialog.deleteLater()
