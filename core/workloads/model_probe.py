"""Describe a user's model file in a child process with a time limit.

A user's file can hang or take the process down (its code runs when trusted,
and a corrupt file can crash a native loader), so the app inspects it in
`python -m core.workloads.model_probe`, run by `core.child_process.Child`: it
says what it is doing (`stage`) and replies with the description or the
problem it found. A child that overruns its limit is killed with its process
group; a crash is a ModelFileError naming what the child was doing, never a
hang or a crash of the caller. The child sees no GPU: describing needs none,
and it must not take the GPU's memory.
"""

from __future__ import annotations

import argparse
import threading
from typing import Any

from core.child_process import STOPPED, TIMEOUT, Child, listen_to_parent, reply, stage
from core.config import ModelRef
from core.tensorflow_import import installed_keras_backend
from core.workloads.model_file import ModelFileError, check_content, check_model_path
from core.workloads.user_workload import open_user_workload

DEFAULT_TIMEOUT_S = 120.0
WHAT = "inspecting the model"


def describe_model_file(
    model: ModelRef,
    data: str | None = None,
    batch_size: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    stop_event: threading.Event | None = None,
) -> dict[str, Any]:
    """The description (see UserWorkload.describe) of the file `model` names, worked out in a child process.

    The file opens as `model` allows (its trust, vocab and custom-objects .py,
    whose classes the child registers before loading it), and only with the
    content `model.sha256` when that is set. `data` is the run's data ("synthetic", "build_dataset", an .npz path; None:
    the file's default), resolved in the description's "data". With `batch_size`
    the child also checks that data against the model (`UserWorkload.check_data`),
    so data that does not fit is refused before a run starts. Setting `stop_event`
    kills the child at once (ModelFileError "stopped").

    Raises ModelFileError: at once, without a child, for what `check_model_path`
    refuses (missing, corrupt, untrusted .py or Lambda) and for other content than
    `model.sha256`; else the problem the child
    found (with `needs_trust` when trust would open it; a ModelDataError's path is
    the data file's), or a child that ran past `timeout_s`, was stopped or crashed.
    """
    # a missing, corrupt, untrusted or changed file is refused before any child starts
    source = check_model_path(model.path_or_name, model.trust, model.custom_objects or None)
    check_content(source, model.sha256)
    file = source.path
    args = [file, *(["--trust"] if model.trust else [])]
    args += ["--vocab", str(model.vocab)] if model.vocab is not None else []
    args += [item for name, size in model.vocab_by_input for item in ("--vocab-input", f"{name}={size}")]
    args += ["--data", data] if data is not None else []
    args += ["--batch-size", str(batch_size)] if batch_size is not None else []
    args += ["--custom-objects", source.custom_objects] if source.custom_objects else []
    backend = installed_keras_backend()  # without TensorFlow, Keras opens the file on JAX or PyTorch
    env = {"KERAS_BACKEND": backend} if backend != "tensorflow" else None
    child = Child.start("core.workloads.model_probe", args, what=WHAT, env=env, hide_gpus=True, limit_s=timeout_s, stop_event=stop_event)
    end = child.wait()
    answer = child.result
    if end.how == STOPPED:
        raise ModelFileError(file, f"{WHAT} was stopped.")
    if end.how == TIMEOUT:
        raise ModelFileError(
            file,
            f"{WHAT} did not finish within its {timeout_s:g} s limit (stopped after {end.seconds:.1f} s while {end.doing or 'starting'}): "
            "its code may hang or the model is very large. Check the file, or allow more time.",
        )
    if not isinstance(answer, dict):
        raise ModelFileError(file, child.describe_end())
    if "error" in answer:
        raise ModelFileError(
            answer.get("path", file), answer["error"], bool(answer.get("needs_trust")), bool(answer.get("needs_custom_objects"))
        )
    return answer["model"]


def main(argv: list[str] | None = None) -> int:
    """The child: describe the file and reply {"model": ...} or {"error": ..., "path": ..., "needs_trust": ...}."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--trust", action="store_true")
    parser.add_argument("--vocab", type=int)
    parser.add_argument("--vocab-input", action="append", default=[], help="NAME=N: that input's ids in [0, N)")
    parser.add_argument("--data")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--custom-objects")
    args = parser.parse_args(argv)
    listen_to_parent()
    try:
        stage("opening the file and building its model" + (" (its build_model())" if args.path.endswith(".py") else ""))
        by_input = [(name, int(size)) for name, _, size in (item.rpartition("=") for item in args.vocab_input)]
        workload = open_user_workload(args.path, args.trust, args.data, args.vocab, args.custom_objects, by_input)
        if args.batch_size is not None:
            stage("checking the data against the model")
            workload.check_data(args.batch_size)
        stage("describing the model")
        answer: dict[str, Any] = {"model": workload.describe()}
    except ModelFileError as exc:
        answer = {"error": exc.reason, "path": exc.path, "needs_trust": exc.needs_trust, "needs_custom_objects": exc.needs_custom_objects}
    reply(answer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
