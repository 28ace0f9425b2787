"""`python -m core.backends.child_job CONFIG_JSON [WEIGHTS_NPZ]`: one run on the JAX or PyTorch backend, streamed as JSON lines.

Sets KERAS_BACKEND before Keras is imported and imports no TensorFlow (it runs
where only that backend is installed). It trains the way that backend's users
train: `model.compile(steps_per_execution=K, jit_compile=...)` and `model.fit`,
timed by a Keras callback at the end of every call, after the call's loss has
been read back to the host (the same clock as the TensorFlow engine: step time
is the time between the ends of consecutive calls / steps in the call; the
first call, tracing and compiling, is the warm-up).

Messages, of `core.job_messages` (`send`, then one `reply`): `Started` (the size
of the run, its call size, devices, memory estimate, FLOPs per step: `step_flops`,
XLA's count on JAX), `Steps` as its calls end, in interleaved rounds (TAKES_TURNS
set) `Turn` before a call outside its turn, answered with `Go` on the control
pipe; its reply is `Ended` (the error that ended it, its peak RSS, whether
TensorFlow was imported, its accelerators' allocator peaks: `peak_memory`). The
control pipe (`listen_to_parent`): "stop" ends the run after the call in flight;
its end (the parent is gone) ends this process.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
from typing import Any

from core import child_process, job_messages
from core.backends.fit_job import train
from core.backends.job_setup import peak_rss_bytes
from core.backends.peak_memory import device_peaks
from core.config import RunConfig
from core.training.parent_turns import takes_turns


class WithoutTensorFlow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Refuses `import tensorflow` in this process, as on a machine where only JAX or PyTorch is installed.

    Keras imports TensorFlow where it can (seeding, tf.data support) even on
    another backend; refused, it takes its TF-less path, and a model file
    that needs TensorFlow fails with a message saying so. A spec without an
    origin answers `importlib.util.find_spec` (PyTorch's compiler asks it to
    skip TensorFlow's files: it finds none); loading it raises ModuleNotFoundError.
    """

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name == "tensorflow" or name.startswith("tensorflow."):
            return importlib.machinery.ModuleSpec(name, self, origin=None)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        raise ModuleNotFoundError(
            f"No module named {spec.name!r}: a Keras job on another backend runs without TensorFlow; "
            "a file that imports it trains with --backend tensorflow",
            name=spec.name,
        )

    def exec_module(self, module: Any) -> None:
        raise ModuleNotFoundError(f"No module named {module.__name__!r}", name=module.__name__)


def prepare_environment(config: RunConfig) -> None:
    """KERAS_BACKEND, TensorFlow refused, and for JAX data parallel over CPUs that many XLA host devices; before Keras or JAX is imported."""
    os.environ["KERAS_BACKEND"] = config.backend
    sys.meta_path.insert(0, WithoutTensorFlow())
    cpus = [d for d in config.devices if d.startswith("CPU")]
    if config.backend == "jax" and config.strategy == "mirrored" and len(cpus) > 1:
        count = max(int(d.split(":")[1]) for d in cpus) + 1
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


def explain(exc: BaseException) -> str:
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
    child_process.end_with_parent()  # XLA compiling holds the GIL: the kernel ends this job with the app
    stop = child_process.listen_to_parent()
    error = None
    try:
        train(config, job_messages.send, stop, argv[1] if len(argv) > 1 else None, takes_turns=takes_turns())
    except Exception as exc:  # every failure becomes the reply's readable error
        error = explain(exc)
    ended = job_messages.Ended(error, peak_rss_bytes(), "tensorflow" in sys.modules, device_peaks(config.backend))
    child_process.reply(job_messages.encode(ended))
    return 0


if __name__ == "__main__":
    sys.exit(main())
