"""Device settings TensorFlow reads once, at start-up: logical CPU split, GPU memory growth and limit.

They are saved with QSettings and applied by the next start; the dialog says so
and offers to restart Device Lab now.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from core.machine.runtime import MAX_LOGICAL_CPUS, RuntimeSettings
from gui.settings import LOGICAL_CPUS_ENV, save_runtime_settings, saved_runtime_settings

RESTART_NOTE = "These settings take effect after a restart: TensorFlow reads them once, when it starts."
MAX_GPU_MEMORY_LIMIT_MB = 1 << 24


class SettingsDialog(QDialog):
    """Edit and save the start-up device settings; `needs_restart` tells whether they differ from the running ones."""

    def __init__(self, settings: QSettings, active: RuntimeSettings, env_note: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        self.setWindowTitle("Device settings")
        self._settings = settings
        self._active = active
        saved = saved_runtime_settings(settings)
        self.logical_cpus_spin = QSpinBox()
        self.logical_cpus_spin.setObjectName("logicalCpusSpin")
        self.logical_cpus_spin.setRange(0, MAX_LOGICAL_CPUS)
        self.logical_cpus_spin.setSpecialValueText("no split")
        self.logical_cpus_spin.setValue(saved.logical_cpus)
        self.logical_cpus_spin.setToolTip(
            "Split the CPU into this many TensorFlow devices (CPU:0, CPU:1, …) to try mirrored training without GPUs."
        )
        self.memory_growth_check = QCheckBox("Allocate GPU memory as needed (memory growth)")
        self.memory_growth_check.setObjectName("memoryGrowthCheck")
        self.memory_growth_check.setChecked(saved.gpu_memory_growth)
        self.memory_growth_check.setToolTip("Off: TensorFlow takes almost all GPU memory at start-up.")
        self.memory_limit_spin = QSpinBox()
        self.memory_limit_spin.setObjectName("memoryLimitSpin")
        self.memory_limit_spin.setRange(0, MAX_GPU_MEMORY_LIMIT_MB)
        self.memory_limit_spin.setSingleStep(256)
        self.memory_limit_spin.setSuffix(" MiB")
        self.memory_limit_spin.setSpecialValueText("no limit")
        self.memory_limit_spin.setValue(saved.gpu_memory_limit_mb)
        self.memory_limit_spin.setToolTip("Cap TensorFlow's memory on each GPU; a limit replaces memory growth.")
        self.memory_limit_spin.valueChanged.connect(self._sync)
        note = QLabel(RESTART_NOTE + (f"\n{env_note}" if env_note else ""))
        note.setObjectName("restartNote")
        note.setWordWrap(True)
        active_text = QLabel(
            f"Running now: logical CPUs {active.logical_cpus or 'no split'}, "
            f"GPU memory growth {'on' if active.gpu_memory_growth else 'off'}, "
            f"GPU memory limit {f'{active.gpu_memory_limit_mb} MiB' if active.gpu_memory_limit_mb else 'none'}."
        )
        active_text.setWordWrap(True)
        active_text.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        form = QFormLayout()
        form.addRow("Logical CPUs", self.logical_cpus_spin)
        form.addRow("GPU memory", self.memory_growth_check)
        form.addRow("GPU memory limit", self.memory_limit_spin)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Save).setToolTip("Save; the settings apply from the next start.")
        buttons.button(QDialogButtonBox.StandardButton.Cancel).setToolTip("Close without saving.")
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(active_text)
        layout.addWidget(buttons)
        self._sync()
        if LOGICAL_CPUS_ENV in env_note:
            self.logical_cpus_spin.setToolTip(env_note)

    def chosen(self) -> RuntimeSettings:
        return RuntimeSettings(
            logical_cpus=self.logical_cpus_spin.value(),
            gpu_memory_growth=self.memory_growth_check.isChecked(),
            gpu_memory_limit_mb=self.memory_limit_spin.value(),
        )

    def needs_restart(self) -> bool:
        """True when the saved settings differ from the ones this process started with."""
        return self.chosen() != self._active

    def accept(self) -> None:
        save_runtime_settings(self._settings, self.chosen())
        super().accept()

    def _sync(self) -> None:
        self.memory_growth_check.setEnabled(self.memory_limit_spin.value() == 0)
