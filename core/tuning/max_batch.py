"""The largest batch that fits: `find_max_batch(config, memory_limit) -> MaxBatchResult`.

The search doubles the batch until a probe does not fit, then narrows the gap
between the largest batch that fit and the smallest that did not until it is
within TOLERANCE; every probe is a few training steps in a child process
(`core.tuning.max_batch_probe`), so running out of memory ends a child, never
the caller. Once two probes that fit show how memory grows with the batch, the
next probe aims at the batch the budget is predicted to hold (a straight line
through them; at most MAX_JUMP times the last batch that fit), which saves most
of the doublings and halvings; a guess that misses is followed by a plain
halving of the gap, so the search never does worse than bisection. A probe
over the limit is evidence like any other: the watch kills one past the host
budget, and a device peak over the cap is read when the probe ends, both "does
not fit"; so a jump that overshoots brackets the limit at once.

The answer keeps a safety margin below the largest batch that fit: MARGIN (5%,
the `margin` Lightning's BatchSizeFinder added after users ran out of memory
right after its search, Lightning-AI/pytorch-lightning#21163). Memory per
example is the growth of the peak from the smallest to the largest batch that
fit, divided by the batches between them.

A time budget (`budget_s`, counted from `started`) stops the search at its
deadline, the probe in flight killed with its child. That probe tells nothing
(it neither fit nor failed), so a stopped search says why it stopped, during
which batch, and what it knows ("the budget of 140 s ran out during the probe
of batch 1,048,576 after 12 probe(s): batch 131,072 fits, 1,048,576 was not
measured; the limit was not found"), never "every batch tried fit". A killed
probe's memory figure is the host's, watched live: on an accelerator the
device's peak is read only when a probe finishes, so there it has none. Memory
per example is given only when the peaks grew between the batches that fit.

On the CPU the limit is the host memory budget (`memory_limit`, default half
of the available RAM), enforced on each child; on a GPU it is the device's
memory, or `memory_limit` as a cap on it.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.config import MAX_BATCH_SIZE, NPZ_SUFFIX, ConfigError, RunConfig
from core.tuning.max_batch_probe import PROBE_TIMEOUT_S, Probe, ProbeLimits, run_probe

MARGIN = 0.05
TOLERANCE = 0.03
"""The search ends once the smallest batch that did not fit is within 3% of the largest that did."""
MAX_PROBES = 30
MAX_JUMP = 16
"""A guided probe goes at most this many times the last batch that fit: a guess that misses still brackets the limit."""
MIN_RISE = 0.05
PEAK_NOISE_BYTES = 4 * 2**20
PEAK_NOISE_SHARE = 0.01
NOT_MEASURABLE = "not measured (the probes' peaks did not grow beyond noise, or one batch fit)"
"""A rise of the peak within this (bytes, or share of the smaller peak) is noise: no memory per example is read from it."""
"""A predicted batch is trusted once the fitting probes' peaks rose by 5% of the memory left above the first one."""
MEMORY_LIMIT_FIELD = "--memory-limit"
SIZE_ALLOWED = "a size such as 512MiB or 4GiB"
MIN_MEMORY_LIMIT = 2**20
_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 10**3, "kib": 2**10, "m": 2**20, "mb": 10**6, "mib": 2**20}
_UNITS |= {"g": 2**30, "gb": 10**9, "gib": 2**30, "t": 2**40, "tb": 10**12, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
BUDGET, STOP = "budget", "stop"
"""What stopped a search: its time budget ran out, or it was asked to stop (Ctrl-C, the window's Stop)."""
UNSUPPORTED_STRATEGIES = {
    "multi-worker": "the search probes one process on this machine: pick a device or mirrored target",
    "tpu": "the search probes this machine's CPU or GPUs: pick a device or mirrored target",
}

OnProbe = Callable[[int, "Probe | None"], None]
"""Called with (batch, None) when a probe starts and (batch, its Probe) when it ends."""
ProbeRunner = Callable[[RunConfig, int, ProbeLimits, "threading.Event | None"], Probe]


@dataclass(frozen=True)
class MaxBatchResult:
    """The largest batch that fits (0: none did), memory per example, every probe, and how the search ended.

    A stopped search says what stopped it (`stopped_by`: BUDGET or STOP) and the batch whose probe it cut short.
    """

    max_batch: int
    bytes_per_example: float | None
    probes: tuple[Probe, ...]
    memory_limit: int
    limit_kind: str
    largest_fitting: int = 0
    smallest_failing: int | None = None
    margin: float = MARGIN
    stopped: bool = False
    error: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    stopped_by: str = ""
    unfinished_batch: int | None = None
    budget_s: float | None = None

    @property
    def finished(self) -> bool:
        """True when the search ended with an answer (not stopped, no probe failed for a reason other than memory)."""
        return not self.stopped and not self.error

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_batch": self.max_batch,
            "bytes_per_example": None if self.bytes_per_example is None else round(self.bytes_per_example, 1),
            "probes": [probe.to_dict() for probe in self.probes],
            "memory_limit": self.memory_limit,
            "limit": self.limit_kind,
            "largest_fitting": self.largest_fitting,
            "smallest_failing": self.smallest_failing,
            "margin": self.margin,
            "stopped": self.stopped,
            "error": self.error,
            "notes": list(self.notes),
            "stopped_by": self.stopped_by,
            "unfinished_batch": self.unfinished_batch,
            "budget_s": self.budget_s,
        }


def margin_text(result: MaxBatchResult) -> str:
    """'5% below 1,024, the largest that fit', or why there is no margin (a stopped search: why, and what it knows)."""
    if result.stopped and result.smallest_failing is None:
        fits = f"batch {result.largest_fitting:,} fits" if result.largest_fitting else "no batch was found to fit yet"
        unknown = f", {result.unfinished_batch:,} was not measured" if result.unfinished_batch else ""
        return f"{stop_text(result)}: {fits}{unknown}; the limit was not found"
    if result.margin:
        text = f"{result.margin:.0%} below {result.largest_fitting:,}, the largest that fit"
    else:
        text = "every batch tried fit" if result.largest_fitting else "none fit"
    if result.stopped:
        narrowed = f", before the gap to {result.smallest_failing:,} was narrowed" if result.largest_fitting else ""
        text += f"; {stop_text(result)}{narrowed}"
    return text


def stop_text(result: MaxBatchResult) -> str:
    """Why and when the search stopped: 'the budget of 140 s ran out during the probe of batch 2,048 after 5 probe(s)'."""
    during = f" during the probe of batch {result.unfinished_batch:,}" if result.unfinished_batch else ""
    return f"{_why_stopped(result.stopped_by, result.budget_s)}{during} after {len(result.probes)} probe(s)"


def _why_stopped(stopped_by: str, budget_s: float | None) -> str:
    return f"the budget of {budget_s:g} s ran out" if stopped_by == BUDGET and budget_s is not None else "stopped"


def parse_size(text: str, field_name: str = MEMORY_LIMIT_FIELD) -> int:
    """'4GiB' -> 4294967296 (KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000); ConfigError otherwise."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ConfigError(field_name, text, SIZE_ALLOWED)
    size = int(float(match.group(1)) * _UNITS[unit])
    if size < MIN_MEMORY_LIMIT:
        raise ConfigError(field_name, text, f"{SIZE_ALLOWED} (at least 1MiB)")
    return size


def default_memory_limit() -> int:
    """Half of the memory available now (psutil): the host budget when the user sets none."""
    import psutil

    return int(psutil.virtual_memory().available // 2)


def check_target(config: RunConfig, memory_limit: int | None = None) -> None:
    """ConfigError when the search cannot probe this target, or on the CPU when the data alone would not fit in the host budget.

    An `.npz`'s arrays are sized from their headers (nothing inflated): a TensorFlow probe holds them twice (the
    arrays and tf.data's copy), a JAX or PyTorch probe once; every probe under a budget they fill would fail.
    """
    if config.strategy in UNSUPPORTED_STRATEGIES:
        raise ConfigError("--target", config.strategy, UNSUPPORTED_STRATEGIES[config.strategy])
    if not config.dataset.lower().endswith(NPZ_SUFFIX) or target_on_accelerator(config):
        return
    from core.formatting import format_bytes
    from core.workloads.model_data import npz_array_bytes

    data_bytes = sum(npz_array_bytes(config.dataset).values())
    copies = 2 if config.backend == "tensorflow" else 1
    budget = memory_limit or default_memory_limit()
    if copies * data_bytes >= budget:
        held = "twice that (the arrays and TensorFlow's input pipeline)" if copies == 2 else "them once"
        raise ConfigError(
            MEMORY_LIMIT_FIELD,
            format_bytes(budget),
            f"more than the data needs: {os.path.basename(config.dataset)}'s arrays take {format_bytes(data_bytes)} once loaded "
            f"and a probe holds {held}; give a larger --memory-limit or fewer examples",
        )


def find_max_batch(
    config: RunConfig,
    memory_limit: int | None = None,
    start: int | None = None,
    stop_event: threading.Event | None = None,
    on_probe: OnProbe | None = None,
    cap: int = MAX_BATCH_SIZE,
    tolerance: float = TOLERANCE,
    probe: ProbeRunner | None = None,
    budget_s: float | None = None,
    started: float | None = None,
) -> MaxBatchResult:
    """Search the largest batch of `config` that fits, from `start` (default: the job's batch) up to `cap`.

    `memory_limit` is the host budget in bytes on the CPU (None: half of the
    available RAM) and the cap on each GPU's memory on a GPU (None: all of it).
    `probe` runs one probe (default: a child process, `run_probe`). Stops
    between probes and kills the probe in flight when `stop_event` is set, or
    at `budget_s` seconds after `started` (time.monotonic(); default now).
    """
    check_target(config, memory_limit)
    search = _Search(config, memory_limit, default_memory_limit(), granularity(config), cap, tolerance)
    search.on_accelerator = target_on_accelerator(config)
    search.budget_s = budget_s
    runner = probe or _child_probe
    deadline = None if budget_s is None else (started or time.monotonic()) + budget_s
    halt = _halt_event(stop_event, deadline)
    batch: int | None = min(cap, max(search.granularity, start or config.batch_size))
    while batch is not None and len(search.probes) < MAX_PROBES:
        if halt.is_set():
            search.stop(_stopped_by(stop_event, deadline))
            break
        if on_probe is not None:
            on_probe(batch, None)
        found = runner(config, batch, search.limits(), halt)
        found = search.cut_short(found, _stopped_by(stop_event, deadline)) if found.stopped else search.add(found)
        if on_probe is not None:
            on_probe(batch, found)
        if found.stopped or found.error:
            break
        batch = search.next_batch()
    if halt is not stop_event:
        halt.set()  # ends the watcher
    return search.result()


def _halt_event(stop_event: threading.Event | None, deadline: float | None) -> threading.Event:
    """An event set when `stop_event` is, or at `deadline`: what stops the search and kills the probe in flight."""
    if deadline is None and stop_event is not None:
        return stop_event
    halt = threading.Event()

    def watch() -> None:
        while not halt.wait(0.05):
            if (stop_event is not None and stop_event.is_set()) or (deadline is not None and time.monotonic() >= deadline):
                halt.set()

    threading.Thread(target=watch, name="max-batch-deadline", daemon=True).start()
    return halt


def _stopped_by(stop_event: threading.Event | None, deadline: float | None) -> str:
    """STOP when asked to stop, else BUDGET once the deadline has passed (what the halt event was set for)."""
    if deadline is None or (stop_event is not None and stop_event.is_set()):
        return STOP
    return BUDGET if time.monotonic() >= deadline else STOP


def _child_probe(config: RunConfig, batch: int, limits: ProbeLimits, stop_event: threading.Event | None) -> Probe:
    return run_probe(config, batch, limits, stop_event, PROBE_TIMEOUT_S)


def target_on_accelerator(config: RunConfig) -> bool:
    """Whether the job will train on a GPU or TPU, without starting TensorFlow here (a probe's answer corrects it).

    Named devices say it; else TensorFlow, if this process has imported it;
    else whether the NVIDIA driver lists a GPU (/proc/driver/nvidia/gpus).
    """
    if config.strategy == "tpu" or config.devices:
        return config.strategy == "tpu" or any(not device.startswith("CPU") for device in config.devices)
    if os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1"):
        return False
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "config"):
        return bool(tf.config.list_physical_devices("GPU"))
    gpus = Path("/proc/driver/nvidia/gpus")
    return gpus.is_dir() and any(gpus.iterdir())


def granularity(config: RunConfig) -> int:
    """Batches must divide among the replicas: the devices of a mirrored job (1 otherwise, until a probe says more)."""
    return len(config.devices) if config.strategy == "mirrored" and config.devices else 1


class _Search:
    """The probes so far and what they imply: the bracket, the limits, the next batch."""

    def __init__(self, config: RunConfig, memory_limit: int | None, host_default: int, step: int, cap: int, tolerance: float):
        self.config = config
        self.memory_limit = memory_limit
        self.host_default = host_default
        self.granularity = step
        self.cap = cap
        self.tolerance = tolerance
        self.probes: list[Probe] = []
        self.on_accelerator = False
        self.stopped = False
        self.stopped_by = ""
        self.budget_s: float | None = None
        self.unfinished: int | None = None
        self.expected: bool | None = None  # what the last probe, if the line guided it, was predicted to do

    @property
    def lo(self) -> int:
        return max((p.batch for p in self.probes if p.fits), default=0)

    @property
    def hi(self) -> int | None:
        return min((p.batch for p in self.probes if not p.fits), default=None)

    def limits(self) -> ProbeLimits:
        """Host budget and device cap for the next probe: on a GPU the host keeps its default budget."""
        if self.on_accelerator:
            return ProbeLimits(self.host_default, self.memory_limit)
        return ProbeLimits(self.memory_limit or self.host_default)

    def add(self, probe: Probe) -> Probe:
        """Record a probe that finished; its answer says where the job really ran."""
        if not probe.error and probe.peak_bytes is not None and probe.fits:
            self.on_accelerator = probe.on_accelerator
        if probe.replicas > 1:
            self.granularity = max(self.granularity, probe.replicas)
        self.probes.append(probe)
        return probe

    def stop(self, stopped_by: str) -> None:
        """End the search: `stopped_by` BUDGET or STOP."""
        self.stopped, self.stopped_by = True, stopped_by

    def cut_short(self, probe: Probe, stopped_by: str) -> Probe:
        """End the search during `probe`, returned saying why it did not finish.

        That probe is no evidence either way. Its memory figure is the host's, watched until the kill: on an
        accelerator, where the device's peak is read only when a probe finishes, it is dropped, not to be read
        against the device's limit.
        """
        self.stop(stopped_by)
        self.unfinished = probe.batch
        why = f"{_why_stopped(stopped_by, self.budget_s)} before it finished"
        if self.on_accelerator:
            return replace(probe, peak_bytes=None, reason=f"{why} (the device's memory is read when a probe finishes)")
        return replace(probe, reason=why)

    def budget(self) -> int | None:
        """The bytes the memory figure must stay under: the host budget on the CPU, the device cap (if any) on a GPU."""
        if self.on_accelerator:
            return self.memory_limit
        return self.memory_limit or self.host_default

    def next_batch(self) -> int | None:
        """The next batch to probe, or None when the search is done."""
        lo, hi = self.lo, self.hi
        guess = predicted_batch(self.fitting_points(), self.budget()) if self._guess_held() else None
        self.expected = None
        if hi is None:
            if lo >= self.cap:
                return None
            if guess is None:
                return self._round(min(self.cap, lo * 2))
            aim, self.expected = self._aim(guess, lo)
            return self._round(min(self.cap, lo * MAX_JUMP, max(aim, lo + self.granularity)))
        if lo == 0:
            return None if hi <= self.granularity else self._round(hi // 2)
        if hi - lo <= max(self.granularity, self.tolerance * lo):
            return None
        if guess is None:
            return self._inside((lo + hi) // 2, lo, hi)
        aim, self.expected = self._aim(min(max(guess, lo), hi), lo)
        return self._inside(aim, lo, hi)

    def _aim(self, guess: int, lo: int) -> tuple[int, bool]:
        """(the batch to probe for a predicted limit `guess`, whether it should fit): just below the guess, or just above lo."""
        aim = int(guess * (1 - self.tolerance / 2))
        if aim <= lo * (1 + self.tolerance / 2):
            return max(lo + self.granularity, int(lo * (1 + self.tolerance))), False
        return aim, True

    def _guess_held(self) -> bool:
        """False right after a guided probe came out other than predicted: the next one halves the gap instead."""
        return self.expected is None or not self.probes or self.probes[-1].fits == self.expected

    def _round(self, batch: int) -> int:
        return max(self.granularity, batch // self.granularity * self.granularity)

    def _inside(self, batch: int, lo: int, hi: int) -> int | None:
        """`batch` rounded to the granularity, strictly between lo and hi (None when no such batch is left)."""
        rounded = self._round(min(max(batch, lo + 1), hi - 1))
        return rounded if lo < rounded < hi else None

    def fitting_points(self) -> list[tuple[int, int]]:
        return sorted((p.batch, p.peak_bytes) for p in self.probes if p.fits and p.peak_bytes)

    def result(self) -> MaxBatchResult:
        lo, hi = self.lo, self.hi
        errors = [p.error for p in self.probes if p.error]
        answer = lo if hi is None else self._round(int(lo * (1 - MARGIN))) if lo else 0
        notes = []
        if self.stopped and hi is None:
            notes.append(f"{_why_stopped(self.stopped_by, self.budget_s)} after {len(self.probes)} probe(s): the limit was not found")
        if hi is None and lo >= self.cap and not self.stopped:
            notes.append(f"every batch up to {self.cap:,} fit: the search stops there (no margin needed)")
        if lo == 0 and hi is not None and not errors:
            notes.append("no batch fit, not even the smallest: the runtime and the model alone need more than the limit")
        kind = "device memory" if self.on_accelerator else "host memory budget"
        per_example = bytes_per_example(self.fitting_points())
        if per_example == 0:
            per_example = None
            notes.append("memory per example not measurable: the peak did not grow between the batches that fit")
        return MaxBatchResult(
            max_batch=answer,
            bytes_per_example=per_example,
            probes=tuple(self.probes),
            memory_limit=(self.budget() or 0),
            limit_kind=kind,
            largest_fitting=lo,
            smallest_failing=hi,
            margin=MARGIN if lo and hi is not None else 0.0,
            stopped=self.stopped,
            error=errors[0] if errors else "",
            notes=tuple(notes),
            stopped_by=self.stopped_by,
            unfinished_batch=self.unfinished,
            budget_s=self.budget_s,
        )


def bytes_per_example(points: Sequence[tuple[int, int]]) -> float | None:
    """Peak growth per example between the smallest and the largest batch that fit.

    None with fewer than two, or when the peak did not grow beyond noise (PEAK_NOISE_BYTES, PEAK_NOISE_SHARE of the
    smaller peak): a small model's host peaks move by that much from run to run, and "725 B per example" read from
    them would be noise, not memory.
    """
    if len(points) < 2 or points[-1][0] == points[0][0]:
        return None
    (small, small_peak), (large, large_peak) = points[0], points[-1]
    if large_peak - small_peak <= max(PEAK_NOISE_BYTES, PEAK_NOISE_SHARE * small_peak):
        return None
    return (large_peak - small_peak) / (large - small)


def predicted_batch(points: Sequence[tuple[int, int]], budget: int | None) -> int | None:
    """The batch whose peak would reach `budget` on the line through the fitting probes; None until it can be trusted.

    Uses the largest batch that fit and the one farthest below it; trusted once
    the peak rose by MIN_RISE of the memory left above the smaller one.
    """
    if budget is None or len(points) < 2:
        return None
    (small, small_peak), (large, large_peak) = points[0], points[-1]
    rise = large_peak - small_peak
    if large <= small or rise <= MIN_RISE * max(1, budget - small_peak):
        return None
    slope = rise / (large - small)
    return int(large + (budget - large_peak) / slope)
