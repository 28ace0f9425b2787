"""A real, small file system for a test, without root and without touching the host: a tmpfs in a mount namespace of its own.

`on_small_disk(size, steps)` starts one process that unshares a user and a mount
namespace (as `core.cluster.netns` does for networks), makes every mount private,
mounts a tmpfs of `size` on a new empty folder and runs `steps` there, one after
another, each a command line with DEVICE_LAB_DATA_DIR in the tmpfs; "{disk}" in
an argument is the tmpfs's path. The mount is gone when that process ends. What
each step returned comes back as `Step`s. Skips the test where the system allows
no such namespace (a container's seccomp profile, a sysctl).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]

_IN_NAMESPACE = r"""
import ctypes, json, os, subprocess, sys

size, folder, steps, env_json = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
CLONE_NEWUSER, CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x10000000, 0x00020000, 0x4000, 0x40000
libc = ctypes.CDLL(None, use_errno=True)


def call(name, *args):
    if getattr(libc, name)(*args) != 0:
        print(json.dumps({"unavailable": f"{name}: {os.strerror(ctypes.get_errno())}"}))
        sys.exit(0)


uid, gid = os.geteuid(), os.getegid()
call("unshare", CLONE_NEWUSER | CLONE_NEWNS)
for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
    with open(f"/proc/self/{name}", "w") as file:
        file.write(text)
call("mount", None, b"/", None, MS_REC | MS_PRIVATE, None)  # nothing mounted here reaches the host
call("mount", b"tmpfs", folder.encode(), b"tmpfs", 0, f"size={size}".encode())
env = dict(os.environ, **json.loads(env_json), DEVICE_LAB_DATA_DIR=os.path.join(folder, "data"))
done = []
for argv in steps:
    argv = [arg.replace("{disk}", folder) for arg in argv]
    ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    done.append({"argv": argv, "code": ran.returncode, "stdout": ran.stdout, "stderr": ran.stderr})
print(json.dumps({"steps": done}))
"""


@dataclass(frozen=True)
class Step:
    argv: list[str]
    code: int
    stdout: str
    stderr: str

    def warnings(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("warning:")]


def cli(*args: str) -> list[str]:
    """A step: `python main.py ARGS...` with this interpreter."""
    return [sys.executable, str(REPO_ROOT / "main.py"), *args]


def python(code: str, *args: str) -> list[str]:
    """A step: `python -c CODE ARGS...`, the project importable."""
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r})\n{code}", *args]


FILL = python(
    "import os, sys\n"
    "fd = os.open(sys.argv[1] + '/filler', os.O_WRONLY | os.O_CREAT)\n"
    "try:\n"
    "    while os.write(fd, bytes(4096)):\n"
    "        pass\n"
    "except OSError:\n"
    "    pass\n"
    "os.close(fd)\n",
    "{disk}",
)
"""A step that fills the disk (a file of zeros until the file system refuses more)."""


def on_small_disk(size: str, steps: list[list[str]], env: dict[str, str] | None = None) -> list[Step]:
    """Run `steps` with the history on a fresh tmpfs of `size` ("64k", "1m"); skip the test where that cannot be made."""
    with tempfile.TemporaryDirectory(prefix="device-lab-small-disk-") as folder:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _IN_NAMESPACE, size, folder, json.dumps(steps), json.dumps(env or {})],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=240 * (len(steps) + 1),
        )
        assert done.returncode == 0, done.stderr[-3000:]
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        assert not list(Path(folder).iterdir()), "the tmpfs went with its namespace: nothing was written out here"
    if "unavailable" in answer:
        pytest.skip(f"no private mount namespace here ({answer['unavailable']})")
    return [Step(**step) for step in answer["steps"]]
