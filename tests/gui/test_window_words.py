"""Issue 38 item 18 on single widgets: core's messages in the window's words, the sweep's second row cleared, a search's bar.

Core's messages name command-line flags; the window names its own controls instead (gui.window_words). Each
check reads a message as core writes it (its constants, or what a real search in the box says) through the real
widgets that show it.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QToolButton

from core.config import ConfigError, RunConfig
from core.training.strategies import MIRRORED_NEEDS, strategy_choices
from core.tuning.autotune import BUDGET_FIELD as CLI_BUDGET_FLAG
from core.tuning.autotune import check_budget
from core.tuning.backend_stage import BACKENDS_OFF_NOTE
from core.tuning.sweep_plan import varied_settings
from core.workloads.model_file import CUSTOM_OBJECTS_HINT
from gui.controllers.tuning import TuningController
from gui.tuning.sweep_axes import SweepAxesBox
from gui.tuning.tuning_box import NO_SEARCH_YET, TuningBox
from gui.window_words import LOGICAL_CPUS_PATH, MEMORY_BUDGET, TIME_BUDGET, window_words
from tests.gui.helpers import names_a_flag

SEARCH_TIMEOUT_MS = 60_000


@pytest.mark.parametrize(
    ("said", "control"),
    [
        (BACKENDS_OFF_NOTE, "the run form's Backend"),
        (f"could not tell a gain; give it a larger {CLI_BUDGET_FLAG}", TIME_BUDGET),
        ("arrays take 3 GiB once loaded and a probe holds them once; give a larger --memory-limit or fewer examples", MEMORY_BUDGET),
        (MIRRORED_NEEDS.format(device="CPU:0"), LOGICAL_CPUS_PATH),
        (next(choice.reason for choice in strategy_choices([]) if choice.name == "mirrored"), LOGICAL_CPUS_PATH),
        (CUSTOM_OBJECTS_HINT, "Open with custom layers…"),
        ("re-run with --rounds 12 or on a quiet machine.", "Rounds at 12"),
    ],
)
def test_core_messages_name_the_window_s_control_not_a_flag(said: str, control: str) -> None:
    assert names_a_flag(said), "the message as core writes it names a flag"
    shown = window_words(said)
    assert not names_a_flag(shown) and control in shown
    assert "Settings >" not in shown, "no menu the window lacks"


def test_a_budget_refused_in_the_box_names_its_field(qtbot) -> None:
    with pytest.raises(ConfigError) as refused:
        check_budget("soon")
    assert names_a_flag(str(refused.value)), "the CLI's own check names its flag"
    box = TuningBox(TuningController(), job_source=lambda: RunConfig(model="mlp"))
    qtbot.addWidget(box)
    box.budget_edit.setText("soon")
    qtbot.mouseClick(box.autotune_button, Qt.MouseButton.LeftButton)
    assert TIME_BUDGET in box.progress_label.text() and not names_a_flag(box.progress_label.text())
    assert not box.controller.is_running()


def test_a_largest_batch_search_refused_for_its_target_names_the_strategy_and_its_bar_is_not_left_busy(qtbot) -> None:
    """Multi-worker is refused by core as "--target: got 'multi-worker'"; the box says "Strategy" and its bar ends idle."""
    box = TuningBox(TuningController())
    qtbot.addWidget(box)
    assert box.progress_bar.text() == NO_SEARCH_YET and box.progress_bar.value() == 0
    box.set_job(RunConfig(model="mlp", strategy="multi-worker", workers=2))
    with qtbot.waitSignal(box.controller.failed, timeout=SEARCH_TIMEOUT_MS):
        qtbot.mouseClick(box.max_batch_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not box.controller.is_running(), timeout=SEARCH_TIMEOUT_MS)
    said = box.progress_label.text()
    assert "Strategy: got 'multi-worker'" in said and not names_a_flag(said)
    assert box.progress_bar.maximum() == 100 and box.progress_bar.value() == 0, "no result: an empty bar, not a busy one"
    assert box.progress_bar.text() != "0%", "it says the search ended without a result"


def test_clearing_the_second_row_with_its_clear_button_sweeps_the_first_setting_alone(qtbot) -> None:
    box = SweepAxesBox()
    qtbot.addWidget(box)
    box.show()
    box.set_axes("batch_size", "16,32,64", "precision", "off,bfloat16")
    assert set(box.values()) == {"batch_size", "precision"}
    clear = [button for button in box.second_values.findChildren(QToolButton) if button.isVisible()]
    assert len(clear) == 1, "the ⊗ in the second row's field"
    qtbot.mouseClick(clear[0], Qt.MouseButton.LeftButton)
    assert box.second_values.text() == ""
    values = box.values()  # was refused: "Precision values (second row): got ''"
    assert values == {"batch_size": (16, 32, 64)} and varied_settings(values) == ["batch_size"]
    assert "empty" in box.second_values.placeholderText(), "the empty field says what it does"
    box.first_values.clear()
    with pytest.raises(ConfigError) as refused:
        box.values()
    assert refused.value.field.endswith("(first row)"), "the first row still needs its values"
