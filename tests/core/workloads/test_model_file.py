"""Opening model files: what loads, what needs trust, and one clear message for each bad file."""

from __future__ import annotations

import hashlib

import pytest

from core.workloads.model_file import ModelFileError, check_model_path, file_sha256, load_model_file
from core.workloads.user_workload import open_user_workload
from tests.core.workloads.conftest import PY_MODEL, write_py


def test_sha256_is_the_content_hash(two_io_keras):
    assert file_sha256(two_io_keras) == hashlib.sha256(two_io_keras.read_bytes()).hexdigest()
    assert check_model_path(two_io_keras).sha256 == file_sha256(two_io_keras)


def test_lambda_model_is_refused_without_trust_and_loads_with_it(lambda_keras):
    with pytest.raises(ModelFileError) as refused:
        open_user_workload(lambda_keras)
    assert refused.value.needs_trust
    assert str(lambda_keras) in str(refused.value) and "Lambda" in str(refused.value) and "trust" in str(refused.value)
    model = load_model_file(check_model_path(lambda_keras, trust=True))
    assert [type(layer).__name__ for layer in model.layers][-2:] == ["Lambda", "Dense"]


def test_python_file_is_refused_without_trust_and_its_code_does_not_run(tmp_path):
    marker = tmp_path / "ran.txt"
    path = write_py(tmp_path, "model.py", PY_MODEL + f"    open({str(marker)!r}, 'w').close()\n")
    with pytest.raises(ModelFileError) as refused:
        open_user_workload(path)
    assert refused.value.needs_trust and str(path) in str(refused.value)
    assert not marker.exists()
    open_user_workload(path, trust=True)
    assert marker.exists()


def test_python_file_errors_name_the_problem(tmp_path):
    broken = write_py(tmp_path, "broken.py", "def build_model(:\n")
    with pytest.raises(ModelFileError, match="SyntaxError at line 1"):
        open_user_workload(broken, trust=True)
    nothing = write_py(tmp_path, "nothing.py", "x = 1\n")
    with pytest.raises(ModelFileError, match="no build_model"):
        open_user_workload(nothing, trust=True)
    wrong = write_py(tmp_path, "wrong.py", "def build_model():\n    return 42\n")
    with pytest.raises(ModelFileError, match="returned int, not a Keras model"):
        open_user_workload(wrong, trust=True)


@pytest.mark.slow
def test_corrupt_and_truncated_files_are_one_clear_message_each(tmp_path, two_io_keras, compiled_h5):
    garbage = tmp_path / "garbage.keras"
    garbage.write_bytes(b"this is not a model")
    truncated_keras = tmp_path / "truncated.keras"
    truncated_keras.write_bytes(two_io_keras.read_bytes()[:300])
    truncated_h5 = tmp_path / "truncated.h5"
    truncated_h5.write_bytes(compiled_h5.read_bytes()[:2000])
    not_h5 = tmp_path / "text.h5"
    not_h5.write_text("hello")
    expected = {
        garbage: "not a readable .keras file",
        truncated_keras: "not a readable .keras file",
        truncated_h5: "corrupt or truncated",
        not_h5: "not an HDF5 file",
    }
    for path, reason in expected.items():
        with pytest.raises(ModelFileError) as error:
            open_user_workload(path)
        assert str(error.value).startswith(f"{path}: ") and reason in str(error.value)
        assert not error.value.needs_trust


@pytest.mark.slow
def test_savedmodel_folder_is_refused_with_how_to_resave(tmp_path):
    import tensorflow as tf

    module = tf.Module()
    module.v = tf.Variable(1.0)
    folder = tmp_path / "exported"
    tf.saved_model.save(module, str(folder))
    for path in (folder, folder / "saved_model.pb"):
        with pytest.raises(ModelFileError) as error:
            open_user_workload(path)
        message = str(error.value)
        assert message.startswith(f"{folder}: ") and "SavedModel" in message
        assert "cannot train" in message and 'model.save("m.keras")' in message


def test_missing_empty_folder_unknown_and_weights_only_files(tmp_path):
    import keras

    empty = tmp_path / "empty.keras"
    empty.write_bytes(b"")
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"\x08\x01")
    weights = tmp_path / "only.weights.h5"
    keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]).save_weights(weights)
    expected = {
        tmp_path / "missing.keras": "no such file",
        empty: "empty",
        tmp_path: "a folder, not a model file",
        onnx: "unknown model file type '.onnx'",
        weights: "weights only",
    }
    for path, reason in expected.items():
        with pytest.raises(ModelFileError) as error:
            open_user_workload(path)
        assert str(error.value).startswith(f"{path}: ") and reason in str(error.value), str(error.value)


def test_custom_class_says_how_to_provide_it(tmp_path):
    import keras

    @keras.saving.register_keras_serializable(package="device_lab_test")
    class AddOne(keras.layers.Layer):
        def call(self, x):
            return x + 1.0

    inputs = keras.Input((3,))
    path = tmp_path / "custom.keras"
    keras.Model(inputs, keras.layers.Dense(2)(AddOne()(inputs))).save(path)
    keras.saving.get_custom_objects().pop("device_lab_test>AddOne")
    with pytest.raises(ModelFileError) as error:
        open_user_workload(path, trust=True)
    assert "AddOne" in str(error.value) and "--custom-objects" in str(error.value) and not error.value.needs_trust
    layers_py = write_py(
        tmp_path,
        "my_layers.py",
        """
        import keras

        @keras.saving.register_keras_serializable(package="device_lab_test")
        class AddOne(keras.layers.Layer):
            def call(self, x):
                return x + 1.0
        """,
    )
    with pytest.raises(ModelFileError) as untrusted:
        open_user_workload(path, custom_objects=layers_py)
    assert untrusted.value.needs_trust and "--trust" in str(untrusted.value)
    described = open_user_workload(path, trust=True, custom_objects=layers_py).describe()
    assert described["custom_objects"] == str(layers_py) and described["params"] == 8


def test_a_load_error_keeps_its_cause_whole_and_never_cuts_a_word():
    from core.workloads.model_file import MAX_CAUSE_CHARS, load_error_cause

    config = "{" + ", ".join(f"'option_{i}': {i}" for i in range(300)) + "}"
    keras_style = TypeError(
        f"Error when deserializing class 'DepthwiseConv2D' using config={config}.\n\n"
        "Exception encountered: Unrecognized keyword arguments passed to DepthwiseConv2D: {'groups': 2}"
    )
    assert load_error_cause(keras_style) == "Unrecognized keyword arguments passed to DepthwiseConv2D: {'groups': 2}"
    long_cause = ValueError(" ".join(["averyveryverylongword"] * 200))
    shortened = load_error_cause(long_cause)
    assert len(shortened) <= MAX_CAUSE_CHARS + 2 and shortened.endswith("averyveryverylongword …")


def test_a_class_from_a_package_not_installed_names_the_package_and_the_python(tmp_path):
    import json
    import sys
    import zipfile

    from core.workloads.model_file import missing_package_reason

    path = tmp_path / "detector.keras"
    config = {"module": "keras_cv.src.models.yolo", "class_name": "YOLOV8Detector", "config": {}, "registered_name": "YOLOV8Detector"}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("config.json", json.dumps(config))
        zf.writestr("metadata.json", json.dumps({"keras_version": "3.15.1"}))
    with pytest.raises(ModelFileError) as error:
        open_user_workload(path)
    message = str(error.value)
    assert "YOLOV8Detector" in message and "keras-cv" in message and f"{sys.executable} -m pip install keras-cv" in message, message
    hub = missing_package_reason("keras_hub", "GPT2CausalLM")
    assert "GPT2CausalLM" in hub and 'pip install -e ".[hub]"' in hub and sys.executable in hub
