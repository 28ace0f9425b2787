"""A model file whose weights cannot fit is refused by the memory estimate before anything allocates them (issue 38, item 15).

A Dense of 10**12 units once took TensorFlow 17-20 s to refuse, in its raw OOM text. The weights a .keras
config declares are counted from its JSON (checked here against Keras's own count of a real model); a file
whose weights alone pass the memory available is one line, exit code 2. The big file is a real small model's
archive with its Dense widened in config.json: weights of that size can never be written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from core.workloads.declared_weights import declared_weights, oversized_reason

ROOT = Path(__file__).resolve().parents[3]
HUGE_UNITS = 10**12


def _cli(args: list[str], data_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data_dir), DEVICE_LAB_LOG_DIR=str(data_dir / "logs"))
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _config(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json"))


@pytest.mark.slow
def test_the_count_from_the_config_is_keras_own_for_dense_embedding_convolution_recurrent_and_nested_layers(tmp_path):
    import keras

    ids, image, series = keras.Input((8,), dtype="int32"), keras.Input((16, 16, 3)), keras.Input((8, 5))
    inner_input = keras.Input((6,))
    inner = keras.Model(inner_input, keras.layers.Dense(7)(inner_input), name="inner")
    recurrent = [
        keras.layers.LSTM(4)(keras.layers.Embedding(100, 6, name="embedding")(ids)),
        keras.layers.GRU(3)(series),
        keras.layers.GRU(3, reset_after=False)(series),
        keras.layers.SimpleRNN(2, use_bias=False)(series),
    ]
    pixels = keras.layers.Conv2D(4, (3, 1), groups=2, use_bias=False)(keras.layers.Conv2D(8, 3)(image))
    pixels = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2DTranspose(5, 2)(pixels))
    steps = keras.layers.Flatten()(keras.layers.Conv1DTranspose(2, 3)(keras.layers.Conv1D(6, 3)(series)))
    joined = keras.layers.Dense(6)(keras.layers.Concatenate()([*recurrent, pixels, steps]))
    model = keras.Model([ids, image, series], keras.layers.Dense(6)(inner(joined)))
    path = tmp_path / "many.keras"
    model.save(path)

    declared = declared_weights(_config(path))
    assert declared.params == model.count_params() and declared.bytes == 4 * model.count_params()
    assert (declared.largest_layer, declared.largest_params) == ("Embedding 'embedding'", 600)
    assert oversized_reason(_config(path), 2**30) == ""


@pytest.fixture
def huge_keras(tmp_path) -> Path:
    """A Sequential Dense 'big' on 4 features, its config.json widened to HUGE_UNITS units."""
    import keras

    small = tmp_path / "small.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="big")]).save(small)
    path = tmp_path / "big.keras"
    with zipfile.ZipFile(small) as source, zipfile.ZipFile(path, "w") as target:
        for item in source.infolist():
            content = source.read(item.filename)
            if item.filename == "config.json":
                config = json.loads(content)
                [dense] = [layer for layer in config["config"]["layers"] if layer["class_name"] == "Dense"]
                dense["config"]["units"] = HUGE_UNITS
                content = json.dumps(config).encode()
            target.writestr(item, content)
    return path


@pytest.mark.slow
def test_a_dense_of_a_trillion_units_is_refused_by_the_estimate_in_one_line_exit_2(huge_keras, tmp_path):
    out = _cli(["run", "--model", str(huge_keras), "--steps", "2", "--no-verdict"], tmp_path / "data")
    assert out.returncode == 2, out.stderr[-2000:]
    [line] = out.stderr.strip().splitlines()
    parameters = 4 * HUGE_UNITS + HUGE_UNITS
    assert line.startswith(f"error: {huge_keras}: the memory estimate refuses it: its weights alone take at least "), line
    assert "TiB" in line and f"{parameters:,} parameters" in line and f"Dense 'big' holds {parameters:,}" in line
    assert "of memory available here" in line and "OOM" not in line and "ResourceExhausted" not in line
    assert out.stdout == "" and not (tmp_path / "data" / "history.sqlite3").exists()


@pytest.mark.slow
def test_a_python_file_building_a_dense_past_memory_is_said_as_out_of_memory_in_one_line(tmp_path):
    """A .py's model is built by its code (no config to count): the allocator's refusal is said in words, not raw."""
    path = tmp_path / "huge.py"
    path.write_text(
        f"import keras\n\ndef build_model():\n    return keras.Sequential([keras.Input((4,)), keras.layers.Dense({HUGE_UNITS})])\n"
    )
    out = _cli(["run", "--model", str(path), "--trust", "--steps", "2", "--no-verdict"], tmp_path / "data")
    assert out.returncode == 2, out.stderr[-2000:]
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}: building the model ran out of memory (a float tensor of shape [4,{HUGE_UNITS}])"), line
    assert "function_node" not in line and out.stdout == ""
