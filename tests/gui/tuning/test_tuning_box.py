"""The "Make it faster" box on real widgets: a largest-batch search in a child process while the app stays responsive, and Apply."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import Qt, QTimer

from core.config import RunConfig
from gui.controllers.tuning import TuningController, probes_left
from gui.tuning.tuning_box import TuningBox

SEARCH_TIMEOUT_MS = 120_000


@pytest.mark.slow
def test_a_largest_batch_search_runs_off_the_gui_thread_and_apply_emits_the_batch(qtbot) -> None:
    box = TuningBox(TuningController())
    qtbot.addWidget(box)
    box.show()
    assert not box.max_batch_button.isEnabled()  # no job yet
    box.set_job(RunConfig(model="mlp", batch_size=64, strategy="one-device", devices=("CPU:0",)))
    assert box.max_batch_button.isEnabled() and not box.stop_button.isEnabled() and not box.apply_button.isEnabled()

    box.memory_edit.setText("4XB")
    qtbot.mouseClick(box.max_batch_button, Qt.MouseButton.LeftButton)
    assert "got '4XB'; allowed: a size such as 512MiB or 4GiB" in box.progress_label.text()
    assert not box.controller.is_running()

    # Up to 32 under 2 GiB: one probe (batch 32) trains in a child process, fits, and ends the search.
    box.memory_edit.setText("2GiB")
    box.up_to_edit.setText("32")
    ticks: list[float] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.monotonic()) if box.controller.is_running() else None)
    timer.start(20)
    lines: list[str] = []
    box.controller.progress.connect(lambda text, _share: lines.append(text))
    with qtbot.waitSignal(box.controller.result_ready, timeout=SEARCH_TIMEOUT_MS) as found:
        qtbot.mouseClick(box.max_batch_button, Qt.MouseButton.LeftButton)
        assert box.stop_button.isEnabled() and not box.autotune_button.isEnabled()
    timer.stop()
    qtbot.waitUntil(lambda: not box.controller.is_running(), timeout=10_000)
    assert len(ticks) >= 5, "the event loop stopped turning while the probe ran"
    assert max(b - a for a, b in zip(ticks, ticks[1:], strict=False)) < 2.0
    assert any(line.startswith("probe 1: batch 32 in a child process") for line in lines)
    assert box.progress_label.text() == "", "the line about the probe in flight is gone once the search has ended"
    result = found.args[0]
    assert result.max_batch == 32 and [(p.batch, p.fits) for p in result.probes] == [(32, True)] and result.margin == 0
    text = box.result_text.toPlainText()
    assert "batch 32: fits, peak" in text and "Largest batch: 32 (every batch tried fit)" in text

    assert box.apply_button.isEnabled() and box.autotune_button.isEnabled()
    with qtbot.waitSignal(box.settings_chosen, timeout=1000) as chosen:
        qtbot.mouseClick(box.apply_button, Qt.MouseButton.LeftButton)
    assert chosen.args[0] == {"batch_size": 32}
    box.set_job(RunConfig(model="mlp", batch_size=32, strategy="one-device", devices=("CPU:0",)))
    assert not box.apply_button.isEnabled()  # a new job: nothing left to apply


def test_a_box_reading_the_run_form_starts_nothing_while_the_form_has_a_problem_or_a_run_is_in_flight(qtbot) -> None:
    box = TuningBox(TuningController(), job_source=lambda: None)
    qtbot.addWidget(box)
    assert box.max_batch_button.isEnabled() and box.autotune_button.isEnabled()
    qtbot.mouseClick(box.autotune_button, Qt.MouseButton.LeftButton)
    assert "The run form has a problem" in box.progress_label.text() and not box.controller.is_running()
    busy = TuningBox(TuningController(), job_source=lambda: RunConfig(model="mlp"), busy=lambda: True)
    qtbot.addWidget(busy)
    qtbot.mouseClick(busy.max_batch_button, Qt.MouseButton.LeftButton)
    assert "A run is in flight" in busy.progress_label.text() and not busy.controller.is_running()


def test_the_largest_batch_estimate_counts_at_most_the_probes_left():
    assert probes_left(64, None, 1024, 0.03) == 4 + 6  # doublings to 1024, then halving a gap to within 3 %
    assert probes_left(64, 128, 1024, 0.03) == 6  # 64 wide, halved until under 1.92 (3 % of 64)
    assert probes_left(100, 102, 1024, 0.03) == 0  # within the tolerance: done
    assert probes_left(1024, None, 1024, 0.03) == 6
