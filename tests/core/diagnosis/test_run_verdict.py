"""The diagnosis every completed run gets: which runs are judged, a stop, multi-worker runs, the history's held end."""

import threading
from dataclasses import replace

from core.config import RunConfig
from core.diagnosis.run_verdict import NO_PROBES, STOPPED, VerdictHook, diagnose_run
from core.machine.peaks import DevicePeaks, PeaksReport
from core.results import RunResult, RunStatus

PEAKS = PeaksReport({"cpu": "test CPU"}, (DevicePeaks("CPU:0", "CPU", "test CPU", {"float32": 80e9}),))


def _result(status=RunStatus.COMPLETED, **config) -> RunResult:
    config = RunConfig(**{"model": "mlp", "batch_size": 64, "steps": 100, **config})
    return RunResult(
        status=status,
        config=config.to_dict(),
        steps_done=100,
        replicas=2 if config.strategy == "multi-worker" else 1,
        warmup_steps=1,
        step_time_median_ms=2.0,
        samples_per_s=32_000.0,
        environment={"devices": ["CPU:0"]},
    )


def test_only_a_completed_run_is_judged_and_a_stop_leaves_it_without_verdict():
    stopped = _result(RunStatus.STOPPED)
    assert diagnose_run(RunConfig(), stopped, peaks=PEAKS) == (stopped, [])
    stop = threading.Event()
    stop.set()
    judged, probes = diagnose_run(RunConfig(), _result(), stop_event=stop, peaks=PEAKS)
    assert judged.bound is None and STOPPED in judged.warnings and probes == []


def test_a_multi_worker_run_is_judged_without_probe_runs(two_cpus):
    config = RunConfig(model="mlp", batch_size=64, steps=100, strategy="multi-worker")
    heard: list[str] = []
    # 200 ms steps: the input pipeline timed alone stays far below the input-bound share even on a busy machine.
    slow_steps = replace(_result(strategy="multi-worker"), step_time_median_ms=200.0, samples_per_s=320.0)
    judged, probes = diagnose_run(config, slow_steps, peaks=PEAKS, announce=heard.append)
    assert probes == [] and heard == ["timing the input pipeline alone"]
    assert judged.bound in ("compute", "unknown") and judged.bound_evidence.endswith(NO_PROBES["multi-worker"])


def test_the_verdict_hook_leaves_a_run_that_did_not_complete_or_was_stopped_as_it_is():
    heard: list[str] = []
    hook = VerdictHook(RunConfig(), threading.Event(), heard.append)
    for status in (RunStatus.FAILED, RunStatus.STOPPED):
        unjudged = _result(status)
        assert hook.amend_result(unjudged) is unjudged
    stop = threading.Event()
    stop.set()
    completed = _result()
    assert VerdictHook(RunConfig(), stop, heard.append).amend_result(completed) is completed
    assert heard == []  # nothing was diagnosed, nothing announced
