"""`python -m core.backends.child_job CONFIG_JSON`: one run on the JAX or PyTorch backend, streamed as JSON lines.

Sets KERAS_BACKEND before Keras is imported and imports no TensorFlow (it runs
where only that backend is installed). It trains the way that backend's users
train: `model.compile(steps_per_execution=K, jit_compile=...)` and `model.fit`,
timed by a Keras callback at the end of every call, after the call's loss has
been read back to the host (the same clock as the TensorFlow engine: step time
is the time between the ends of consecutive calls / steps in the call; the
first call, tracing and compiling, is the warm-up).

Protocol, one JSON object per line on stdout (anything else the libraries print
goes to stderr):
  {"event": "start", "total_steps", "steps_per_call", "replicas", "devices", "memory_estimate", "notes"}
  {"event": "steps", "records": [[step, loss, step_time_s, warmup], ...]}   after every call
  {"event": "end", "error", "peak_rss_bytes", "environment", "tensorflow_imported"}
Stdin: a line "stop" ends the run after the call in flight; the end of stdin
(the parent is gone) ends this process at once.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import sys
import threading
from typing import Any, TextIO

from core.backends.fit_job import train
from core.config import RunConfig

EXIT_PARENT_GONE = 3


class Messages:
    """JSON lines to the parent on the process's original stdout; fd 1 then points at stderr, so stray prints cannot break the protocol."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self._out: TextIO = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)

    def send(self, event: str, **fields: Any) -> None:
        self._out.write(json.dumps({"event": event, **fields}) + "\n")
        self._out.flush()


def watch_stdin(stop: threading.Event) -> None:
    """A daemon thread: "stop" sets `stop`; end of stdin (the parent died or closed it) exits now."""

    def watch() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                stop.set()
        os._exit(EXIT_PARENT_GONE)

    threading.Thread(target=watch, name="parent-pipe", daemon=True).start()


class WithoutTensorFlow(importlib.abc.MetaPathFinder):
    """Refuses `import tensorflow` in this process, as on a machine where only JAX or PyTorch is installed.

    Keras imports TensorFlow where it can (seeding, tf.data support) even on
    another backend; refused, it takes its TF-less path, and a model file
    that needs TensorFlow fails with a message saying so.
    """

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r}: a Keras job on another backend runs without TensorFlow", name=name)
        return None


def prepare_environment(config: RunConfig) -> None:
    """KERAS_BACKEND, TensorFlow refused, and for JAX data parallel over CPUs that many XLA host devices; before Keras or JAX is imported."""
    os.environ["KERAS_BACKEND"] = config.backend
    sys.meta_path.insert(0, WithoutTensorFlow())
    cpus = [d for d in config.devices if d.startswith("CPU")]
    if config.backend == "jax" and config.strategy == "mirrored" and len(cpus) > 1:
        count = max(int(d.split(":")[1]) for d in cpus) + 1
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


def peak_rss_bytes() -> int:
    """This process's peak resident memory."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def explain(exc: BaseException, config: RunConfig) -> str:
    """One readable line for what ended the run."""
    from core.workloads.data import DataUnavailable
    from core.workloads.model_file import ModelFileError

    if isinstance(exc, (ModelFileError, DataUnavailable)):
        return str(exc)
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
    if "tensorflow" in first_line.lower():
        return f"{type(exc).__name__}: {first_line} (the model holds TensorFlow-only parts; train it on the tensorflow backend)."
    return f"{type(exc).__name__}: {first_line}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    config = RunConfig.from_dict(json.loads(argv[0]))
    prepare_environment(config)
    messages = Messages()
    stop = threading.Event()
    if "--parent-pipe" in argv:
        watch_stdin(stop)
    error, env = None, {}
    try:
        env = train(config, messages, stop)
    except Exception as exc:  # every failure becomes the end message's readable error
        error = explain(exc, config)
    messages.send(
        "end",
        error=error,
        peak_rss_bytes=peak_rss_bytes(),
        environment=env,
        tensorflow_imported="tensorflow" in sys.modules,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
