"""Private local workers: real worker processes, their sockets read from the OS's socket tables, and the refusal path."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from core.child_process import MARKER, MESSAGE
from core.cluster import netns
from core.cluster.isolation import ISOLATED_NOTE, SWITCH, check_worker_isolation, isolation_problem
from core.cluster.topology import GRPC_WARNING, ClusterHook, oversubscription_warning, usable_cores
from core.config import ConfigError, RunConfig
from core.results import RunStatus
from core.runner import run_training

REPO_ROOT = Path(__file__).resolve().parents[3]
LISTEN = "0A"
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc socket tables")


def local_config(steps: int = 12, **changes) -> RunConfig:
    settings = dict(model="mlp", dataset="digits", strategy="multi-worker", workers=2, batch_size=16, steps=steps)
    return RunConfig(**{**settings, **changes})


def listening(pid: int | str) -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket in the network namespace of `pid`, from /proc/PID/net/tcp and tcp6."""
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == LISTEN:
                hex_address, hex_port = local.split(":")
                raw = bytes.fromhex(hex_address)
                # /proc prints the address as 32-bit words in host order (little-endian here)
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found.append((str(ipaddress.ip_address(words)), int(hex_port, 16)))
    return found


def interfaces(pid: int | str) -> set[str]:
    """The network interfaces of the namespace of `pid`, from /proc/PID/net/dev."""
    return {line.split(":")[0].strip() for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]}


def is_loopback_or_wildcard(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if ip.version == 6 else None
    return ip.is_loopback or ip.is_unspecified or bool(mapped and (mapped.is_loopback or mapped.is_unspecified))


def other_addresses_of_this_machine() -> list[str]:
    return [
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == socket.AF_INET and not a.address.startswith("127.")
    ]


def connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return True
    except OSError:
        return False


class SocketSnapshot(ClusterHook):
    """While the workers train (their first streamed steps), reads their namespaces' socket tables and interfaces."""

    def __init__(self):
        self.pids: list[int] = []
        self.cmdlines: list[str] = []
        self.namespaces: dict[int, str] = {}
        self.sockets: dict[int, list[tuple[str, int]]] = {}
        self.interfaces: dict[int, set[str]] = {}
        self.host_sockets: list[tuple[str, int]] = []
        self.reachable_from_outside: list[str] = []
        self.waiting: list[tuple[float, float]] = []

    def on_workers_started(self, workers):
        self.pids = [w.pid for w in workers]

    def on_cluster_waiting(self, elapsed_s, timeout_s):
        self.waiting.append((elapsed_s, timeout_s))

    def on_step_records(self, records):
        if self.sockets:
            return
        for pid in self.pids:
            self.cmdlines.append(" ".join(psutil.Process(pid).cmdline()))
            self.namespaces[pid] = os.readlink(f"/proc/{pid}/ns/net")
            self.sockets[pid] = listening(pid)
            self.interfaces[pid] = interfaces(pid)
        self.host_sockets = listening("self")
        ports = {port for found in self.sockets.values() for _, port in found}
        hosts = ["127.0.0.1", *other_addresses_of_this_machine()]
        self.reachable_from_outside = [f"{host}:{port}" for host in hosts for port in sorted(ports) if connects(host, port)]


@pytest.mark.slow
@linux_only
@pytest.mark.timeout(150)
def test_local_workers_listen_only_inside_their_private_network(monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    problem = isolation_problem()
    if problem:  # this system cannot isolate them: the run must be refused, saying why and how to allow it
        with pytest.raises(ConfigError) as refused:
            run_training(local_config())
        assert refused.value.field == "allow_network_workers" and problem in str(refused.value)
        assert "--allow-network-workers" in str(refused.value)
        return
    snapshot = SocketSnapshot()
    result = run_training(local_config(), hooks=[snapshot])

    assert result.status == RunStatus.COMPLETED, result.message
    assert len(snapshot.sockets) == 2
    own_namespace = os.readlink("/proc/self/ns/net")
    assert len(set(snapshot.namespaces.values())) == 1, "both workers share one namespace"
    assert own_namespace not in snapshot.namespaces.values()
    for pid, found in snapshot.sockets.items():
        assert snapshot.interfaces[pid] == {"lo"}, "the only interface there is loopback"
        assert found, "TensorFlow's servers listen in the workers' namespace"
        assert all(is_loopback_or_wildcard(address) for address, _ in found), found
    cluster_ports = {int(address.rpartition(":")[2]) for address in result.environment["cluster"]}
    assert cluster_ports <= {port for found in snapshot.sockets.values() for _, port in found}
    assert not cluster_ports & {port for _, port in snapshot.host_sockets}, "nothing listens on those ports out here"
    assert snapshot.reachable_from_outside == []
    assert result.environment["workers_isolated"] is True
    assert ISOLATED_NOTE in result.warnings and GRPC_WARNING not in result.warnings
    assert all("-m core.cluster.worker" in c and "netns.py" not in c for c in snapshot.cmdlines), "the launcher became the worker"
    assert snapshot.waiting and all(timeout == 300 for _, timeout in snapshot.waiting), "join progress is reported"
    assert psutil.Process().children(recursive=True) == []


@pytest.mark.timeout(30)
def test_without_isolation_a_local_run_is_refused_before_any_worker_starts(monkeypatch):
    monkeypatch.setenv(SWITCH, "off")
    config = local_config()
    with pytest.raises(ConfigError) as checked:
        check_worker_isolation(config)
    with pytest.raises(ConfigError) as refused:
        run_training(config)

    for error in (checked.value, refused.value):
        assert error.field == "allow_network_workers"
        assert f"{SWITCH}=off" in str(error) and "--allow-network-workers" in str(error)
        assert "reachable from the network" in str(error)
    assert psutil.Process().children(recursive=True) == []
    check_worker_isolation(config.with_changes(allow_network_workers=True))  # allowed: no refusal
    check_worker_isolation(local_config(cluster_hosts=("127.0.0.1:2222", "10.0.0.2:2222")))  # a real cluster is not local


@pytest.mark.heavy  # a cluster of processes; isolation itself is checked in the default run
@pytest.mark.slow
@linux_only
@pytest.mark.timeout(150)
def test_allowed_without_isolation_the_workers_run_on_this_network_and_the_result_says_so(monkeypatch):
    monkeypatch.setenv(SWITCH, "off")
    snapshot = SocketSnapshot()
    result = run_training(local_config(allow_network_workers=True), hooks=[snapshot])

    assert result.status == RunStatus.COMPLETED, result.message
    assert set(snapshot.namespaces.values()) == {os.readlink("/proc/self/ns/net")}
    cluster_ports = {int(address.rpartition(":")[2]) for address in result.environment["cluster"]}
    assert cluster_ports <= {port for _, port in snapshot.host_sockets}, "listening out here, as TensorFlow does"
    assert result.environment["workers_isolated"] is False
    assert GRPC_WARNING in result.warnings and ISOLATED_NOTE not in result.warnings
    assert any(f"not isolated (isolation is switched off ({SWITCH}=off))" in w for w in result.warnings), result.warnings
    assert {f"127.0.0.1:{port}" for port in cluster_ports} <= set(snapshot.reachable_from_outside)
    assert snapshot.cmdlines and not [c for c in snapshot.cmdlines if "allow_network_workers" in c], "a supervisor-only setting"


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_the_cli_refuses_unisolated_local_workers_with_exit_2(tmp_path):
    env = dict(os.environ, **{SWITCH: "off"}, DEVICE_LAB_DATA_DIR=str(tmp_path))
    command = [sys.executable, "main.py", "run", "--model", "mlp", "--data", "digits", "--strategy", "multi-worker", "--steps", "5"]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=50)

    assert done.returncode == 2, done.stderr[-2000:]
    assert "allow_network_workers" in done.stderr and "--allow-network-workers" in done.stderr


@linux_only
@pytest.mark.timeout(60)
def test_a_kernel_that_forbids_user_namespaces_is_detected_and_named(monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    problem = isolation_problem()
    if problem:  # this kernel forbids them already: the reason is what the refusal shows
        assert problem.strip() and "switched off" not in problem
        return
    # A helper in a user namespace of its own sets that namespace's limit to 0, as a sysctl does system-wide.
    script = (
        "from pathlib import Path; from core.cluster import isolation, netns; netns.enter_private_network(); "
        "Path('/proc/sys/user/max_user_namespaces').write_text('0'); print(isolation.isolation_problem())"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=50)

    assert done.returncode == 0, done.stderr
    forbidding, meaning = netns.RESTRICTIVE_SYSCTLS["user/max_user_namespaces"]
    assert meaning in done.stdout and f"user.max_user_namespaces = {forbidding}" in done.stdout  # what it means, and the setting
    assert Path("/proc/sys/user/max_user_namespaces").read_text().strip() != "0", "only the helper's namespace changed"


def test_the_launcher_reports_a_namespace_it_cannot_enter():
    bad_fd = 9999
    done = subprocess.run(
        [sys.executable, "-I", "-S", netns.__file__, "join", str(bad_fd), str(bad_fd), "--", sys.executable, "-c", "print('ran')"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == netns.JOIN_FAILED_EXIT
    assert "could not enter the workers' private network" in done.stderr and f"setns: {os.strerror(errno.EBADF)}" in done.stderr
    assert "ran" not in done.stdout
    assert netns.main(["join", "x"]) == 2


def test_the_namespace_helper_speaks_the_one_child_protocol():
    assert netns.MESSAGE_PREFIX == f"{MARKER}{MESSAGE} ", "netns.py spells the protocol out (it imports only the standard library)"


def test_oversubscription_warning_names_workers_cores_and_memory():
    cores = usable_cores()
    crowded = oversubscription_warning(local_config(workers=64))
    assert crowded.startswith(f"64 local workers share {cores} CPU core") and "full TensorFlow process" in crowded
    assert "GiB in all" in crowded and f"Use at most {cores} here" in crowded
    assert oversubscription_warning(local_config(workers=3), cores=2, available_bytes=64 << 30).startswith(
        "3 local workers share 2 CPU cores"
    )
    assert oversubscription_warning(local_config(workers=2), cores=2, available_bytes=64 << 30) == ""
    short = oversubscription_warning(local_config(workers=2), cores=2, available_bytes=100 << 20)
    assert short.startswith("2 local workers need about") and "more than the 100.0 MiB available now" in short
    assert oversubscription_warning(local_config(workers=64, cluster_hosts=tuple(f"h{i}:1" for i in range(64)))) == ""
    assert oversubscription_warning(RunConfig(workers=64)) == ""
