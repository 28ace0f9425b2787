"""The two small programs behind private local workers; standard library only, run by path.

`python -I -S netns.py create` unshares a user and a network namespace, maps
its own uid and gid onto themselves, brings `lo` up (ioctl SIOCSIFFLAGS, no
`ip` binary), sends {"ready": true} and stays until a line or the end of its
stdin, so the app can open its /proc/PID/ns/user and ns/net. On failure it
sends {"error": WHY}. It speaks `core.child_process`'s protocol (MESSAGE_PREFIX,
spelled out here: this program may import nothing but the standard library).

`python -I -S netns.py join USER_FD NET_FD -- ARGV...` enters those namespaces
with setns (user first: it grants the right to enter the other) and execs ARGV,
which keeps this process's pid, stdin, stdout and environment.

Both must run single-threaded (setns into a user namespace requires it),
hence a bare interpreter that imports nothing else. Python 3.11 has no
os.unshare/os.setns, so they are called through ctypes.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import socket
import struct
import sys
from pathlib import Path

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IFREQ = "16sH14x"  # struct ifreq: the interface name, then ifr_flags
MESSAGE_PREFIX = "@@device-lab message "
JOIN_FAILED_EXIT = 4
RESTRICTIVE_SYSCTLS = {  # file under /proc/sys: (the value that forbids, what it means)
    "kernel/unprivileged_userns_clone": ("0", "unprivileged user namespaces are disabled"),
    "kernel/apparmor_restrict_unprivileged_userns": ("1", "AppArmor restricts unprivileged user namespaces"),
    "user/max_user_namespaces": ("0", "user namespaces are disabled"),
    "user/max_net_namespaces": ("0", "network namespaces are disabled"),
}


def libc_call(name: str, *args: int) -> None:
    """Call a libc function that returns 0 on success; OSError naming it otherwise."""
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{name}: {os.strerror(code)}")


def enter_private_network() -> None:
    """Move this process into a new user and network namespace with only `lo`, up."""
    uid, gid = os.geteuid(), os.getegid()
    libc_call("unshare", CLONE_NEWUSER | CLONE_NEWNET)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        try:
            Path(f"/proc/self/{name}").write_text(text)
        except OSError as exc:
            raise OSError(exc.errno, f"writing /proc/self/{name}: {exc.strerror}") from exc
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            flags = struct.unpack(IFREQ, fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))[1]
            fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))
        except OSError as exc:
            raise OSError(exc.errno, f"bringing up loopback: {exc.strerror}") from exc


def explain(exc: OSError) -> str:
    """The failure, with the system setting that explains it when one does."""
    reasons = []
    for name, (forbidding, meaning) in RESTRICTIVE_SYSCTLS.items():
        try:
            if Path("/proc/sys", name).read_text().strip() == forbidding:
                reasons.append(f"{meaning} (sysctl {name.replace('/', '.')} = {forbidding})")
        except OSError:
            continue
    if not reasons and exc.errno in (errno.EPERM, errno.EACCES):
        reasons.append("the system (a container's seccomp profile or a security module) forbids new namespaces")
    return "; ".join([exc.strerror or str(exc), *reasons])


def create() -> int:
    """Make the namespace, say so, and stay in it until the app has opened it (a stop line or the end of stdin)."""
    try:
        enter_private_network()
    except OSError as exc:
        _send({"error": explain(exc)})
        return 1
    _send({"ready": True})
    sys.stdin.readline()
    return 0


def _send(message: dict) -> None:
    print(MESSAGE_PREFIX + json.dumps(message), flush=True)


def join(user_fd: int, net_fd: int, argv: list[str]) -> int:
    """Enter the namespace held by the two descriptors and exec `argv`; returns only on failure."""
    try:
        for fd, kind in ((user_fd, CLONE_NEWUSER), (net_fd, CLONE_NEWNET)):
            libc_call("setns", fd, kind)
            os.close(fd)
        os.execv(argv[0], argv)
    except OSError as exc:
        print(f"isolation: could not enter the workers' private network: {exc.strerror or exc}", file=sys.stderr)
    return JOIN_FAILED_EXIT


def main(args: list[str]) -> int:
    """`create`, or `join USER_FD NET_FD -- ARGV...`; 2 for anything else."""
    if args == ["create"]:
        return create()
    if len(args) >= 5 and args[0] == "join" and args[3] == "--" and args[1].isdigit() and args[2].isdigit():
        return join(int(args[1]), int(args[2]), args[4:])
    print("usage: netns.py create | join USER_FD NET_FD -- COMMAND...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
