"""The headless CLI as a user runs it: real processes, exit codes, JSON keys, Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.cli.output import format_result
from core.config import PROFILE_FIELD, RunConfig
from core.history.store import RunStore
from core.results import FIGURES, RunResult, RunStatus

ROOT = Path(__file__).resolve().parents[2]
RUN_KEYS = {
    "status",
    "model",
    "strategy",
    "replicas",
    "steps",
    "warmup_s",
    "step_time_median_ms",
    "step_time_p95_ms",
    "samples_per_s",
    "final_loss",
}


@pytest.fixture
def cli_env(tmp_path):
    return dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))


def cli(args, env, timeout=240):
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_run_json_has_the_result_keys_and_exit_code_zero(cli_env):
    out = cli(["run", "--no-verdict", "--model", "mlp", "--data", "digits", "--steps", "8", "--steps-per-call", "2", "--json"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert RUN_KEYS <= set(result)
    assert {f.name for f in FIGURES} <= set(result)
    assert result["status"] == "completed" and result["steps"] == 8 and result["samples_per_s"] > 0
    assert "step 8/8" in out.stderr
    assert result["flops_per_step"] > 0 and result["flops_method"], "every run counts its FLOPs, not only a diagnosed one"


@pytest.mark.slow
def test_mirrored_run_on_logical_cpus_from_the_cli(cli_env):
    out = cli(
        [
            "run",
            "--no-verdict",
            "--model",
            "mlp",
            "--strategy",
            "mirrored",
            "--devices",
            "CPU:0,CPU:1",
            "--logical-cpus",
            "2",
            "--steps",
            "6",
            "--steps-per-call",
            "3",
            "--json",
            "--no-save",
        ],
        cli_env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["replicas"] == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--batch-size", "0"], "batch_size: got 0"),
        (["--lr", "nan"], "learning_rate: got nan"),
        (["--strategy", "one-device", "--devices", "GPU:3"], "devices: got 'GPU:3'"),
        (["--data", "imagenet"], "dataset: got 'imagenet'"),
        (["--data", "mine.npz"], "digits, mnist, fashion_mnist, cifar10, imdb (an .npz file is for your own model file: --model FILE)"),
    ],
)
def test_bad_input_exits_2_with_the_reason_on_stderr(cli_env, args, fragment):
    out = cli(["run", "--no-verdict", "--model", "mlp", "--steps", "3", *args], cli_env)
    assert out.returncode == 2
    assert fragment in out.stderr and "allowed:" in out.stderr
    assert "Traceback" not in out.stderr


def test_steps_and_epochs_together_and_a_profile_past_the_steps_are_refused(cli_env):
    out = cli(["run", "--model", "mlp", "--steps", "5", "--epochs", "2"], cli_env)  # --epochs once overrode --steps silently
    assert out.returncode == 2 and "argument --epochs: not allowed with argument --steps" in out.stderr
    out = cli(["run", "--model", "mlp", "--profile", "1000-2000"], cli_env)  # once refused only after TensorFlow started
    (line,) = out.stderr.strip().splitlines()
    assert out.returncode == 2 and line.startswith(f"error: {PROFILE_FIELD}: got (1000, 2000)") and "the run's 100 steps" in line


@pytest.mark.slow
def test_failed_run_exits_1_and_is_kept_in_history(cli_env):
    out = cli(["run", "--model", "cnn", "--batch-size", "16", "--optimizer", "sgd", "--lr", "10", "--steps", "100", "--json"], cli_env)
    assert out.returncode == 1
    assert json.loads(out.stdout)["status"] == "failed"
    assert "Lower the learning rate" in out.stderr
    history = json.loads(cli(["history", "--json"], cli_env).stdout)
    assert [run["status"] for run in history] == ["failed"]


@pytest.mark.slow
def test_models_json_lists_the_samples(cli_env):
    out = cli(["models", "--json"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert {m["name"] for m in json.loads(out.stdout)} >= {"mlp", "cnn", "resnet", "transformer"}


@pytest.mark.slow
def test_devices_json_lists_the_cpu_with_memory(cli_env):
    out = cli(["devices", "--json"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    cpu = next(d for d in data["devices"] if d["kind"] == "CPU")
    assert cpu["memory_total"] > 0 and cpu["tf_name"] == "CPU:0"
    assert any("GPU" in note for note in data["notes"])


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_prints_the_partial_result(cli_env):
    proc = subprocess.Popen(
        [sys.executable, "main.py", "run", "--model", "mlp", "--steps", "100000", "--json"],
        cwd=ROOT,
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    seen = ""
    while seen.count("/100000") < 2 and time.monotonic() < deadline:  # a progress line past the warm-up
        seen += proc.stderr.read(1)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    result = json.loads(stdout)
    assert result["status"] == "stopped"
    assert 0 < result["steps"] < 100000 and result["samples_per_s"] > 0
    assert proc.returncode == 1
    assert "Traceback" not in stderr


@pytest.mark.slow
def test_compare_json_gives_rows_with_speedup_and_export_matches(cli_env, tmp_path):
    out = cli(
        [
            "compare",
            "--model",
            "mlp",
            "--data",
            "digits",
            "--targets",
            "CPU:0;mirrored:CPU:0,CPU:1",
            "--logical-cpus",
            "2",
            "--steps",
            "12",
            "--json",
        ],
        cli_env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads(out.stdout)
    assert [row["replicas"] for row in rows] == [1, 2]
    assert all(RUN_KEYS <= set(row) and row["samples_per_s"] > 0 for row in rows)
    assert rows[0]["speedup"] == 1.0
    assert rows[1]["speedup"] == pytest.approx(rows[1]["samples_per_s"] / rows[0]["samples_per_s"])
    assert "run 2 of 2: mirrored:CPU:0,CPU:1" in out.stderr

    history = json.loads(cli(["history", "--json"], cli_env).stdout)
    assert len(history) == 2
    in_order = sorted(history, key=lambda run: run["id"])  # recorded in target order
    assert [(run["bound"], run["achieved_flops"]) for run in in_order] == [(row["bound"], row["achieved_flops"]) for row in rows]
    assert all(run["bound"] for run in in_order), "History shows the verdict Compare judged"
    ids = [str(run["id"]) for run in history]
    exported = tmp_path / "runs.json"
    assert cli(["export", *ids, "--json", str(exported)], cli_env).returncode == 0
    by_id = {run["id"]: run for run in json.loads(exported.read_text())["runs"]}
    for run in history:
        assert by_id[run["id"]]["samples_per_s"] == run["samples_per_s"]
        assert len(by_id[run["id"]]["losses"]) == 12
    twice = cli(["export", ids[0], ids[1], ids[0], "--json", str(exported)], cli_env)  # a run named twice is written once
    assert twice.returncode == 0 and [run["id"] for run in json.loads(exported.read_text())["runs"]] == [int(ids[0]), int(ids[1])]


def test_export_of_unknown_run_id_is_refused(cli_env, tmp_path):
    out = cli(["export", "999", "--csv", str(tmp_path / "x.csv")], cli_env)
    assert out.returncode == 2 and "RUN_ID: got [999]" in out.stderr


HISTORY_KEYS = {
    "id",
    "started_at",
    "label",
    "group",
    "status",
    "message",
    "model",
    "dataset",
    "strategy",
    "devices",
    "replicas",
    "batch_size",
    "steps",
    "samples_per_s",
    "step_time_median_ms",
    "step_time_p95_ms",
    "warmup_s",
    "final_loss",
}


def stored_result() -> RunResult:
    values = {"INTEGER": lambda i: 123_456_789, "REAL": lambda i: 1.5 + i, "TEXT": lambda i: "compute"}
    figures = {f.name: values[f.sql_type](i) for i, f in enumerate(FIGURES)}
    return RunResult(
        status=RunStatus.COMPLETED,
        config=RunConfig(model="mlp", steps=3).to_dict(),
        steps_done=3,
        warmup_steps=1,
        peak_memory_source="process RSS peak",
        **figures,
    )


def test_history_shows_every_figure_in_text_and_json(cli_env):
    result = stored_result()
    with RunStore.open(Path(cli_env["DEVICE_LAB_DATA_DIR"]) / "history.sqlite3") as store:
        run_id = store.save(result, label="kept")
    listed = json.loads(cli(["history", "--json"], cli_env).stdout)
    assert HISTORY_KEYS <= set(listed[0]) and {f.name for f in FIGURES} <= set(listed[0])
    assert (listed[0]["id"], listed[0]["status"], listed[0]["label"]) == (run_id, "completed", "kept")
    assert {f.name: listed[0][f.name] for f in FIGURES} == result.figures()
    out = cli(["history"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    header, row = out.stdout.splitlines()
    for f in FIGURES:
        assert f.title in header and f.format(getattr(result, f.name)) in row
    assert " backend " in header and f" {listed[0]['backend']} " in row, "a TensorFlow and a JAX run are told apart"


def test_format_result_has_a_line_per_figure():
    result = stored_result()
    text = format_result(result)
    for f in FIGURES:
        assert f.title.lower() in text
        assert f.format(getattr(result, f.name)) in text
    assert "(1 step: tracing and compilation)" in text and "(process RSS peak)" in text
    assert "status" in text and "completed" in text


@pytest.mark.slow
def test_models_prints_no_tensorflow_start_up_lines(cli_env):
    out = cli(["models"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr == "", out.stderr[-2000:]


def test_bad_tensorboard_folder_is_refused_before_tensorflow_loads(cli_env, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = cli(["run", "--model", "mlp", "--steps", "3", "--tensorboard", str(blocker / "logs")], cli_env)
    assert out.returncode == 2
    assert f"--tensorboard: got '{blocker / 'logs'}'" in out.stderr and "a folder that can be created and written" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (Path(cli_env["DEVICE_LAB_LOG_DIR"]) / "tensorflow-native.log").exists()  # TensorFlow never loaded


@pytest.mark.slow
def test_tensorboard_and_profile_from_the_cli_write_event_files_and_report_the_trace(cli_env, tmp_path):
    boards = tmp_path / "boards"
    args = ["run", "--no-verdict", "--model", "mlp", "--data", "synthetic", "--steps", "6", "--json"]
    out = cli([*args, "--tensorboard", str(boards), "--profile", "2-3"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    (run_dir,) = [path for path in boards.iterdir() if path.is_dir()]
    assert list(run_dir.glob("events.out.tfevents.*")), "the run's event files, from the hooks its config asked for"
    assert "steps 2–3" in out.stderr and str(run_dir / "plugins" / "profile") in out.stderr  # which steps, and where
    assert list((run_dir / "plugins" / "profile").rglob("*.xplane.pb"))
    assert json.loads(out.stdout)["hooks"] == {"tensorboard": str(boards), "profile": "2-3"}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--tpu", "grpc://127.0.0.1:1"], "add --strategy tpu"),
        (["--tpu-timeout", "0"], "tpu_timeout_s: got 0.0"),
    ],
)
def test_tpu_options_are_checked(cli_env, args, fragment):
    out = cli(["run", "--no-verdict", "--model", "mlp", "--steps", "3", *args], cli_env)
    assert out.returncode == 2 and fragment in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_json_stdout_stays_json_when_keras_prints_during_the_run(cli_env, tmp_path):
    # MNIST is not cached in this KERAS_HOME, so Keras prints "Downloading data from ..." to stdout and tries the
    # download through a proxy on 127.0.0.1 that refuses: nothing leaves this machine, and the run fails.
    proxy = "http://127.0.0.1:9"
    env = dict(
        cli_env,
        KERAS_HOME=str(tmp_path / "keras"),
        https_proxy=proxy,
        HTTPS_PROXY=proxy,
        http_proxy=proxy,
        HTTP_PROXY=proxy,
        no_proxy="",
        NO_PROXY="",
    )
    out = cli(["run", "--no-verdict", "--model", "mlp", "--data", "mnist", "--steps", "3", "--tpu-timeout", "7", "--json"], env)
    assert out.returncode == 1
    assert json.loads(out.stdout)["status"] == "failed"
    assert "Downloading data from" in out.stderr
    (stored,) = json.loads(cli(["history", "--json"], cli_env).stdout)
    exported = tmp_path / "failed.json"
    assert cli(["export", str(stored["id"]), "--json", str(exported)], cli_env).returncode == 0
    assert json.loads(exported.read_text())["runs"][0]["config"]["tpu_timeout_s"] == 7.0


@pytest.mark.heavy  # a cluster of processes; tests/core/cluster runs local workers in the default run
@pytest.mark.slow
def test_multi_worker_run_shows_the_join_and_is_recorded_with_the_chiefs_steps(cli_env):
    out = cli(
        [
            "run",
            "--model",
            "mlp",
            "--data",
            "digits",
            "--strategy",
            "multi-worker",
            "--workers",
            "2",
            "--steps",
            "6",
            "--allow-network-workers",
            "--json",
            "--no-verdict",  # the claim is the join and the record; the verdict is tested in test_cli_verdict
        ],
        cli_env,
        timeout=480,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["steps"] == 6
    assert "started 2 worker process(es)" in out.stderr and "waiting for the 2 workers to join the cluster" in out.stderr
    (stored,) = json.loads(cli(["history", "--json"], cli_env).stdout)
    assert (stored["status"], stored["strategy"], stored["steps"]) == ("completed", "multi-worker", 6)
