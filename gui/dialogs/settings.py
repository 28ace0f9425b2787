"""Settings: the theme (applied at once), and the device settings TensorFlow reads once, at start-up.

The device settings (logical CPU split, GPU memory growth and limit) are saved
with QSettings and applied by the next start; the dialog says so, explains why
TensorFlow seems to take the whole GPU without memory growth, and the window
offers to restart Device Lab now.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from core.config import MAX_LOGICAL_CPUS
from core.machine.runtime import MEMORY_GROWTH_NOTE, RuntimeSettings
from gui.plotting.theme import THEMES, apply_theme
from gui.settings import LOGICAL_CPUS_ENV, save_runtime_settings, save_theme, saved_runtime_settings, saved_theme

RESTART_NOTE = "These settings take effect after a restart: TensorFlow reads them once, when it starts."
MAX_GPU_MEMORY_LIMIT_MB = 1 << 24


class SettingsDialog(QDialog):
    """Edit and save the theme and the start-up device settings; `needs_restart` tells whether the latter differ from the running ones."""

    def __init__(self, settings: QSettings, active: RuntimeSettings, env_note: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        self.setWindowTitle("Settings")
        self._settings = settings
        self._active = active
        self.theme_combo = QComboBox()
        self.theme_combo.setObjectName("themeCombo")
        for key, text in THEMES.items():
            self.theme_combo.addItem(text, key)
        self.theme_combo.setCurrentIndex(self.theme_combo.findData(saved_theme(settings)))
        self.theme_combo.setToolTip("Light, dark, or as the system says; applies as soon as you save.")
        appearance = QGroupBox("Appearance")
        QFormLayout(appearance).addRow("Theme", self.theme_combo)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Save).setToolTip("Save: the theme applies now, device settings from the next start.")
        buttons.button(QDialogButtonBox.StandardButton.Cancel).setToolTip("Close without saving.")
        layout = QVBoxLayout(self)
        layout.addWidget(appearance)
        layout.addWidget(self._device_box(saved_runtime_settings(settings), active, env_note))
        layout.addWidget(buttons)
        self._sync()
        if LOGICAL_CPUS_ENV in env_note:
            self.logical_cpus_spin.setToolTip(env_note)

    def _device_box(self, saved: RuntimeSettings, active: RuntimeSettings, env_note: str) -> QGroupBox:
        """The start-up device settings, what runs now, and why TensorFlow seems to take the whole GPU."""
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
        running = QLabel(
            f"Running now: logical CPUs {active.logical_cpus or 'no split'}, "
            f"GPU memory growth {'on' if active.gpu_memory_growth else 'off'}, "
            f"GPU memory limit {f'{active.gpu_memory_limit_mb} MiB' if active.gpu_memory_limit_mb else 'none'}."
        )
        growth_note = QLabel(MEMORY_GROWTH_NOTE)
        growth_note.setObjectName("memoryGrowthNote")
        for label in (running, growth_note):
            label.setWordWrap(True)
            label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        box = QGroupBox("Devices (read once, when TensorFlow starts)")
        form = QFormLayout(box)
        form.addRow("Logical CPUs", self.logical_cpus_spin)
        form.addRow("GPU memory", self.memory_growth_check)
        form.addRow("", growth_note)
        form.addRow("GPU memory limit", self.memory_limit_spin)
        form.addRow(note)
        form.addRow(running)
        return box

    def chosen(self) -> RuntimeSettings:
        return RuntimeSettings(
            logical_cpus=self.logical_cpus_spin.value(),
            gpu_memory_growth=self.memory_growth_check.isChecked(),
            gpu_memory_limit_mb=self.memory_limit_spin.value(),
        )

    def chosen_theme(self) -> str:
        return self.theme_combo.currentData()

    def needs_restart(self) -> bool:
        """True when the saved settings differ from the ones this process started with."""
        return self.chosen() != self._active

    def accept(self) -> None:
        save_runtime_settings(self._settings, self.chosen())
        save_theme(self._settings, self.chosen_theme())
        apply_theme(self.chosen_theme())
        super().accept()

    def _sync(self) -> None:
        self.memory_growth_check.setEnabled(self.memory_limit_spin.value() == 0)
