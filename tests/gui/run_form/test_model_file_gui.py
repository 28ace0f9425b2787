"""The user's own model file in the window: open, read the details, train; trust asked once per content; bad files.

Real Keras files saved into a temporary folder, described by the real child
process, trained by the real engine from the real window.
"""

from __future__ import annotations

import os
import shutil
from types import SimpleNamespace

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from core.formatting import format_bytes
from core.machine.types import DeviceInfo, DeviceReport
from core.results import RunResult, RunStatus
from core.workloads.memory_estimate import estimate_memory
from core.workloads.model_file import file_sha256
from gui.panels.history_table import column_of
from gui.qt_threads import wait_for_threads
from gui.remembered import (
    FOLDER_DATA,
    FOLDER_MODEL,
    MAX_RECENT_MODELS,
    is_trusted,
    last_folder,
    recent_models,
    remember_folder,
    remember_model,
    remember_trust,
)
from gui.run_form.hooks_box import RunOptionsBox
from gui.run_form.model_choice import OPEN_MODEL, OPEN_NPZ
from gui.run_form.outcome import final_progress_text
from gui.run_form.panel import RunPanel
from gui.settings import open_settings
from tests.core.workloads.conftest import PY_MODEL, VOCAB, two_io_model, write_py
from tests.gui.helpers import choose, start_and_wait

pytestmark = pytest.mark.timeout(300)
DESCRIBE_TIMEOUT_MS = 180_000
CPU0 = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {})
LOGICAL_CPUS = 2


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> SimpleNamespace:
    """A two-input two-output .keras, a Lambda .keras and a truncated .keras, saved once for the module."""
    from core.machine.runtime import RuntimeSettings, configure_runtime

    configure_runtime(RuntimeSettings(logical_cpus=LOGICAL_CPUS))  # as the window would, before TF initialises
    import keras

    folder = tmp_path_factory.mktemp("model-files")
    two_io = two_io_model()
    two_io.save(folder / "two_io.keras")
    inputs = keras.Input((4,))
    doubled = keras.layers.Lambda(lambda t: t * 2.0)(inputs)
    keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(doubled)).save(folder / "lambda.keras")
    corrupt = folder / "corrupt.keras"
    corrupt.write_bytes((folder / "two_io.keras").read_bytes()[:200])
    return SimpleNamespace(
        two_io=folder / "two_io.keras", params=two_io.count_params(), lambda_keras=folder / "lambda.keras", corrupt=corrupt
    )


def make_panel(qtbot) -> RunPanel:
    panel = RunPanel()
    qtbot.addWidget(panel)
    panel.set_devices(DeviceReport((CPU0,), ()))
    return panel


def wait_opened(qtbot, panel: RunPanel) -> None:
    qtbot.waitUntil(lambda: not panel.model_choice.pending(), timeout=DESCRIBE_TIMEOUT_MS)


@pytest.mark.slow
@pytest.mark.parametrize("diagnose_runs", [True], ids=["diagnosed"])  # the run's FLOP count comes with its diagnosis
def test_open_a_two_input_model_file_and_train_it_from_the_window(ready_window, qtbot, model_files):
    panel = ready_window.run_panel
    path = str(model_files.two_io)
    panel.open_model_file(path)
    assert panel.model_choice.pending().startswith("Opening two_io.keras") and not panel.start_button.isEnabled()
    assert panel.model_choice.model_busy.isVisibleTo(panel)
    wait_opened(qtbot, panel)
    details = panel.model_info.text()
    for expected in (
        "two_io.keras", path, "<b>ids</b> (None, 6) int32", f"ids 0 to {VOCAB - 1}", "<b>feat</b> (None, 3) float32",
        "<b>cls</b> (None, 5) linear", "<b>flag</b> (None, 1) sigmoid", f"Parameters: {model_files.params:,}",
        "sparse categorical crossentropy (from logits), because 5 units with linear activation: class logits",
        "binary crossentropy, because 1 sigmoid unit(s)", "FLOPs per step: counted from the model's graph when it first trains",
    ):  # fmt: skip
        assert expected in details
    estimate = estimate_memory(model_files.params, 0, "adam")
    assert f"optimizer state {format_bytes(estimate.optimizer_bytes)} = <b>{format_bytes(estimate.total_bytes)}</b>" in details
    assert not panel.model_choice.model_busy.isVisibleTo(panel)
    assert panel.model_combo.currentData() == path and recent_models(open_settings())[0] == path
    data_choices = [panel.dataset_combo.itemData(i) for i in range(panel.dataset_combo.count())]
    assert data_choices == ["synthetic", OPEN_NPZ], "no build_dataset() entry for a .keras file"
    assert panel.model_combo.itemData(panel.model_combo.count() - 1) == OPEN_MODEL
    panel.steps_edit.setText("6")
    panel.batch_edit.setText("16")
    finished = start_and_wait(qtbot, ready_window)
    result = finished.result
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.steps_done == 6 and result.config["model"] == path
    assert result.config["model_sha256"] == file_sha256(path) and finished.run_id is not None
    assert "Completed" in panel.result_label.text()
    assert "at batch 16 (counted in the last run)" in panel.model_info.text(), "the run's FLOP count joins the details"
    assert "Measured peak in the last run:" in panel.model_info.text()
    history = ready_window.history_panel
    history.refresh()
    model_cell = history.table.item(0, column_of("model"))
    assert model_cell.text() == "two_io.keras" and file_sha256(path) in model_cell.toolTip()
    with open(path, "ab") as handle:  # the file changes after the run: the history says so
        handle.write(b"\0")
    history.refresh()
    assert history.table.item(0, column_of("model")).text() == "two_io.keras (changed)"
    ready_window.log_dock.show()
    for width, height in ((1024, 700), (1400, 900)):
        ready_window.resize(width, height)
        qtbot.waitUntil(lambda w=width: ready_window.width() == w, timeout=5000)
        QApplication.processEvents()
        for button in (panel.start_button, panel.stop_button):
            visible = button.visibleRegion().boundingRect()
            assert visible == button.rect(), f"{button.text()} is cut off at {width}x{height}: {visible} of {button.rect()}"


@pytest.mark.slow
def test_a_lambda_model_asks_for_trust_once_per_content(qtbot, model_files, tmp_path):
    answers: list[str] = []

    def answer() -> None:  # the first dialog is trusted, any later one declined
        dialog = QApplication.activeModalWidget()
        if dialog is not None and dialog.objectName() == "trustDialog":
            answers.append(dialog.message.text())
            (dialog.trust_button if len(answers) == 1 else dialog.decline_button).click()

    timer = QTimer()
    timer.timeout.connect(answer)
    timer.start(20)
    panel = make_panel(qtbot)
    panel.open_model_file(str(model_files.lambda_keras))
    qtbot.waitUntil(lambda: len(answers) == 1, timeout=10_000)
    assert "lambda.keras" in answers[0] and "Trusting this file runs its code" in answers[0]
    sha = file_sha256(model_files.lambda_keras)
    assert is_trusted(open_settings(), sha), "the trust is kept in the settings file, per content"
    wait_opened(qtbot, panel)
    copy = tmp_path / "same_content.keras"
    shutil.copy(model_files.lambda_keras, copy)
    panel.open_model_file(str(copy))  # the same content elsewhere: its description is reused only while trust is remembered
    wait_opened(qtbot, panel)
    assert len(answers) == 1, "the same content was asked about twice"
    config = panel.config()
    assert config is not None and config.model == str(copy), panel.model_choice.model_error.text()
    assert config.trust and config.model_sha256 == sha
    assert "trusted to run its code" in panel.model_info.text()
    script = tmp_path / "model.py"
    script.write_text("import keras\n", encoding="utf-8")
    remember_trust(open_settings(), file_sha256(script), str(script))
    script.write_text("import keras\nprint('changed')\n", encoding="utf-8")
    panel.open_model_file(str(script))
    qtbot.waitUntil(lambda: len(answers) == 2, timeout=10_000)
    timer.stop()
    wait_opened(qtbot, panel)
    assert "model.py" in answers[1], "changed content must be asked about again"
    assert "not trusted" in panel.model_choice.model_error.text()
    assert panel.config().model == str(copy), "declining keeps the previous model"


def test_a_corrupt_model_file_is_one_message_and_the_previous_model_stays(qtbot, model_files, tmp_path):
    panel = make_panel(qtbot)
    choose(panel.model_combo, "cnn")
    for bad, reason in ((model_files.corrupt, "not a readable .keras file"), (tmp_path / "missing.keras", "no such file")):
        panel.open_model_file(str(bad))
        wait_opened(qtbot, panel)
        error = panel.model_choice.model_error
        assert error.isVisibleTo(panel) and f"Could not open {bad.name}: " in error.text() and reason in error.text()
        assert panel.model_combo.currentData() == "cnn" and panel.config().model == "cnn"
        assert panel.start_button.isEnabled()
    choose(panel.model_combo, "mlp")
    assert not panel.model_choice.model_error.isVisibleTo(panel), "picking another model clears the message"


def test_apply_settings_fills_the_fields_and_hooks_are_recorded(qtbot, tmp_path):
    panel = make_panel(qtbot)
    panel.apply_settings({"batch_size": 256, "precision": "bfloat16", "xla": True, "steps_per_call": 20, "learning_rate": 5e-4})
    config = panel.config()
    assert (config.batch_size, config.precision, config.xla, config.steps_per_call, config.learning_rate) == (
        256,
        "bfloat16",
        True,
        20,
        5e-4,
    )
    assert panel.batch_edit.text() == "256" and panel.precision_combo.currentData() == "bfloat16"
    with pytest.raises(ValueError, match="no field for seed"):
        panel.apply_settings({"seed": 3, "batch_size": 8})
    assert panel.config().batch_size == 256, "a refused change changes nothing"
    panel.lr_edit.setText("nan")
    assert "Learning rate: 'nan' is not a number" in panel.hint_label.text()
    panel.lr_edit.setText("0.001")
    options = RunOptionsBox(open_settings(), panel.state)
    panel.add_section(options)
    options.logdir_edit.setText(str(tmp_path / "tb"))
    options.tensorboard_check.setChecked(True)
    options.profile_check.setChecked(True)
    assert panel.config().hooks.to_dict() == {"tensorboard": str(tmp_path / "tb"), "profile": "3-5"}
    with qtbot.waitSignal(panel.start_requested, timeout=1000) as blocker:
        panel.request_start()
    assert blocker.args[1].endswith("TensorBoard · profiled 3-5")


def test_the_transformer_says_it_switched_the_data_set(qtbot):
    panel = make_panel(qtbot)
    assert panel.dataset_combo.currentData() == "digits"
    choose(panel.model_combo, "transformer")
    note = panel.model_choice.dataset_note
    assert note.isVisibleTo(panel) and note.text().startswith("Data set switched from Digits 8x8 (shipped) to Synthetic")
    choose(panel.model_combo, "mlp")
    assert not note.isVisibleTo(panel)


def test_one_step_is_written_in_the_singular():
    one = RunResult(status=RunStatus.COMPLETED, config={}, steps_done=1)
    assert final_progress_text(one) == "Completed: 1 step"


def test_recent_model_files_and_last_folders_are_remembered(qtbot, tmp_path):
    settings = open_settings()
    files = [tmp_path / f"model_{i}.keras" for i in range(MAX_RECENT_MODELS + 1)]
    for file in files:
        file.write_bytes(b"PK")
        remember_model(settings, str(file))
    files[-1].unlink()
    expected = [str(f) for f in reversed(files[1:-1])]  # the oldest fell off the list, the newest is gone
    assert recent_models(settings) == expected, "most recent first, at most MAX_RECENT_MODELS, a file that is gone left out"
    panel = make_panel(qtbot)  # a new session: the menu lists them between the sample models and Open model…
    entries = [panel.model_combo.itemData(i) for i in range(panel.model_combo.count())]
    assert entries[-len(expected) - 1 : -1] == expected and entries[-1] == OPEN_MODEL
    remember_folder(settings, FOLDER_DATA, str(files[0]))
    assert last_folder(open_settings(), FOLDER_DATA) == str(tmp_path)
    assert last_folder(settings, FOLDER_MODEL, "start here") == "start here", "no folder used yet for model files"


def test_closing_the_window_stops_a_model_file_still_being_described(qtbot, tmp_path):
    pid_file = tmp_path / "pid"
    script = tmp_path / "slow_model.py"
    script.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)\n", encoding="utf-8")
    remember_trust(open_settings(), file_sha256(script), str(script))
    panel = make_panel(qtbot)
    panel.open_model_file(str(script))
    qtbot.waitUntil(pid_file.exists, timeout=DESCRIBE_TIMEOUT_MS)
    panel.close_down()  # as the window does when it closes
    assert wait_for_threads(30), "the describing thread still runs 30 s after close"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


@pytest.mark.slow
def test_an_npz_that_fits_is_used_and_one_that_does_not_is_refused_naming_the_input(qtbot, model_files, tmp_path):
    import numpy as np

    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    labels = {"cls": np.zeros(10, "int32"), "flag": np.zeros(10, "float32")}
    np.savez(good, ids=np.zeros((10, 6), "int32"), feat=np.zeros((10, 3), "float32"), **labels)
    np.savez(bad, ids=np.zeros((10, 7), "int32"), feat=np.zeros((10, 3), "float32"), **labels)
    panel = make_panel(qtbot)
    panel.open_model_file(str(model_files.two_io))
    wait_opened(qtbot, panel)
    panel.model_choice.open_data_file(str(good))
    wait_opened(qtbot, panel)
    assert panel.config().dataset == str(good), panel.model_choice.model_error.text()
    assert panel.dataset_combo.currentData() == str(good)
    panel.model_choice.open_data_file(str(bad))
    wait_opened(qtbot, panel)
    error = panel.model_choice.model_error.text()
    assert error.startswith("Data not used: ") and "input 'ids'" in error and "(10, 7)" in error, error
    assert panel.config().dataset == str(good), "the data that fitted stays chosen"


@pytest.mark.slow
def test_integer_ids_that_feed_no_embedding_ask_for_the_vocabulary(qtbot, tmp_path):
    import keras

    ids = keras.Input((4,), dtype="int32", name="tokens")
    encoded = keras.layers.CategoryEncoding(num_tokens=7, output_mode="multi_hot")(ids)
    path = tmp_path / "counts.keras"
    keras.Model(ids, keras.layers.Dense(1)(encoded)).save(path)
    panel = make_panel(qtbot)
    panel.open_model_file(str(path))
    wait_opened(qtbot, panel)
    vocab = panel.model_choice.vocab_edit
    assert vocab.isVisibleTo(panel)
    assert panel.config() is None and not panel.start_button.isEnabled()
    assert any("Vocabulary: input 'tokens' takes integer ids that feed no Embedding" in e for e in panel.errors())
    qtbot.keyClicks(vocab, "7")
    config = panel.config()
    assert config is not None and (config.model, config.vocab) == (str(path), 7)


@pytest.mark.slow
def test_a_trusted_python_file_trains_on_its_own_build_dataset_by_default(qtbot, tmp_path):
    script = write_py(tmp_path, "my_model.py", PY_MODEL)
    remember_trust(open_settings(), file_sha256(script), str(script))
    panel = make_panel(qtbot)
    panel.open_model_file(str(script))
    wait_opened(qtbot, panel)
    assert panel.dataset_combo.currentText() == "build_dataset() in the file"
    config = panel.config()
    assert config is not None and (config.model, config.dataset, config.trust) == (str(script), "build_dataset", True)
    info = panel.model_info.text()
    assert "trusted to run its code" in info and "the loss in the Python file: sparse_categorical_crossentropy" in info
    assert "Parameters: 67" in info and "(sgd, 0 slot(s))" in info, "the file's own optimizer and loss are shown"


CUSTOM_LAYER_PY = """
import keras


@keras.saving.register_keras_serializable(package="gui_test")
class Shift(keras.layers.Layer):
    def call(self, x):
        return x + 1.0
"""


def test_a_model_with_custom_layers_is_opened_with_their_py_from_the_trust_dialog(qtbot, model_files, tmp_path):
    import keras

    layers_py = write_py(tmp_path, "shift_layers.py", CUSTOM_LAYER_PY)
    namespace: dict = {}
    exec(compile(layers_py.read_text(), str(layers_py), "exec"), namespace)
    inputs = keras.Input((4,))
    path = tmp_path / "shifted.keras"
    keras.Model(inputs, keras.layers.Dense(3)(namespace["Shift"]()(inputs))).save(path)
    keras.saving.get_custom_objects().pop("gui_test>Shift")
    offered: list[str] = []

    def answer() -> None:  # the file dialog is the platform's: the test gives the path the user would pick
        dialog = QApplication.activeModalWidget()
        if dialog is not None and dialog.objectName() == "trustDialog" and not offered:
            offered.append(dialog.message.text())
            assert dialog.custom_objects_button.isVisible() and not dialog.trust_button.isVisible()
            dialog.use_custom_objects(str(layers_py))

    timer = QTimer()
    timer.timeout.connect(answer)
    timer.start(20)
    panel = make_panel(qtbot)
    panel.open_model_file(str(path))
    qtbot.waitUntil(lambda: len(offered) == 1, timeout=DESCRIBE_TIMEOUT_MS)
    timer.stop()
    assert "Shift" in offered[0] and "--custom-objects" in offered[0]
    wait_opened(qtbot, panel)
    config = panel.config()
    assert config is not None and config.model == str(path), panel.model_choice.model_error.text()
    assert config.trust and config.custom_objects == str(layers_py)
    assert "custom layers from shift_layers.py" in panel.model_info.text()


@pytest.mark.slow
def test_a_model_file_trains_with_its_own_optimizer_by_default_and_a_sample_model_gives_it_back(qtbot, tmp_path):
    """As the CLI: a file compiled with SGD trains with its SGD unless another optimizer is chosen."""
    import keras

    path = tmp_path / "sgd.keras"
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    model.save(path)
    panel = make_panel(qtbot)
    combo = panel.optimizer_combo
    assert combo.findData("file") < 0, "a sample model has no file optimizer to offer"
    panel.open_model_file(str(path))
    wait_opened(qtbot, panel)
    assert combo.currentText() == "the file's own" and panel.config().optimizer == "file"
    combo.setCurrentIndex(combo.findData("rmsprop"))
    assert panel.config().optimizer == "rmsprop", "the user's choice wins"
    combo.setCurrentIndex(combo.findData("file"))
    choose(panel.model_combo, "mlp")
    assert combo.findData("file") < 0 and combo.currentText() == "adam" and panel.config().optimizer == "adam"
