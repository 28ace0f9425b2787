"""The run form's bar while the first call blocks: its elapsed time, updated; Stop says when it takes effect."""

from __future__ import annotations

from gui.run_form.controls import RunControls


def test_the_bar_counts_the_first_call_and_says_when_a_stop_takes_effect(qtbot):
    controls = RunControls()
    qtbot.addWidget(controls)
    controls.show_starting("mlp on CPU:0")
    assert controls.progress_bar.format() == "Starting: building the model and compiling the step… 0 s"
    qtbot.waitUntil(lambda: controls.progress_bar.format().endswith("… 1 s"), timeout=10_000)
    controls.stop_button.setEnabled(True)
    controls.stop_button.click()
    assert controls.progress_bar.format().startswith("Stopping when the first call ends (compiling cannot be interrupted)…")
    controls.show_progress(1, 10, 100.0, 5.0)
    assert controls.progress_bar.format() == "Stopping after the call in flight… | 1 / 10 steps · 100 samples/s · ETA 0:05"
    assert not controls._tick.isActive(), "the first call's clock stops with it; the stop is still said until the run ends"
    controls.show_starting("mlp on CPU:0")  # the next run
    assert controls.progress_bar.format().startswith("Starting:")
