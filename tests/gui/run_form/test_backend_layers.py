"""The run form refuses a model file whose layers train on TensorFlow only (TextVectorization) when another Backend is chosen."""

from __future__ import annotations

import pytest

from tests.core.workloads.conftest import save_text_vectorization_model
from tests.gui.run_form.test_model_file_gui import make_panel, wait_opened

pytestmark = pytest.mark.slow


def test_a_text_vectorization_model_cannot_start_on_jax_and_says_to_pick_tensorflow(qtbot, tmp_path):
    path = save_text_vectorization_model(tmp_path / "text.keras")

    panel = make_panel(qtbot)
    panel.open_model_file(str(path))
    wait_opened(qtbot, panel)
    assert not [error for error in panel.errors() if error.startswith("Backend:")]  # on TensorFlow it trains
    jax = panel.backend_combo.findData("jax")
    if jax < 0 or not panel.backend_combo.model().item(jax).isEnabled():
        pytest.skip("JAX is not installed here")  # the [test] extra installs it; a user's checkout may not
    panel.backend_combo.setCurrentIndex(jax)
    [error] = [error for error in panel.errors() if error.startswith("Backend:")]
    assert "TextVectorization" in error and "pick Backend TensorFlow" in error
    panel.validate()
    assert not panel.start_button.isEnabled()
