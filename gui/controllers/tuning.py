"""One tuning search at a time, off the GUI thread: the largest batch that fits, or the fastest settings.

The worker thread runs `core.tuning.max_batch.find_max_batch` (each probe a
child process, so running out of memory never reaches the app) or
`core.tuning.autotune.autotune` (short runs in this process). Each probe or
point comes back as one signal when it ends; a GUI timer says how long the
one in flight has been going, how many are done, the time each took on
average and an estimate of the time left. Stop sets the job's event: a probe's child is
killed at once, an autotune point stops after its step call.
"""

from __future__ import annotations

import math
import threading
import time

from PySide6.QtCore import QObject, Signal, Slot

from core.formatting import format_duration
from core.tuning.autotune import AutotuneResult, TunePoint, autotune
from core.tuning.max_batch import TOLERANCE, MaxBatchResult, Probe, find_max_batch
from gui.controllers.base import JobController
from gui.job_data import AUTOTUNE, MAX_BATCH, TuningJob
from gui.qt_threads import Worker

POLL_INTERVAL_MS = 250


def probes_left(fit: int, no_fit: int | None, cap: int, tolerance: float = TOLERANCE) -> int:
    """At most how many more largest-batch probes, after the one in flight: doublings up to `cap` while every probe
    fitted, then halving the gap between the largest batch that fit and the smallest that did not, to within `tolerance`."""
    if no_fit is None:
        doublings = math.ceil(math.log2(cap / fit)) if fit >= 1 and cap > fit else 0
        return doublings + math.ceil(math.log2(1 / tolerance))
    gap = no_fit - fit
    width = max(1.0, tolerance * fit)
    return max(0, math.ceil(math.log2(gap / width))) if gap > width else 0


class TuningWorker(Worker):
    """Runs one search in a worker thread and returns its MaxBatchResult or AutotuneResult; each probe or point as a signal."""

    probe_started = Signal(int)  # batch
    probe_done = Signal(object)  # Probe
    point_done = Signal(object)  # TunePoint

    def __init__(self, job: TuningJob, stop_event: threading.Event):
        super().__init__()
        self.job = job
        self.stop_event = stop_event

    def work(self) -> MaxBatchResult | AutotuneResult:
        job = self.job
        if job.kind == MAX_BATCH:
            return find_max_batch(job.config, job.memory_limit, stop_event=self.stop_event, on_probe=self._on_probe, cap=job.up_to)
        return autotune(
            job.config, job.budget_s, job.allow_batch_change, job.max_batch, self.stop_event, self.point_done.emit, job.memory_limit
        )

    def _on_probe(self, batch: int, probe: Probe | None) -> None:
        if probe is None:
            self.probe_started.emit(batch)
        else:
            self.probe_done.emit(probe)


class TuningController(JobController):
    """Starts, stops and follows one search; `progress` says what is in flight, about four times a second."""

    progress = Signal(str, float)  # what is in flight, the share of the time budget used (-1: no budget)
    probe_done = Signal(object)  # Probe
    point_done = Signal(object)  # TunePoint
    result_ready = Signal(object)  # MaxBatchResult | AutotuneResult

    def __init__(self, parent: QObject | None = None):
        super().__init__(POLL_INTERVAL_MS, parent)
        self._job: TuningJob | None = None
        self._started = 0.0
        self._in_flight = ""
        self._in_flight_since = 0.0
        self._done = 0
        self._finished_s: list[float] = []  # how long each finished probe or point took
        self._fits: tuple[int, int | None] = (0, None)  # largest batch that fit, smallest that did not (None: none yet)

    def start(self, job: TuningJob) -> bool:
        """Run `job` in a worker thread; False (and nothing happens) while a search is in flight."""
        if self.is_running():
            return False
        self._job, self._done, self._finished_s, self._fits = job, 0, [], (0, None)
        self._started = self._in_flight_since = time.monotonic()
        self._in_flight = "starting the first probe" if job.kind == MAX_BATCH else "measuring your settings"
        worker = TuningWorker(job, self._new_stop_event())
        worker.probe_started.connect(self._on_probe_started)
        worker.probe_done.connect(self._on_probe_done)
        worker.point_done.connect(self._on_point_done)
        worker.returned.connect(self.result_ready)
        self._launch(worker, f"tuning-{job.kind}")
        self._poll()
        return True

    @Slot(int)
    def _on_probe_started(self, batch: int) -> None:
        self._done += 1
        self._in_flight, self._in_flight_since = f"probe {self._done}: batch {batch:,} in a child process", time.monotonic()
        self._poll()

    @Slot(object)
    def _on_probe_done(self, probe: Probe) -> None:
        self._finished_s.append(time.monotonic() - self._in_flight_since)
        fit, no_fit = self._fits
        self._fits = (max(fit, probe.batch), no_fit) if probe.fits else (fit, probe.batch if no_fit is None else min(no_fit, probe.batch))
        self.probe_done.emit(probe)

    @Slot(object)
    def _on_point_done(self, point: TunePoint) -> None:
        self._done += 1
        self._finished_s.append(time.monotonic() - self._in_flight_since)
        self._in_flight, self._in_flight_since = f"point {self._done + 1}: measuring the next setting", time.monotonic()
        self.point_done.emit(point)
        self._poll()

    def _poll(self) -> None:
        if self._job is None:
            return
        elapsed = time.monotonic() - self._started
        text = f"{self._in_flight} · {time.monotonic() - self._in_flight_since:.0f} s (search {elapsed:.0f} s)"
        estimate = self._estimate(elapsed)
        share = min(1.0, elapsed / self._job.budget_s) if self._job.kind == AUTOTUNE else -1.0
        self.progress.emit(text + (f" · {estimate}" if estimate else ""), share)

    def _estimate(self, elapsed_s: float) -> str:
        """'2 done, 43 s each · at most 5 more, about 3:35 left' ('' before the first has finished)."""
        if self._job is None or not self._finished_s:
            return ""
        each = sum(self._finished_s) / len(self._finished_s)
        kind = "probe" if self._job.kind == MAX_BATCH else "point"
        done = f"{len(self._finished_s)} {kind}{'s' if len(self._finished_s) != 1 else ''} done, {format_duration(each)} each"
        if self._job.kind == AUTOTUNE:
            left = max(0.0, self._job.budget_s - elapsed_s)
            return f"{done} · at most {format_duration(left)} of the {self._job.budget_s:g} s budget left"
        more = probes_left(*self._fits, self._job.up_to)
        return f"{done} · at most {more} more, about {format_duration(more * each)} left" if more else done

    def _job_ended(self) -> None:
        self._job = None
