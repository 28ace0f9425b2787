"""Every argument checked before TensorFlow is imported: one line naming the option and its rule, exit code 2.

All the bad inputs run in one child process, each through the CLI's `main` in
that process, which then says whether `tensorflow` was imported: a real check
that nothing started TensorFlow before refusing the input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli import joined_values
from core.machine.tpu import detect_tpu_cheaply
from core.tuning.autotune import AutotuneResult, TunePoint
from tests.core.read_only_paths import read_only

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import contextlib, io, json, sys
from core.cli import main
answers = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    answers.append({"code": code, "stderr": err.getvalue(), "tensorflow": "tensorflow" in sys.modules})
print(json.dumps(answers))
"""

BAD_INPUTS = [
    # (argv, the option named, words of the rule)
    (["sweep", "--model", "mlp", "--batch-sizes", "8,8"], "--batch-sizes", "each value once (batch 8 is given more than once)"),
    (["sweep", "--model", "mlp", "--batch-sizes", "-4,8"], "--batch-sizes", "whole numbers from 1"),
    (["sweep", "--model", "mlp", "--batch-sizes", "8,16", "--logical-cpus", "-1"], "--logical-cpus", "a whole number from 0 (no split) to"),
    (["devices", "--logical-cpus", "-1"], "--logical-cpus", "a whole number from 0 (no split) to"),
    (["max-batch", "--model", "mlp", "--memory-limit", ""], "--memory-limit", "to this machine's RAM ("),
    (["max-batch", "--model", "mlp", "--memory-limit", "-1GiB"], "--memory-limit", "to this machine's RAM ("),
    (["autotune", "--model", "mlp", "--memory-limit", "1PiB"], "--memory-limit", "to this machine's RAM ("),
    (["max-batch", "--model", "mlp", "--target", "GPU:99"], "devices", "devices this machine has:"),
    (["sweep", "--model", "mlp", "--batch-sizes", "8,16", "--target", "GPU:99"], "devices", "devices this machine has:"),
    (["autotune", "--model", "mlp", "--target", "GPU:99"], "devices", "devices this machine has:"),
    (["run", "--model", "mlp", "--strategy", "one-device", "--devices", "GPU:99"], "devices", "devices this machine has:"),
    (["run", "--model", ""], "--model", "got an empty value; allowed: a sample model's name or a model file"),
    (["compare", "--model", "mlp", "--data", "", "--targets", "CPU:0"], "--data", "got an empty value"),
    (["run", "--model", "mlp", "--batch-size", "-4"], "batch_size", "allowed:"),
    (["run", "--model", "mlp", "--vocab", "0"], "--vocab", "a whole number from 2 to"),
    (["run", "--model", "mlp", "--vocab", "ids=2,ids=3"], "--vocab", "N or NAME=N (comma-separated)"),
    (["run", "--model", "mlp", "--vocab", "=5"], "--vocab", "N or NAME=N (comma-separated)"),
    (["run", "--model", "mlp", "--vocab", "segment_ids=1"], "--vocab", "a whole number from 2 to"),
    (["run", "--model", "mlp", "--steps-per-call", "0"], "steps_per_call", "allowed:"),
    (["autotune", "--model", "mlp", "--budget-s", "-5"], "--budget-s", "seconds from"),
    (["max-batch", "--model", "mlp", "--tolerance", "-0.5"], "--tolerance", "a fraction from 0.001 to 1"),
    (["compare", "--model", "mlp", "--targets", "CPU:0;GPU:x"], "targets", "allowed:"),
    (["compare", "--model", "mlp", "--targets", "CPU:0", "--rounds", "0"], "--rounds", "a whole number from 1 to 100"),
    (["sweep", "--model", "mlp", "--batch-sizes", "8,16", "--rounds", "²"], "--rounds", "a whole number from 1 to 100"),
    (["autotune", "--model", "mlp", "--rounds", "101"], "--rounds", "a whole number from 1 to 100"),
    (["run", "--model", "mlp", "--logical-cpus", "²"], "--logical-cpus", "a whole number from 0 (no split) to"),
    (["export", "1", "--csv", ""], "--csv", "a file path to write"),
    (["compare", "--model", "mlp", "--targets", "CPU:²"], "targets", "allowed:"),
    (["run", "--model", "mlp", "--strategy", "one-device", "--devices", "CPU:²"], "devices", "device names such as"),
    (["export", "1", "--json", " "], "--json", "a file path to write"),
]


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("arguments")
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(folder / "data"), DEVICE_LAB_LOG_DIR=str(folder / "logs"))
    argvs = [argv for argv, _, _ in BAD_INPUTS]
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argvs)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("index", range(len(BAD_INPUTS)), ids=[" ".join(argv) for argv, _, _ in BAD_INPUTS])
def test_a_bad_argument_is_refused_in_one_line_naming_the_option_and_its_rule_before_tensorflow(answers, index) -> None:
    argv, option, rule = BAD_INPUTS[index]
    answer = answers[index]
    lines = answer["stderr"].strip().splitlines()
    assert answer["code"] == 2 and len(lines) == 1, answer
    assert lines[0].startswith("error: ") and option in lines[0] and rule in lines[0], lines[0]
    assert not answer["tensorflow"], f"{argv} imported TensorFlow before refusing its input"


def test_a_gpu_target_on_a_machine_without_one_says_nvml_found_none(answers) -> None:
    from core.machine.gpu import load_nvml

    nvml, _ = load_nvml()
    if nvml is not None and nvml.nvmlDeviceGetCount():
        pytest.skip("this machine has a GPU: GPU:99 is refused by its index instead (the cases above)")
    (line,) = answers[7]["stderr"].splitlines()
    assert "CPU:0 only: no GPU found by NVML" in line


def test_a_tpu_device_on_a_machine_without_one_is_refused_before_tensorflow(tmp_path) -> None:
    if detect_tpu_cheaply():
        pytest.skip("this machine shows a TPU: TensorFlow counts its cores as the run starts")
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"))
    argvs = [["max-batch", "--model", "mlp", "--target", "TPU:0"]]
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argvs)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    (answer,) = json.loads(out.stdout)
    assert answer["code"] == 2 and "no TPU chip on PCI" in answer["stderr"] and not answer["tensorflow"], answer


def test_values_that_start_with_a_dash_reach_their_option() -> None:
    options = {"--memory-limit", "--batch-sizes"}
    assert joined_values(["max-batch", "--memory-limit", "-1GiB", "--json"], options) == ["max-batch", "--memory-limit=-1GiB", "--json"]
    assert joined_values(["sweep", "--batch-sizes", "--json"], options) == [
        "sweep",
        "--batch-sizes",
        "--json",
    ]  # a missing value stays missing


def test_history_on_an_empty_unwritable_data_folder_lists_no_run_with_a_warning(tmp_path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    with read_only(data):
        out = subprocess.run(
            [sys.executable, "main.py", "history", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    assert out.returncode == 0 and json.loads(out.stdout) == [], out.stderr
    assert out.stderr.startswith("warning: Can not create the run history") and "No run is stored there yet." in out.stderr


def test_an_autotune_that_measured_nothing_names_no_best() -> None:
    from core.cli.tuning_commands import format_autotune

    start = {"batch_size": 64, "steps_per_call": 1, "precision": "off", "xla": False}
    failed = TunePoint("start", start, "failed", message="No TPU answered at 'grpc://127.0.0.1:1'.")
    result = AutotuneResult(start, start, None, None, None, (failed,), 30.0, 2.0, error=failed.message)
    text = format_autotune(result)
    assert not result.measured and "best" not in text and "No TPU answered" in text
