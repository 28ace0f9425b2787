"""Multi-worker runs with real worker processes on 127.0.0.1, and the cluster helpers."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from core.cluster.topology import (
    ClusterHook,
    WorkerInfo,
    cluster_from_environment,
    local_gpu_shares,
    worker_commands,
)
from core.cluster.worker import main as worker_main
from core.config import ConfigError, RunConfig
from core.ports import free_ports
from core.results import RunStatus
from core.runner import run_training
from core.workloads.model_file import file_sha256
from tests.step_hooks import StepsTo

LONG_RUN = 100_000
REPO_ROOT = Path(__file__).resolve().parents[3]
posix_only = pytest.mark.skipif(os.name != "posix", reason="uses POSIX signals and process groups")


def cluster_config(steps: int, **changes) -> RunConfig:
    settings = dict(model="mlp", dataset="digits", strategy="multi-worker", workers=2, batch_size=16, steps=steps)
    return RunConfig(**{**settings, **changes})


class Recorder(ClusterHook):
    """Records what the supervisor reports; `act` runs on each batch of streamed steps."""

    def __init__(self, act=None):
        self.act = act
        self.started: list[WorkerInfo] = []
        self.ended: list[WorkerInfo] = []
        self.create_times: dict[int, float] = {}
        self.replicas = None
        self.steps: list[int] = []
        self.losses: list[float] = []
        self.waiting_reports = 0

    def on_workers_started(self, workers):
        self.started = list(workers)
        self.create_times = {w.pid: psutil.Process(w.pid).create_time() for w in workers}

    def on_cluster_waiting(self, elapsed_s, timeout_s):
        self.waiting_reports += 1

    def on_run_start(self, context):
        self.replicas = context.replicas

    def on_step_records(self, records):
        self.steps.extend(r.step for r in records)
        self.losses.extend(r.loss for r in records)
        if self.act is not None:
            self.act(self)

    def on_workers_ended(self, workers):
        self.ended = list(workers)

    def pid(self, index: int) -> int:
        return next(w.pid for w in self.started if w.index == index)

    def survivors(self) -> list[int]:
        """Worker pids still running (a reused pid with another start time does not count)."""
        alive = []
        for pid, created in self.create_times.items():
            try:
                if psutil.Process(pid).create_time() == created:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        return alive


def assert_no_child_processes() -> None:
    assert psutil.Process().children(recursive=True) == []


@pytest.fixture(scope="module")
def lambda_keras(tmp_path_factory, two_cpus) -> Path:
    """A model file with a Lambda layer: it opens only when trusted, so workers train it only if the trust reaches them."""
    import keras

    inputs = keras.Input((4,))
    doubled = keras.layers.Lambda(lambda t: t * 2.0)(inputs)
    path = tmp_path_factory.mktemp("worker_model") / "lambda.keras"
    keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(doubled)).save(path)
    return path


@pytest.mark.slow
@pytest.mark.heavy  # several TensorFlow worker processes; the default tier keeps test_isolation's and the window's cluster runs
@pytest.mark.timeout(120)
def test_two_local_workers_train_stream_steps_and_exit_cleanly(lambda_keras):
    recorder = Recorder()
    streamed = []
    config = cluster_config(24, model=str(lambda_keras), dataset="synthetic", trust=True)  # the user's own model file
    result = run_training(config, hooks=[recorder, StepsTo(streamed.extend)])

    assert result.status == RunStatus.COMPLETED, result.message
    assert result.config["model_sha256"] == file_sha256(lambda_keras)  # recorded by the supervisor, checked by each worker
    assert result.memory_estimate["total_bytes"] > 0 and "2 replicas" in result.memory_estimate["note"]
    assert result.replicas == recorder.replicas == 2
    assert [r.step for r in streamed] == list(range(1, 25)) == recorder.steps
    assert list(result.losses) == [r.loss for r in streamed]
    assert result.steps_done == 24 and result.samples_per_s is not None
    assert len(result.environment["cluster"]) == 2
    assert [w.index for w in recorder.started] == [0, 1]
    assert [w.exit_code for w in recorder.ended] == [0, 0]
    assert recorder.survivors() == []
    assert_no_child_processes()


@pytest.mark.timeout(60)
def test_a_worker_whose_model_file_differs_fails_the_run_naming_the_file(lambda_keras):
    recorder = Recorder()
    config = cluster_config(4, model=str(lambda_keras), dataset="synthetic", trust=True, workers=1, model_sha256="0" * 64)
    result = run_training(config, hooks=[recorder])

    assert result.status == RunStatus.FAILED and result.steps_done == 0
    assert result.message.startswith("Worker 0 (the chief, "), result.message  # the worker's own words, relayed
    assert f"failed: {lambda_keras}: the file changed since the run was set up" in result.message
    assert "every host needs the same file at the same path" in result.message
    assert recorder.survivors() == []


@pytest.mark.slow
@pytest.mark.heavy  # several TensorFlow worker processes; the default tier keeps test_isolation's and the window's cluster runs
@posix_only
@pytest.mark.timeout(120)
@pytest.mark.parametrize("victim", [1, 0])
def test_killing_a_worker_fails_the_run_naming_it_and_ends_the_others(victim):
    killed_at = []

    def kill_victim(recorder):
        if len(recorder.steps) >= 5 and not killed_at:
            os.kill(recorder.pid(victim), signal.SIGKILL)
            killed_at.append(time.monotonic())

    recorder = Recorder(kill_victim)
    result = run_training(cluster_config(LONG_RUN), hooks=[recorder])
    returned_after = time.monotonic() - killed_at[0]

    assert result.status == RunStatus.FAILED
    assert f"Worker {victim} (" in result.message and "SIGKILL" in result.message, result.message
    assert returned_after < 30
    assert 5 <= result.steps_done < LONG_RUN
    assert list(result.losses) == recorder.losses[: result.steps_done]
    assert {w.index: w.exit_code for w in recorder.ended}[victim] == -signal.SIGKILL
    assert recorder.survivors() == []
    assert_no_child_processes()


@pytest.mark.slow
@pytest.mark.heavy  # several TensorFlow worker processes; the default tier keeps test_isolation's and the window's cluster runs
@pytest.mark.timeout(120)
def test_an_error_inside_the_workers_fails_the_run_with_their_message():
    recorder = Recorder()
    result = run_training(cluster_config(20, batch_size=15), hooks=[recorder])

    assert result.status == RunStatus.FAILED
    assert "batch_size" in result.message and "2 replicas" in result.message, result.message
    assert recorder.survivors() == []
    assert_no_child_processes()


@pytest.mark.slow
@pytest.mark.heavy  # several TensorFlow worker processes; the default tier keeps test_isolation's and the window's cluster runs
@pytest.mark.timeout(120)
def test_stop_ends_every_worker_with_the_partial_statistics():
    stop = threading.Event()

    def stop_after_five(recorder):
        if len(recorder.steps) >= 5:
            stop.set()

    recorder = Recorder(stop_after_five)
    result = run_training(cluster_config(LONG_RUN), stop_event=stop, hooks=[recorder])

    assert result.status == RunStatus.STOPPED, result.message
    assert "Stopped" in result.message
    assert 5 <= result.steps_done < LONG_RUN
    assert list(result.losses) == recorder.losses
    assert result.step_time_median_ms is not None
    assert recorder.survivors() == []
    assert_no_child_processes()


@pytest.mark.slow
@pytest.mark.heavy  # several TensorFlow worker processes; the default tier keeps test_isolation's and the window's cluster runs
@pytest.mark.timeout(150)
def test_cluster_chief_trains_with_a_worker_started_from_the_shown_command():
    hosts = tuple(f"127.0.0.1:{port}" for port in free_ports(2))
    config = cluster_config(20, cluster_hosts=hosts, cluster_timeout_s=120)
    (command,) = worker_commands(config)
    argv = shlex.split(command)
    assert argv[:3] == ["python", "main.py", "worker"]
    remote = {}

    class StartsWorker1(Recorder):
        def on_workers_started(self, workers):
            super().on_workers_started(workers)
            remote["process"] = subprocess.Popen(  # the command as shown, with this venv's python
                [sys.executable, *argv[1:]], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )

    recorder = StartsWorker1()
    result = run_training(config, hooks=[recorder])
    worker_1_stderr = remote["process"].communicate(timeout=60)[1]

    assert result.status == RunStatus.COMPLETED, result.message
    assert result.replicas == 2 and result.steps_done == 20
    assert [w.index for w in recorder.started] == [0]
    assert remote["process"].returncode == 0, worker_1_stderr[-2000:]
    assert "Worker 1 completed after 20 steps" in worker_1_stderr
    assert_no_child_processes()


@pytest.mark.slow
@pytest.mark.heavy  # several TensorFlow worker processes; the default tier keeps test_isolation's and the window's cluster runs
@pytest.mark.timeout(120)
def test_cluster_worker_that_never_connects_times_out_naming_its_address():
    hosts = tuple(f"127.0.0.1:{port}" for port in free_ports(2))
    recorder = Recorder()
    result = run_training(cluster_config(20, cluster_hosts=hosts, cluster_timeout_s=8), hooks=[recorder])

    assert result.status == RunStatus.FAILED
    assert f"Worker 1 at {hosts[1]} did not connect within 8 s" in result.message, result.message
    assert worker_commands(cluster_config(20, cluster_hosts=hosts, cluster_timeout_s=8))[0] in result.message
    assert recorder.waiting_reports >= 5
    assert recorder.survivors() == []
    assert_no_child_processes()


def test_worker_commands_give_the_exact_command_per_other_host():
    config = cluster_config(50, cluster_hosts=("10.0.0.1:2222", "10.0.0.2:2222", "node3:2222"), workers=3, seed=7)
    commands = worker_commands(config)

    assert len(commands) == 2
    for index, command in enumerate(commands, start=1):
        assert command.startswith(
            f"python main.py worker --cluster 10.0.0.1:2222,10.0.0.2:2222,node3:2222 --task-index {index} --config-json '{{"
        )
        argv = shlex.split(command)
        assert argv[-2] == "--config-json"
        assert RunConfig.from_dict(json.loads(argv[-1])) == config.with_changes(cluster_hosts=())
    assert worker_commands(cluster_config(50)) == []


@pytest.mark.parametrize(
    "gpu_ids, workers, shares",
    [
        ([], 2, [None, None]),
        (["0", "1"], 2, ["0", "1"]),
        (["0", "1", "2", "3"], 2, ["0,1", "2,3"]),
        (["4", "6", "7"], 2, ["4", "6"]),
        (["3"], 2, ["3", "3"]),
    ],
)
def test_local_workers_get_disjoint_equal_gpu_shares(gpu_ids, workers, shares):
    assert local_gpu_shares(gpu_ids, workers) == shares


def test_cluster_from_environment_reads_tf_config(monkeypatch):
    tf_config = {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 1}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    assert cluster_from_environment() == ["host0:2222", "host1:2222", "host2:2222"]


def test_cluster_from_environment_reads_a_slurm_step(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    for name, value in {
        "SLURM_PROCID": "0",
        "SLURM_STEP_NUM_TASKS": "3",
        "SLURM_STEP_NODELIST": "node[1-2]",
        "SLURM_STEP_TASKS_PER_NODE": "2,1",
    }.items():
        monkeypatch.setenv(name, value)
    assert cluster_from_environment() == ["node1:8888", "node1:8889", "node2:8888"]


def test_cluster_from_environment_is_none_outside_a_cluster(monkeypatch):
    for name in ("TF_CONFIG", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS"):
        monkeypatch.delenv(name, raising=False)
    assert cluster_from_environment() is None


@pytest.mark.parametrize(
    "args",
    [
        ["--cluster", "127.0.0.1:1,127.0.0.1:2", "--task-index", "2", "--config-json", '{"strategy": "multi-worker"}'],
        ["--cluster", "127.0.0.1", "--task-index", "0", "--config-json", '{"strategy": "multi-worker"}'],
        ["--cluster", "127.0.0.1:1", "--task-index", "0", "--config-json", '{"strategy": "default"}'],
        ["--cluster", "127.0.0.1:1", "--task-index", "0", "--config-json", "[1]"],
        ["--cluster", "127.0.0.1:1", "--task-index", "0"],
    ],
)
def test_worker_main_rejects_bad_arguments_before_starting_tensorflow(args, capsys):
    assert worker_main(args) == 2
    assert capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"cluster_hosts": ("a:1", "b:2")}, "cluster_hosts"),  # strategy is not multi-worker
        ({"strategy": "multi-worker", "cluster_hosts": ("a:1", "a:1")}, "cluster_hosts"),
        ({"strategy": "multi-worker", "workers": 3, "cluster_hosts": ("a:1", "b:2")}, "workers"),
        ({"strategy": "multi-worker", "cluster_hosts": ("a:0", "b:2")}, "cluster_hosts"),
        ({"strategy": "multi-worker", "cluster_hosts": ("a b:1", "b:2")}, "cluster_hosts"),
        ({"strategy": "multi-worker", "cluster_hosts": "a:1,b:2"}, "cluster_hosts"),
        ({"cluster_timeout_s": 1}, "cluster_timeout_s"),
    ],
)
def test_cluster_settings_are_validated(changes, field):
    with pytest.raises(ConfigError) as error:
        RunConfig(**changes)
    assert error.value.field == field


def test_cluster_hosts_are_normalized_and_survive_a_round_trip():
    config = RunConfig(strategy="multi-worker", cluster_hosts=[" node1:2222", "[::1]:2223"])
    assert config.cluster_hosts == ("node1:2222", "[::1]:2223")
    assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
