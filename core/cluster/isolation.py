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

Set DEVICE_LAB_ISOLATION=off to make isolation unavailable: the refusal path
can be tried anywhere, and a system whose namespaces misbehave can opt out.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence

from core.child_process import Child
from core.cluster import netns
from core.config import ConfigError, RunConfig

SWITCH = "DEVICE_LAB_ISOLATION"
CREATE_TIMEOUT_S = 30.0
RELEASE_GRACE_S = 5.0
ISOLATED_NOTE = "The local workers ran isolated: in a private network namespace with only loopback, unreachable from the network."
_known: dict[str, str] = {}
_known_lock = threading.Lock()


class IsolationUnavailable(RuntimeError):
    """This system cannot give local workers a private network; the message says why."""


class PrivateNetwork:
    """A user + network namespace with only loopback, held open by two descriptors of this process."""

    def __init__(self, user_fd: int, net_fd: int):
        self._fds = (user_fd, net_fd)

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

    @property
    def pass_fds(self) -> tuple[int, int]:
        """The descriptors a worker process must inherit (Popen's pass_fds)."""
        return self._fds

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The command line that runs `argv` inside this network (pass `pass_fds` along)."""
        return _helper_argv("join", *map(str, self._fds), "--", *argv)

    def close(self) -> None:
        """Let the namespace go once its last worker has ended."""
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


def check_worker_isolation(config: RunConfig) -> None:
    """Refuse (ConfigError) local workers that cannot be isolated here unless `allow_network_workers`.

    For the CLI and other callers that want the refusal before anything starts;
    `open_worker_network` refuses the same way when the run starts.
    """
    if config.strategy == "multi-worker" and not config.cluster_hosts and not config.allow_network_workers:
        problem = isolation_problem()
        if problem:
            raise refusal(problem)


def open_worker_network(config: RunConfig) -> tuple[PrivateNetwork | None, str]:
    """The private network for `config`'s local workers, or (None, why not) where running exposed is allowed.

    Raises ConfigError when isolation is unavailable and `config.allow_network_workers` is False.
    """
    try:
        return PrivateNetwork.create(), ""
    except IsolationUnavailable as exc:
        if config.allow_network_workers:
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
