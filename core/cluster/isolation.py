"""Private local workers: a network namespace of their own with only loopback up (Linux).

TensorFlow's gRPC server listens on 0.0.0.0 (hard-coded), so a worker started
here could be reached from the network. In a fresh network namespace the only
interface is `lo`: 0.0.0.0 there is loopback, so nothing outside the namespace,
on this machine or another, reaches the workers, while all local workers of a
run share it and meet on 127.0.0.1. The network namespace belongs to a new user
namespace, so no privilege is needed (and root works the same way).

How: `PrivateNetwork.create()` starts `netns.py create` (`core.cluster.netns`)
through the one runner (`core.child_process.Child`); it makes the namespace
and says it is ready; the app opens that process's /proc/PID/ns/user and
ns/net (the two descriptors keep the namespace alive until `close()`) and
asks it to stop. Each worker starts as `netns.py join
USER_FD NET_FD -- ARGV...`, which enters the namespace and execs ARGV: the
worker keeps the pid, stdin and stdout it was started with.

A cluster whose every address is loopback (`run --cluster 127.0.0.1:P,127.0.0.1:Q`
and the `main.py worker` commands it prints) is on this machine alone, so its
workers are private too, though started by different processes: the first of them
makes the network and records where it is held (its pid, its two descriptors) in a
file named after the cluster, in a folder only this user can write
(`PrivateNetwork.shared`); the others open that process's descriptors through
/proc and join it, so all of them meet on 127.0.0.1 and nothing listens outside.

Set DEVICE_LAB_ISOLATION=off to make isolation unavailable: the refusal path
can be tried anywhere, and a system whose namespaces misbehave can opt out.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import stat
import struct
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import psutil

from core.child_process import Child
from core.cluster import netns
from core.config import ConfigError, RunConfig

SWITCH = "DEVICE_LAB_ISOLATION"
CREATE_TIMEOUT_S = 30.0
RELEASE_GRACE_S = 5.0
ISOLATED_NOTE = "The local workers ran isolated: in a private network namespace with only loopback, unreachable from the network."
CLUSTER_ISOLATED_NOTE = (
    "This cluster's workers run isolated: in a private network namespace with only loopback that they share, unreachable from the network."
)
_known: dict[str, str] = {}
_known_lock = threading.Lock()
NS_GET_OWNER_UID = 0xB704  # ioctl (linux/nsfs.h): the uid that owns a user namespace
_SAME_PROCESS_S = 0.01  # create times this close name the same process


class IsolationUnavailable(RuntimeError):
    """This system cannot give local workers a private network; the message says why."""


class PrivateNetwork:
    """A user + network namespace with only loopback, held open by two descriptors of this process."""

    def __init__(self, user_fd: int, net_fd: int):
        self._fds = (user_fd, net_fd)
        self._record: Path | None = None  # the file that makes this network known to a loopback cluster's other workers

    @classmethod
    def create(cls, timeout_s: float = CREATE_TIMEOUT_S) -> PrivateNetwork:
        """Make a new private network; raises IsolationUnavailable naming the reason."""
        switched_off = _switched_off()
        if switched_off:
            raise IsolationUnavailable(switched_off)
        if not sys.platform.startswith("linux"):
            raise IsolationUnavailable("private network namespaces exist only on Linux")
        with Child(_helper_argv("create"), "the namespace helper", limit_s=timeout_s, stop_grace_s=RELEASE_GRACE_S) as holder:
            said = next(holder.messages(), {})  # its first message, or none: it ended (or was killed at the limit) first
            if not said.get("ready"):
                holder.wait()
                raise IsolationUnavailable(said.get("error") or holder.describe_end())
            network = cls(*_open_namespaces(holder.pid))
            holder.stop()  # let it exit: the descriptors hold the namespace now
            holder.wait()
        return network

    @classmethod
    def shared(cls, cluster: Sequence[str], timeout_s: float = CREATE_TIMEOUT_S) -> PrivateNetwork:
        """The private network of the loopback cluster `cluster`: joined when a live process of this user made it,
        else made here and recorded for the cluster's other workers. Raises IsolationUnavailable naming the reason."""
        switched_off = _switched_off()
        if switched_off:
            raise IsolationUnavailable(switched_off)
        if not sys.platform.startswith("linux"):
            raise IsolationUnavailable("private network namespaces exist only on Linux")
        record = _cluster_folder() / f"{hashlib.sha256(','.join(cluster).encode()).hexdigest()[:32]}.json"
        try:
            fd = os.open(record, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise IsolationUnavailable(f"cannot record the cluster's private network in {record}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # one maker per cluster; released when fd closes
            joined = _join_recorded(fd)
            if joined is not None:
                return joined
            network = cls.create(timeout_s)
            network._record = record
            user_fd, net_fd = network.pass_fds
            known = {"pid": os.getpid(), "started": psutil.Process().create_time(), "user_fd": user_fd, "net_fd": net_fd}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(known).encode(), 0)
            return network
        finally:
            os.close(fd)

    @property
    def pass_fds(self) -> tuple[int, int]:
        """The descriptors a worker process must inherit (Popen's pass_fds)."""
        return self._fds

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The command line that runs `argv` inside this network (pass `pass_fds` along)."""
        return _helper_argv("join", *map(str, self._fds), "--", *argv)

    def close(self) -> None:
        """Let the namespace go once its last worker has ended (and forget the record that made it known)."""
        if self._record is not None:
            _forget(self._record, self._fds)
            self._record = None
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = (-1, -1)


def isolation_problem() -> str:
    """Why local workers cannot be isolated here; "" when they can. Tried once per process and switch value."""
    key = os.environ.get(SWITCH, "")
    with _known_lock:
        if key not in _known:
            try:
                PrivateNetwork.create().close()
                _known[key] = ""
            except IsolationUnavailable as exc:
                _known[key] = str(exc)
        return _known[key]


def known_isolation_problem() -> str | None:
    """`isolation_problem()` if already known in this process (None: not tried yet), without trying."""
    return _switched_off() or _known.get(os.environ.get(SWITCH, ""))


def is_loopback(address: str) -> bool:
    """Whether a host:port names this machine's loopback (127.0.0.0/8, ::1, localhost)."""
    host = address.rpartition(":")[0].strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_cluster(cluster: Sequence[str]) -> bool:
    """Whether every worker of `cluster` is on this machine's loopback: the cluster can run in a private network."""
    return bool(cluster) and all(is_loopback(address) for address in cluster)


def private_workers(config: RunConfig) -> bool:
    """Whether `config`'s workers run in a private network: local workers, or a cluster whose every address is loopback."""
    return config.strategy == "multi-worker" and (not config.cluster_hosts or loopback_cluster(config.cluster_hosts))


def check_worker_isolation(config: RunConfig) -> None:
    """Refuse (ConfigError) private workers (`private_workers`) that cannot be isolated here unless `allow_network_workers`.

    For the CLI and other callers that want the refusal before anything starts;
    `open_worker_network` refuses the same way when the run starts.
    """
    if private_workers(config) and not config.allow_network_workers:
        problem = isolation_problem()
        if problem:
            raise refusal(problem)


def open_worker_network(config: RunConfig) -> tuple[PrivateNetwork | None, str]:
    """The private network for `config`'s workers, or (None, why not) where running exposed is allowed.

    Local workers get a network of their own; a loopback cluster (`config.cluster_hosts`) the one its
    workers share (`PrivateNetwork.shared`). Raises ConfigError when isolation is unavailable and
    `config.allow_network_workers` is False.
    """
    return open_cluster_network(config.cluster_hosts, config.allow_network_workers)


def open_cluster_network(cluster: Sequence[str], allow_network_workers: bool) -> tuple[PrivateNetwork | None, str]:
    """`open_worker_network` for a cluster (empty: local workers of their own) and the permission to run exposed."""
    try:
        return (PrivateNetwork.shared(cluster) if cluster else PrivateNetwork.create()), ""
    except IsolationUnavailable as exc:
        if allow_network_workers:
            return None, str(exc)
        raise refusal(str(exc)) from exc


def refusal(problem: str) -> ConfigError:
    """The error for local workers that cannot be isolated and were not allowed to run exposed."""
    return ConfigError(
        "allow_network_workers",
        False,
        f"true (on the command line --allow-network-workers) to start local workers that cannot be isolated here "
        f"({problem}): their TensorFlow servers would be reachable from the network",
    )


def exposed_note(problem: str) -> str:
    """The result's note for local workers that ran without isolation (allowed)."""
    return f"The local workers were not isolated ({problem}): their servers listened on every network interface."


def _switched_off() -> str:
    value = os.environ.get(SWITCH, "").strip().lower()
    return f"isolation is switched off ({SWITCH}={value})" if value in ("off", "0", "no", "false") else ""


def _helper_argv(*args: str) -> list[str]:
    """A bare, isolated interpreter (-I -S: nothing but the standard library) running `netns.py`."""
    return [sys.executable, "-I", "-S", netns.__file__, *args]


def _cluster_folder() -> Path:
    """The folder where loopback clusters record their private networks: this user's own, no one else may write it."""
    folder = Path(tempfile.gettempdir()) / f"device-lab-{os.geteuid()}-clusters"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        status = os.lstat(folder)
    except OSError as exc:
        raise IsolationUnavailable(f"cannot make the folder {folder} for the cluster's private network: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o022:
        raise IsolationUnavailable(
            f"{folder} is not a folder that only this user can write, so the cluster's private network is not shared there"
        )
    return folder


def _join_recorded(record_fd: int) -> PrivateNetwork | None:
    """The network a record names, when its process still lives and holds a user namespace of this user; else None."""
    try:
        known = json.loads(os.pread(record_fd, 4096, 0) or b"{}")
        pid, started, user_fd, net_fd = (known[key] for key in ("pid", "started", "user_fd", "net_fd"))
        if abs(psutil.Process(int(pid)).create_time() - float(started)) >= _SAME_PROCESS_S:
            return None  # that process has ended; its pid names another now
    except (ValueError, KeyError, TypeError, psutil.Error):
        return None
    opened: list[int] = []
    try:
        for fd in (user_fd, net_fd):
            opened.append(os.open(f"/proc/{int(pid)}/fd/{int(fd)}", os.O_RDONLY | os.O_CLOEXEC))
        kinds = [os.readlink(f"/proc/self/fd/{fd}").partition(":")[0] for fd in opened]
        owner = struct.unpack("I", fcntl.ioctl(opened[0], NS_GET_OWNER_UID, bytes(4)))[0]
        if kinds == ["user", "net"] and owner == os.geteuid():
            return PrivateNetwork(opened[0], opened[1])
    except OSError:
        pass
    for fd in opened:
        os.close(fd)
    return None


def _forget(record: Path, fds: tuple[int, int]) -> None:
    """Remove `record` if it still names this process's network (`fds`)."""
    with contextlib.suppress(OSError):
        fd = os.open(record, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            known = json.loads(os.pread(fd, 4096, 0) or b"{}")
            if (known.get("pid"), known.get("user_fd"), known.get("net_fd")) == (os.getpid(), *fds):
                record.unlink()
        except ValueError:
            pass
        finally:
            os.close(fd)


def _open_namespaces(pid: int) -> tuple[int, int]:
    """Descriptors of the helper's user and network namespaces (they outlive the helper)."""
    opened: list[int] = []
    try:
        for kind in ("user", "net"):
            opened.append(os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC))
    except OSError as exc:
        for fd in opened:
            os.close(fd)
        raise IsolationUnavailable(f"cannot open the new namespace: {exc.strerror or exc}") from exc
    return opened[0], opened[1]
