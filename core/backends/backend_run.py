"""`run_in_backend_child(config, stop_event, hooks) -> RunResult`: a JAX or PyTorch run, from the parent's side.

The job trains in `python -m core.backends.child_job` (started through
`core.child_process.Child`: its own process group, ended with the app). Its
messages (`core.job_messages`) arrive here as it sends them: its step records reach `on_step_records` and the hooks in
the calling thread, exactly as the TensorFlow engine's do, so live plots, the
history recorder and the verdict work the same; the hooks' context names the
child's PID (the process the GPU driver lists). Stop: the child is asked to
stop after the call in flight; once that call's steps are here, its group is
killed. The result is built as the engine builds it (`core.training.metrics`).
Interleaved rounds: where a hook takes turns (a `RoundGate`), the child is
started with TAKES_TURNS set and asks before each call outside the turn it
holds (`core.training.parent_turns`); this thread waits in the hooks'
`wait_turn` on its behalf, then answers with the turn they grant.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from core.backends.available import is_installed
from core.backends.initial_weights import NOT_SHARED, write_initial_weights
from core.backends.peak_memory import peak_memory
from core.child_process import Child
from core.config import RunConfig, backend_title
from core.formatting import utc_now
from core.job_messages import Ended, Go, Started, Steps, Turn, decode, decode_as, tell
from core.results import RunResult, RunStatus, StepRecord
from core.training.failures import divergence_message
from core.training.hooks import RunContext, RunHook, amended_result, end_run, granted_turn
from core.training.metrics import Measured, measured_result
from core.training.parent_turns import TAKES_TURNS
from core.workloads.file_optimizer import with_learning_rate_used
from core.workloads.workload import is_model_file

CHILD_MODULE = "core.backends.child_job"
STOP_GRACE_S = 60.0
"""How long a stopped job may take to finish the call in flight before its group is killed anyway."""


@dataclass
class _Tally:
    """What the job has reported so far."""

    config: RunConfig
    total_steps: int = 0
    replicas: int = 1
    devices: tuple[str, ...] = ()
    losses: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    warmup_steps: int = 0
    peak_rss: int | None = None
    device_peaks: dict[str, int] = field(default_factory=dict)  # each accelerator's allocator peak in the child
    memory_estimate: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    flops: dict[str, Any] = field(default_factory=dict)  # the job's count: flops_per_step and its method
    failure: str = ""

    def add(self, message: Steps) -> list[StepRecord]:
        """The records of one `Steps` message, tallied."""
        records = list(message.records)
        self.warmup_steps += sum(1 for r in records if r.warmup)
        self.losses.extend(r.loss for r in records)
        self.times.extend(r.step_time_s for r in records)
        self.peak_rss = message.peak_rss_bytes if message.peak_rss_bytes is not None else self.peak_rss
        self.device_peaks = message.device_peaks or self.device_peaks
        self.failure = self.failure or divergence_message(records, self.config, self.notes)
        return records


def run_in_backend_child(
    config: RunConfig,
    stop_event: threading.Event | None = None,
    hooks: Sequence[RunHook] = (),
) -> RunResult:
    """Train `config` on its backend in a child process, streaming step records to the hooks.

    Every problem ends the run with status "failed" and a readable message
    (the backend not installed, the model or data refused, the child dying);
    `stop_event` ends it with status "stopped" after the call in flight.
    """
    stop_event = stop_event or threading.Event()
    hooks = list(hooks)
    started_at, start = utc_now(), time.perf_counter()
    tally = _Tally(config)
    status, message = RunStatus.COMPLETED, ""
    title = backend_title(config.backend)
    if not is_installed(config.backend):
        status, message = RunStatus.FAILED, f"{title} is not installed here: pip install 'device-lab[{config.backend}]'."
    else:
        status, message = _follow_child(tally, stop_event, hooks)
    result = amended_result(_make_result(tally, status, message, started_at, start), hooks)
    end_run(hooks, result)
    return result


def _follow_child(tally: _Tally, stop_event: threading.Event, hooks: list[RunHook]) -> tuple[RunStatus, str]:
    """The job's child with the run's config and initial weights (see `_watch_child`)."""
    config = tally.config
    title = backend_title(config.backend)
    with tempfile.TemporaryDirectory(prefix="device-lab-job-") as folder:
        weights = write_initial_weights(config, folder)
        if weights is None and not is_model_file(config.model):
            tally.notes.append(NOT_SHARED.format(backend=title))
        argv = [json.dumps(config.to_dict()), *([weights] if weights else [])]
        return _watch_child(tally, argv, stop_event, hooks)


def _watch_child(tally: _Tally, argv: list[str], stop_event: threading.Event, hooks: list[RunHook]) -> tuple[RunStatus, str]:
    """Start the job's child with `argv`, hand on its messages until it ends, and say how the run ended."""
    title = backend_title(tally.config.backend)
    turns = {TAKES_TURNS: "1"} if any(hook.takes_turns for hook in hooks) else {}
    with Child.start(CHILD_MODULE, argv, what=f"the {title} job", env=turns, stop_event=stop_event, stop_grace_s=STOP_GRACE_S) as child:
        for data in child.messages():
            message = decode(data)
            if isinstance(message, Started):
                _started(tally, message, hooks, child.pid)
            elif isinstance(message, Turn):
                tell(child, Go(**granted_turn(hooks, message.next_step)))
            elif isinstance(message, Steps):
                records = tally.add(message)
                for hook in hooks:
                    hook.on_step_records(records)
                if stop_event.is_set() or tally.failure:
                    child.kill()  # the call in flight has ended; steps the child ran past it are not the run's, as in the engine
                    break
        end = child.wait()
        reply = decode_as(Ended, child.result) if child.result is not None else Ended()  # none: it died first
        if reply.peak_rss_bytes:
            tally.peak_rss = reply.peak_rss_bytes
        tally.device_peaks = reply.device_peaks or tally.device_peaks
        tally.environment["tensorflow_imported"] = reply.tensorflow_imported
        described = child.describe_end()
    done = len(tally.losses)
    if tally.failure:
        return RunStatus.FAILED, tally.failure
    if reply.error:
        return RunStatus.FAILED, reply.error
    if stop_event.is_set() and done < tally.total_steps:
        return RunStatus.STOPPED, f"Stopped by the user after {done} of {tally.total_steps} steps."
    if not end.ok and (not tally.total_steps or done < tally.total_steps):
        return RunStatus.FAILED, f"{described[:1:].upper()}{described[1:]}."
    return RunStatus.COMPLETED, ""


def _started(tally: _Tally, message: Started, hooks: Sequence[RunHook], pid: int) -> None:
    """The job is set up: note what it said and tell the hooks (no model object: it lives in the child, process `pid`)."""
    tally.total_steps = message.total_steps
    tally.replicas = message.replicas
    tally.devices = message.devices
    tally.memory_estimate = dict(message.memory_estimate)
    tally.notes += message.notes
    tally.environment.update(message.environment)
    tally.flops = dict(message.flops)
    per_call = message.steps_per_call or tally.config.steps_per_call
    if per_call != tally.config.steps_per_call:
        tally.config = tally.config.with_changes(steps_per_call=per_call)
    tally.config = with_learning_rate_used(tally.config, message.learning_rate)  # a file's optimizer brings its own
    context = RunContext(tally.config, tally.total_steps, tally.replicas, tally.devices, None, process_id=pid)
    for hook in hooks:
        hook.on_run_start(context)


def _make_result(tally: _Tally, status: RunStatus, message: str, started_at: str, start: float) -> RunResult:
    """The run's result from what the job reported, as the TensorFlow engine builds it."""
    from core.backends.call_timer import window_steps
    from core.machine.cpu import cpu_model
    from core.machine.peak_estimates import run_peak_environment

    environment = {**tally.environment, "cpu": cpu_model()}
    if tally.devices and not any(not d.startswith("CPU") for d in tally.devices):
        environment.update(run_peak_environment(tally.devices, tally.config.precision))
    peak, source = peak_memory(tally.config.backend, tally.devices, tally.device_peaks, tally.peak_rss)
    measured = Measured(
        times=tally.times,
        warmup_steps=tally.warmup_steps,
        losses=tally.losses,
        replicas=tally.replicas,
        devices=tally.devices,
        memory={"peak_memory_bytes": peak, "peak_memory_source": source},
        memory_estimate=tally.memory_estimate,
        environment=environment,
        notes=tally.notes,
        window_steps=window_steps(tally.config.backend, tally.config.steps_per_call),
    )
    result = measured_result(tally.config, status, message, measured, started_at, time.perf_counter() - start)
    return replace(
        result,
        flops_per_step=tally.flops.get("flops_per_step"),
        flops_method=str(tally.flops.get("method", "")),
        flops_uncounted=tuple(str(item) for item in tally.flops.get("uncounted") or ()),
    )
