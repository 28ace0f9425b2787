"""The step breakdown of a profiler capture: time per TensorFlow op, read from the trace files, no browser needed.

A capture is a folder `plugins/profile/<time>/` holding one `<host>.xplane.pb`
per host: an XSpace protocol buffer (TensorFlow ships its reader). Its planes
are the host's threads (`/host:CPU`) and each accelerator (`/device:GPU:0`, …).
On an accelerator, each kernel's time counts for the TensorFlow op that
launched it (its `tf_op` stat); without one, the host's TensorFlow op events
(named "<op name>:<op type>") are counted on every thread. Time is self time
(an op nested in another counts once), summed over threads and streams, so
the shares are of the time spent in ops, not of the wall clock.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_TRACE_BYTES = 1 << 30
TF_OP_EVENT = re.compile(r"^[^:\s][^:]*:[A-Za-z_]\w*$")  # "dense/MatMul:MatMul", not "ExecutorState::Process"
LOOP_PREFIX = re.compile(r"^(while/body/_\d+/)?(while/)?")  # the engine's loop over steps, in every op name inside it
DERIVED_LINES = {"Steps", "XLA Modules", "XLA Ops", "TensorFlow Ops", "TensorFlow Name Scope", "Framework Ops", "Source code"}
GROUPINGS = ("type", "name")


class TraceUnreadable(Exception):
    """No capture there, or its files cannot be read: the message says which and what to do."""


@dataclass(frozen=True)
class OpTime:
    """One op (by type or by name): total self time, how many times it ran, its share of all op time."""

    name: str
    total_s: float
    count: int
    share: float


@dataclass(frozen=True)
class TraceSummary:
    """The ops of one capture, longest first; `source` says whose time it is (device kernels or host threads)."""

    capture_dir: Path
    files: tuple[Path, ...]
    ops: tuple[OpTime, ...]
    op_total_s: float
    source: str
    timelines: int


def latest_capture(trace_dir: str | Path) -> Path:
    """The newest capture folder under `trace_dir` (`…/plugins/profile`), or `trace_dir` itself when it holds the files."""
    folder = Path(trace_dir)
    if any(folder.glob("*.xplane.pb")):
        return folder
    captures = sorted(p for p in folder.glob("*") if p.is_dir() and any(p.glob("*.xplane.pb"))) if folder.is_dir() else []
    if not captures:
        raise TraceUnreadable(f"No profiler trace (*.xplane.pb) under {folder}: profile a run first (Profile steps A-B).")
    return captures[-1]


def xplane_module() -> Any:
    """TensorFlow's XSpace protocol buffer module (`tsl`, or the copy inside `tensorflow`)."""
    try:
        from tsl.profiler.protobuf import xplane_pb2
    except ImportError:
        try:
            from tensorflow.tsl.profiler.protobuf import xplane_pb2
        except ImportError as exc:
            raise TraceUnreadable(
                "This TensorFlow has no reader for profiler traces (xplane_pb2); open the trace in TensorBoard's Profile tab instead."
            ) from exc
    return xplane_pb2


def read_xspace(path: Path) -> Any:
    """One `.xplane.pb` file as an XSpace message."""
    size = path.stat().st_size
    if size > MAX_TRACE_BYTES:
        raise TraceUnreadable(f"{path} is {size / 2**20:.0f} MiB, too large to read here: profile fewer steps, or use TensorBoard.")
    space = xplane_module().XSpace()
    try:
        space.ParseFromString(path.read_bytes())
    except Exception as exc:  # protobuf's DecodeError and friends
        raise TraceUnreadable(f"{path} is not a readable profiler trace ({exc}); it may be cut short. Profile the run again.") from exc
    return space


def summarize_trace(trace_dir: str | Path, group_by: str = "type") -> TraceSummary:
    """Time per op type ("MatMul") or per op name ("dense/MatMul") in the newest capture under `trace_dir`."""
    if group_by not in GROUPINGS:
        raise ValueError(f"group_by must be one of {GROUPINGS}, not {group_by!r}")
    capture = latest_capture(trace_dir)
    files = tuple(sorted(capture.glob("*.xplane.pb")))
    planes = [plane for path in files for plane in read_xspace(path).planes]
    devices = [plane for plane in planes if plane.name.startswith("/device:")]
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    timelines = 0
    for plane in devices:
        timelines += _add_device_kernels(plane, totals)
    source = "accelerator kernels, by the TensorFlow op that launched them"
    if not totals:
        timelines = sum(_add_host_ops(plane, totals) for plane in planes if plane.name.startswith("/host:"))
        source = "TensorFlow ops on the host's threads, self time"
    if not totals:
        raise TraceUnreadable(f"The trace in {capture} holds no TensorFlow op events: the profiled steps may have ended first.")
    ops = _grouped(totals, group_by)
    return TraceSummary(capture, files, ops, sum(op.total_s for op in ops), source, timelines)


def format_top_ops(summary: TraceSummary, limit: int = 10) -> str:
    """The top `limit` ops as a small text table, for the terminal."""
    lines = [f"Top ops in {summary.capture_dir} ({summary.source}):", f"  {'op':<32} {'total':>10} {'share':>7} {'count':>7}"]
    for op in summary.ops[:limit]:
        lines.append(f"  {op.name[:32]:<32} {op.total_s * 1e3:>8.2f} ms {op.share:>6.1%} {op.count:>7,}")
    rest = summary.ops[limit:]
    if rest:
        lines.append(f"  … {len(rest)} more ops, {sum(op.total_s for op in rest) * 1e3:.2f} ms together")
    return "\n".join(lines)


def _grouped(totals: dict[str, list[float]], group_by: str) -> tuple[OpTime, ...]:
    merged: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for tf_op, (seconds, count) in totals.items():
        name, _, op_type = tf_op.rpartition(":")
        key = (op_type or tf_op) if group_by == "type" else LOOP_PREFIX.sub("", name or tf_op)
        merged[key][0] += seconds
        merged[key][1] += count
    whole = sum(seconds for seconds, _ in merged.values()) or 1.0
    ops = (OpTime(key, seconds, int(count), seconds / whole) for key, (seconds, count) in merged.items())
    return tuple(sorted(ops, key=lambda op: -op.total_s))


def _add_device_kernels(plane: Any, totals: dict[str, list[float]]) -> int:
    """Kernel time per launching TensorFlow op (the kernel's own name when it has none); returns the lines read."""
    stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    lines = [line for line in plane.lines if line.name not in DERIVED_LINES and line.events]
    for line in lines:
        for event in line.events:
            meta = plane.event_metadata[event.metadata_id]
            tf_op = _stat_text(plane, event.stats, stat_names, "tf_op") or _stat_text(plane, meta.stats, stat_names, "tf_op")
            entry = totals[tf_op or meta.display_name or meta.name]
            entry[0] += event.duration_ps * 1e-12
            entry[1] += 1
    return len(lines)


def _add_host_ops(plane: Any, totals: dict[str, list[float]]) -> int:
    """Self time of the TensorFlow op events on each host thread; returns the threads that ran ops."""
    threads = 0
    for line in plane.lines:
        events = sorted(
            ((event.offset_ps, event.duration_ps, plane.event_metadata[event.metadata_id].name) for event in line.events),
            key=lambda item: (item[0], -item[1]),
        )
        ops = [event for event in events if TF_OP_EVENT.match(event[2])]
        if ops:
            threads += 1
            _add_self_times(ops, totals)
    return threads


def _add_self_times(ops: Iterable[tuple[int, int, str]], totals: dict[str, list[float]]) -> None:
    """Sum each op's duration less the ops nested in it (events sorted by start, longer first)."""
    stack: list[list[Any]] = []  # [end, name, self time]
    for start, duration, name in ops:
        while stack and stack[-1][0] <= start:
            _close(stack.pop(), totals)
        if stack:
            stack[-1][2] -= min(duration, stack[-1][0] - start)
        stack.append([start + duration, name, duration])
    while stack:
        _close(stack.pop(), totals)


def _close(frame: list[Any], totals: dict[str, list[float]]) -> None:
    _, name, self_ps = frame
    entry = totals[name]
    entry[0] += max(0, self_ps) * 1e-12
    entry[1] += 1


def _stat_text(plane: Any, stats: Iterable[Any], stat_names: dict[int, str], wanted: str) -> str:
    """The text of stat `wanted` ("tf_op"): a string, or a reference to a stat metadata's name."""
    for stat in stats:
        if stat_names.get(stat.metadata_id) != wanted:
            continue
        if stat.str_value:
            return str(stat.str_value)
        if stat.ref_value and stat.ref_value in plane.stat_metadata:
            return str(plane.stat_metadata[stat.ref_value].name)
    return ""
