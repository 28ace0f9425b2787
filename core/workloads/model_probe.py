"""Describe a user's model file in a child process with a time limit.

A user's file can hang or take the process down (its code runs when trusted,
and a corrupt file can crash a native loader), so the app inspects it in
`python -m core.workloads.model_probe`, which writes a JSON answer to a file.
A child that overruns its limit is killed with its process group; a crash is a
ModelFileError, never a hang or a crash of the caller. The child sees no GPU:
describing needs none, and it must not take the GPU's memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from core.child_process import child_env, exit_description, kill_process_group, last_line, read_answer
from core.workloads.model_file import ModelFileError, check_model_path
from core.workloads.user_workload import open_user_workload

DEFAULT_TIMEOUT_S = 120.0
STDERR_TAIL_CHARS = 600
STOP_POLL_S = 0.2


def describe_model_file(
    path: str | os.PathLike,
    trust: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    vocab: int | None = None,
    data: str | None = None,
    batch_size: int | None = None,
    stop_event: threading.Event | None = None,
    custom_objects: str | None = None,
) -> dict[str, Any]:
    """The model's description (see UserWorkload.describe), worked out in a child process.

    `data` is the run's data ("synthetic", "build_dataset", an .npz path; None:
    the file's default), resolved in the description's "data". With `batch_size`
    the child also checks that data against the model (`UserWorkload.check_data`),
    so data that does not fit is refused before a run starts. Setting `stop_event`
    kills the child within STOP_POLL_S (ModelFileError "stopped"). `custom_objects`
    is a trusted .py whose classes the child registers before loading the file.

    Raises ModelFileError: at once, without a child, for what `check_model_path`
    refuses (missing, corrupt, untrusted .py or Lambda); else the problem the child
    found (with `needs_trust` when trust would open it; a ModelDataError's path is
    the data file's), or a child that ran past `timeout_s`, was stopped or crashed.
    """
    source = check_model_path(path, trust, custom_objects)  # a missing, corrupt or untrusted file is refused before any child starts
    file = source.path
    with tempfile.TemporaryDirectory(prefix="device-lab-probe-") as folder:
        answer_file = Path(folder) / "answer.json"
        command = [sys.executable, "-m", "core.workloads.model_probe", file, "--out", str(answer_file)]
        command += ["--trust"] if trust else []
        command += ["--vocab", str(vocab)] if vocab is not None else []
        command += ["--data", data] if data is not None else []
        command += ["--batch-size", str(batch_size)] if batch_size is not None else []
        command += ["--custom-objects", source.custom_objects] if source.custom_objects else []
        returncode, stderr = _run_child(command, timeout_s, file, stop_event)
        answer = read_answer(answer_file)
    if answer is None:
        raise ModelFileError(
            file,
            f"inspecting the model crashed ({exit_description(returncode)}): {last_line(stderr, STDERR_TAIL_CHARS, 'no error output')}",
        )
    if "error" in answer:
        raise ModelFileError(
            answer.get("path", file), answer["error"], bool(answer.get("needs_trust")), bool(answer.get("needs_custom_objects"))
        )
    return answer["model"]


def _run_child(command: list[str], timeout_s: float, shown: str, stop_event: threading.Event | None) -> tuple[int, str]:
    """Run the probe; on overrun, on `stop_event` or on any exception (Ctrl-C) kill its whole process group.

    An overrun or a stop raises ModelFileError; the child never outlives the call.
    """
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=child_env(hide_gpus=True),
        start_new_session=os.name == "posix",
    )
    started = time.monotonic()
    try:
        while True:
            left = started + timeout_s - time.monotonic()
            try:
                _, stderr = process.communicate(timeout=max(0.0, min(left, STOP_POLL_S)))
                return process.returncode, stderr.decode(errors="replace")
            except subprocess.TimeoutExpired:
                if stop_event is not None and stop_event.is_set():
                    raise ModelFileError(shown, "inspecting the model was stopped.") from None
                if time.monotonic() - started >= timeout_s:
                    raise ModelFileError(
                        shown,
                        f"inspecting the model did not finish within its {timeout_s:g} s limit "
                        f"(stopped after {time.monotonic() - started:.1f} s): "
                        "its code may hang or the model is very large. Check the file, or allow more time.",
                    ) from None
    except BaseException:
        kill_process_group(process)
        process.communicate()
        raise


def main(argv: list[str] | None = None) -> int:
    """The child: describe the file and write {"model": ...} or {"error": ..., "needs_trust": ...} to --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--out", required=True)
    parser.add_argument("--trust", action="store_true")
    parser.add_argument("--vocab", type=int)
    parser.add_argument("--data")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--custom-objects")
    args = parser.parse_args(argv)
    try:
        workload = open_user_workload(args.path, args.trust, args.data, args.vocab, args.custom_objects)
        if args.batch_size is not None:
            workload.check_data(args.batch_size)
        answer: dict[str, Any] = {"model": workload.describe()}
    except ModelFileError as exc:
        answer = {"error": exc.reason, "path": exc.path, "needs_trust": exc.needs_trust, "needs_custom_objects": exc.needs_custom_objects}
    Path(args.out).write_text(json.dumps(answer), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
