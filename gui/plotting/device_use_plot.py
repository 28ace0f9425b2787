"""GPU use under the step-time plot: utilisation and memory (% of the GPU) on the same step axis, and memory in words.

Each run on a GPU carries a `DeviceUseHook`, one of the standard hooks the job
service gives it (`core.jobs.run_hooks`), which samples NVML about 10 times a
second in its own thread. Once the run's hooks are built (its config checked)
the plot watches that hook: a GUI timer reads what it has, a few times a second
while the run goes, and once more when it ends (the job service ends it also
when the run fails before its first step). The plot stays
hidden until a run on a GPU the driver reports starts, so a machine without
NVIDIA GPUs never sees an empty plot. Its step axis is linked to the plots
above (`PlotsWidget.add_below`), so it never sets an x range of its own.
"""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from core.hooks.device_use import DeviceUseHook, DeviceUseSeries
from core.machine.gpu_sampler import MemoryView, memory_lines
from gui.plotting.plot_view import PlotView

REFRESH_MS = 250
GPU_COLORS = ("#2ca02c", "#1f77b4", "#9467bd", "#ff7f0e", "#d62728", "#17becf", "#8c564b", "#e377c2")


class DeviceUsePlot(QWidget):
    """Utilisation (solid) and memory held (dashed) of each GPU of the latest GPU run, in % against step."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("deviceUsePanel")
        self.plot = PlotView()
        self.plot.setObjectName("deviceUsePlot")
        item = self.plot.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.25)
        item.setLabel("left", "GPU use", units="%")
        item.setLabel("bottom", "step")
        item.getAxis("left").enableAutoSIPrefix(False)
        item.addLegend(offset=(-10, -10), labelTextSize="8pt")  # bottom right: a busy GPU's lines run along the top
        item.getViewBox().setMouseEnabled(y=False)
        item.enableAutoRange(x=False, y=False)
        item.setYRange(-4, 104, padding=0)
        self.plot.setMinimumHeight(110)
        self.memory_label = QLabel()
        self.memory_label.setObjectName("deviceMemoryLabel")
        self.memory_label.setWordWrap(True)
        self.memory_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.memory_label)
        self._curves: list[tuple[pg.PlotDataItem, pg.PlotDataItem]] = []
        self._hook: DeviceUseHook | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._refresh)
        self.setVisible(False)

    @property
    def following(self) -> bool:
        """Whether it refreshes from a run's hook now (until that run ends)."""
        return self._timer.isActive()

    def watch(self, hook: DeviceUseHook | None) -> None:
        """Follow `hook`'s run: shown once it samples a GPU, refreshed until the run ends (None: a run with nothing to sample)."""
        self._hook = hook
        if hook is not None:
            self._timer.start()

    def show_series(self, series: DeviceUseSeries, memory: list[MemoryView], mean: float | None = None) -> None:
        """Draw `series` (one utilisation and one memory curve per GPU) and the memory figures in words."""
        self._make_curves(series.gpu_names)
        for i, (use, held) in enumerate(self._curves):
            use.setData(series.steps, series.utilization[:, i], connect="finite")
            held.setData(series.steps, series.memory_pct[:, i], connect="finite")
        lines = [f"Mean GPU use since warm-up: {mean:.0f} %." if mean is not None else ""]
        lines += [line for view in memory for line in memory_lines(view)]
        self.memory_label.setText("<br>".join(html.escape(line) for line in lines if line))
        self.setVisible(True)

    def _refresh(self) -> None:
        hook = self._hook
        if hook is None:
            self._timer.stop()
            return
        if hook.active:
            self.show_series(hook.series(), hook.memory_views(), hook.mean_utilization())
        if hook.finished:
            self._timer.stop()

    def _make_curves(self, gpu_names: tuple[str, ...]) -> None:
        """One solid (use) and one dashed (memory) curve per GPU, made again when the GPUs differ from the last run's."""
        if [use.name() for use, _ in self._curves] == [f"{name} use" for name in gpu_names]:
            return
        item = self.plot.getPlotItem()
        for curves in self._curves:
            for curve in curves:
                item.removeItem(curve)
        self._curves = []
        for i, name in enumerate(gpu_names):
            color = GPU_COLORS[i % len(GPU_COLORS)]
            use = item.plot(name=f"{name} use", pen=pg.mkPen(color, width=1))
            held = item.plot(name=f"{name} memory held", pen=pg.mkPen(color, width=1, style=Qt.PenStyle.DashLine))
            self._curves.append((use, held))
