"""A cluster whose every address is loopback, and `main.py worker` as a person starts it: real processes, signals and sockets.

The workers of such a cluster (the chief a `run` starts, the others from the commands it prints)
listen only in the private network they share, read from the OS's socket tables; a worker or a
run waiting for a worker that never joins stops on SIGTERM as `run` does (a second ends it at
once); where no private network can be made here the cluster is refused unless allowed.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.cluster import worker
from core.cluster.isolation import SWITCH, check_worker_isolation, isolation_problem, loopback_cluster
from core.cluster.topology import worker_commands
from core.config import ConfigError, RunConfig
from core.ports import free_ports
from core.results import RunStatus
from core.runner import run_training
from tests.core.cluster.test_cluster import Recorder
from tests.core.cluster.test_isolation import (
    connects,
    interfaces,
    is_loopback_or_wildcard,
    linux_only,
    listening,
    other_addresses_of_this_machine,
)
from tests.core.test_cli_crash_safety import Running, history

SIGNALLED_END_S = worker.STOP_GRACE_S + 10  # asked to stop, then ended after the grace; the rest is a busy machine's slack
AT_ONCE_S = 5.0


def cluster_config(**changes) -> RunConfig:
    hosts = tuple(f"127.0.0.1:{port}" for port in free_ports(2))
    settings = dict(model="mlp", dataset="digits", strategy="multi-worker", workers=2, batch_size=16, steps=20, cluster_hosts=hosts)
    return RunConfig(**{**settings, **changes})


def command_args(config: RunConfig) -> list[str]:
    """The `main.py worker` arguments `run` prints for worker 1."""
    (command,) = worker_commands(config)
    argv = shlex.split(command)
    assert argv[:3] == ["python", "main.py", "worker"]
    return argv[2:]


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    env = {k: v for k, v in os.environ.items() if k != SWITCH}
    return dict(env, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))


@pytest.fixture
def isolated(cli_env):
    problem = isolation_problem()
    if problem:
        pytest.skip(f"no private network here ({problem}): test_refused_without_a_private_network covers the refusal")


def listening_sockets(pid: int) -> dict[int, int]:
    """socket inode -> port of every listening TCP socket in the network namespace of `pid` (/proc/PID/net/tcp, tcp6)."""
    found = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                found[int(fields[9])] = int(fields[1].rpartition(":")[2], 16)
    return found


def listener(running: Running, port: int) -> psutil.Process:
    """The process, `main.py` itself or one it started, whose socket listens on `port`, wherever that socket is."""
    found: list[psutil.Process] = []

    def listens() -> bool:
        for process in [psutil.Process(running.process.pid), *psutil.Process(running.process.pid).children(recursive=True)]:
            try:
                inodes = {
                    int(os.readlink(f"/proc/{process.pid}/fd/{fd}")[8:-1])
                    for fd in os.listdir(f"/proc/{process.pid}/fd")
                    if os.readlink(f"/proc/{process.pid}/fd/{fd}").startswith("socket:[")
                }
                if any(listening_sockets(process.pid).get(inode) == port for inode in inodes):
                    found[:] = [process]
                    return True
            except (OSError, psutil.Error):
                continue
        return False

    running.wait_for(listens, f"a process listening on port {port}", every_s=0.2)
    return found[0]


def exposure(pid: int, port: int) -> list[str]:
    """What makes `pid`'s server on `port` reachable beyond the private network of its cluster: nothing, when it listens only there."""
    problems = []
    if os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net"):
        problems.append("it listens in this machine's own network")
    if interfaces(pid) != {"lo"}:
        problems.append(f"its network has interfaces {sorted(interfaces(pid))}")
    if not all(is_loopback_or_wildcard(address) for address, _ in listening(pid)):
        problems.append(f"it listens on {listening(pid)}")
    out_here = [c for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    if out_here:
        problems.append(f"this machine's network has {out_here}")
    reached = [host for host in ["127.0.0.1", *other_addresses_of_this_machine()] if connects(host, port)]
    if reached:
        problems.append(f"it answers at {reached} from out here")
    return problems


def ended_within(running: Running, seconds: float) -> float:
    """When the process ended (time.monotonic()); infinity when it still ran after `seconds`."""
    try:
        running.process.wait(seconds)
    except subprocess.TimeoutExpired:
        return float("inf")
    return time.monotonic()


def finish(running: Running) -> tuple[int, str, str]:
    """Its exit code, stdout and stderr; killed first if it still runs (its worker process dies with it)."""
    if running.process.poll() is None:
        running.process.kill()
    return running.finish()


def assert_ended(process: psutil.Process) -> None:
    try:
        assert process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        pass


@pytest.mark.slow
@linux_only
@pytest.mark.timeout(300)
@pytest.mark.parametrize("signals", [1, 2])
def test_a_worker_a_person_started_listens_only_privately_and_stops_on_sigterm(cli_env, isolated, signals):
    config = cluster_config()
    port = int(config.cluster_hosts[1].rpartition(":")[2])
    running = Running(command_args(config), cli_env)  # worker 1; the chief never comes
    try:
        child = listener(running, port)
        exposed = exposure(child.pid, port)
        running.process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        if signals == 2:
            running.wait_for(lambda: "SIGTERM: stopping worker 1" in running.stderr, "the first signal handled")
            running.process.send_signal(signal.SIGTERM)
            sent = time.monotonic()
        took = ended_within(running, SIGNALLED_END_S + 20) - sent
    finally:
        code, _, stderr = finish(running)
    assert code == worker.EXIT_NOT_COMPLETED, stderr[-2000:]
    assert took < (AT_ONCE_S if signals == 2 else SIGNALLED_END_S), f"{signals} SIGTERM took {took:.1f} s to end the worker"
    assert "Traceback" not in stderr and "SIGTERM: stopping worker 1 after the current step call" in stderr
    assert ("SIGTERM again: stopping worker 1 now" in stderr) == (signals == 2)
    assert_ended(child)
    assert exposed == []


@pytest.mark.slow
@linux_only
@pytest.mark.timeout(300)
def test_a_loopback_cluster_run_whose_worker_never_joins_listens_privately_and_stops_on_sigterm(cli_env, isolated):
    config = cluster_config()
    port = int(config.cluster_hosts[0].rpartition(":")[2])
    args = ["run", "--model", "mlp", "--data", "digits", "--strategy", "multi-worker", "--steps", "20"]
    running = Running([*args, "--cluster", ",".join(config.cluster_hosts), "--no-verdict", "--json"], cli_env)
    try:
        chief = listener(running, port)
        exposed = exposure(chief.pid, port)
        running.process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        took = ended_within(running, SIGNALLED_END_S + 20) - sent
    finally:
        code, stdout, stderr = finish(running)
    assert code == 1 and "Traceback" not in stderr, stderr[-2000:]
    assert took < SIGNALLED_END_S, f"SIGTERM took {took:.1f} s to end the run"
    assert exposed == []
    result = json.loads(stdout)
    assert result["status"] == RunStatus.STOPPED and result["steps"] == 0
    assert "Start one worker on this machine for each other address:" in stderr
    (stored,) = history(cli_env)
    assert stored["status"] == RunStatus.STOPPED
    assert_ended(chief)


def test_refused_without_a_private_network_unless_allowed(cli_env, monkeypatch):
    monkeypatch.setenv(SWITCH, "off")
    config = cluster_config()
    with pytest.raises(ConfigError) as refused:
        check_worker_isolation(config)
    assert refused.value.field == "allow_network_workers" and f"{SWITCH}=off" in str(refused.value)
    check_worker_isolation(config.with_changes(allow_network_workers=True))
    assert command_args(config.with_changes(allow_network_workers=True))[-1] == "--allow-network-workers"
    assert "--allow-network-workers" not in command_args(config)
    assert loopback_cluster(("localhost:1", "[::1]:2", "127.0.0.2:3")) and not loopback_cluster(("127.0.0.1:1", "192.0.2.7:2"))

    env = dict(cli_env, **{SWITCH: "off"})
    started = subprocess.run(
        [sys.executable, "main.py", *command_args(config)],
        cwd=Path(__file__).resolve().parents[3],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2 and "Traceback" not in started.stderr, started.stderr[-2000:]
    assert "--allow-network-workers" in started.stderr and f"{SWITCH}=off" in started.stderr


@pytest.mark.slow
@pytest.mark.heavy  # two TensorFlow worker processes
@linux_only
@pytest.mark.timeout(300)
def test_a_loopback_cluster_and_the_worker_from_its_command_train_in_one_private_network(cli_env, isolated):
    config = cluster_config(cluster_timeout_s=120)
    port = int(config.cluster_hosts[1].rpartition(":")[2])
    seen: dict[str, Any] = {}

    class StartsWorker1(Recorder):
        def on_workers_started(self, workers):
            super().on_workers_started(workers)
            seen["worker"] = Running(command_args(config), cli_env)

        def on_step_records(self, records):
            super().on_step_records(records)
            if "namespaces" not in seen:
                trainer = listener(seen["worker"], port)
                seen["exposed"] = exposure(trainer.pid, port)
                seen["namespaces"] = {os.readlink(f"/proc/{pid}/ns/net") for pid in (self.pid(0), trainer.pid)}

    recorder = StartsWorker1()
    result = run_training(config, hooks=[recorder])
    code, _, stderr = seen["worker"].finish()

    assert result.status == RunStatus.COMPLETED and result.steps_done == 20, result.message
    assert result.environment["workers_isolated"] is True
    assert code == 0 and "Worker 1 completed after 20 steps" in stderr, stderr[-2000:]
    (namespace,) = seen["namespaces"]  # the chief and the worker a person started share one network
    assert namespace != os.readlink("/proc/self/ns/net") and seen["exposed"] == []
    assert recorder.survivors() == []
