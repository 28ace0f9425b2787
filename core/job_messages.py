"""What a job in a child process and its parent say to each other: one typed schema and one codec.

Each message is a small frozen dataclass; on the pipe (`core.child_process`: its
framing, one JSON object per line) it is `encode(message)`, its kind in "event",
and `decode` gives the message back. Who sends which:

  Started   "start"   a backend job (`backends.fit_job`) and every cluster worker (`cluster.worker`), once set up
  CallBegun "call"    the cluster's chief, before each call
  Steps     "steps"   both, after calls: their step records (the warm-up's flagged), the job's peak RSS
                      and its accelerators' allocator peaks
  Turn      "turn"    a child taking turns in interleaved rounds, before a call outside its turn (`training.parent_turns`)
  Go        "go"      its parent's answer, on the child's control pipe: calls up to a step, or seconds of training
  Result    "result"  a cluster worker's outcome, its whole RunResult
  Failed    "error"   a cluster worker that could not run (a missing model file, a config this machine refuses)
  Ended     "ended"   a backend job's last word (its reply): the error that ended it, its peak RSS, whether
                      TensorFlow was imported, its accelerators' allocator peaks

A message of an unknown kind, or one missing a field or holding a wrong value,
raises MessageError saying which and what it held. Parent and child are the same
version of the app: the schema is not versioned, and none of it is stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from core import child_process
from core.results import RunResult, StepRecord


class MessageError(ValueError):
    """A message that is not one of the schema's kinds, or not well formed."""


class _Message:
    """What every kind has: its name on the pipe, its fields as JSON, and the way back."""

    EVENT: ClassVar[str]

    def to_fields(self) -> dict[str, Any]:
        return {name: list(value) if isinstance(value, tuple) else value for name, value in vars(self).items()}


@dataclass(frozen=True)
class Started(_Message):
    """The job is set up: its size, devices and versions; a backend job adds its call size, memory estimate,
    FLOP count, notes and the learning rate its optimizer starts with."""

    EVENT: ClassVar[str] = "start"
    total_steps: int
    replicas: int = 1
    devices: tuple[str, ...] = ()
    environment: dict[str, Any] = field(default_factory=dict)
    steps_per_call: int | None = None
    memory_estimate: dict[str, Any] = field(default_factory=dict)
    flops: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    learning_rate: float | None = None

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> Started:
        return cls(
            total_steps=int(data["total_steps"]),
            replicas=int(data.get("replicas") or 1),
            devices=tuple(str(device) for device in data.get("devices") or ()),
            environment=dict(data.get("environment") or {}),
            steps_per_call=_optional(int, data.get("steps_per_call")),
            memory_estimate=dict(data.get("memory_estimate") or {}),
            flops=dict(data.get("flops") or {}),
            notes=tuple(str(note) for note in data.get("notes") or ()),
            learning_rate=_optional(float, data.get("learning_rate")),
        )


@dataclass(frozen=True)
class CallBegun(_Message):
    """The next call runs steps `first_step` .. `first_step + steps - 1` (1-based)."""

    EVENT: ClassVar[str] = "call"
    first_step: int
    steps: int

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> CallBegun:
        return cls(int(data["first_step"]), int(data["steps"]))


@dataclass(frozen=True)
class Steps(_Message):
    """Step records of the calls since the last (warm-up ones flagged), the job's peak resident memory and
    its accelerators' allocator peaks by device ("GPU:0")."""

    EVENT: ClassVar[str] = "steps"
    records: tuple[StepRecord, ...]
    peak_rss_bytes: int | None = None
    device_peaks: dict[str, int] = field(default_factory=dict)

    def to_fields(self) -> dict[str, Any]:
        rows = [[r.step, r.loss, r.step_time_s, r.warmup] for r in self.records]  # compact: a message per call
        return {"records": rows, "peak_rss_bytes": self.peak_rss_bytes, "device_peaks": self.device_peaks}

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> Steps:
        records = tuple(StepRecord(int(step), float(loss), float(seconds), bool(warmup)) for step, loss, seconds, warmup in data["records"])
        return cls(records, _optional(int, data.get("peak_rss_bytes")), _peaks(data.get("device_peaks")))


@dataclass(frozen=True)
class Turn(_Message):
    """The child asks for its next turn before the call starting at `next_step`."""

    EVENT: ClassVar[str] = "turn"
    next_step: int

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> Turn:
        return cls(int(data["next_step"]))


@dataclass(frozen=True)
class Go(_Message):
    """The parent grants a turn: calls starting at `until_step` at most, or `seconds` of training; neither: no limit."""

    EVENT: ClassVar[str] = "go"
    until_step: float | None = None
    seconds: float | None = None

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> Go:
        return cls(_optional(float, data.get("until_step")), _optional(float, data.get("seconds")))


@dataclass(frozen=True)
class Result(_Message):
    """A cluster worker's run ended: its result."""

    EVENT: ClassVar[str] = "result"
    result: RunResult

    def to_fields(self) -> dict[str, Any]:
        return {"result": self.result.to_dict()}

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> Result:
        return cls(RunResult.from_dict(dict(data["result"])))


@dataclass(frozen=True)
class Failed(_Message):
    """A cluster worker could not run: why, in one readable line."""

    EVENT: ClassVar[str] = "error"
    message: str

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> Failed:
        return cls(str(data["message"]))


@dataclass(frozen=True)
class Ended(_Message):
    """A backend job's last word: the error that ended it (None: none did), its peak RSS, whether TensorFlow was
    imported, its accelerators' allocator peaks by device."""

    EVENT: ClassVar[str] = "ended"
    error: str | None = None
    peak_rss_bytes: int | None = None
    tensorflow_imported: bool | None = None
    device_peaks: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> Ended:
        return cls(
            _optional(str, data.get("error")),
            _optional(int, data.get("peak_rss_bytes")),
            _optional(bool, data.get("tensorflow_imported")),
            _peaks(data.get("device_peaks")),
        )


JobMessage = Started | CallBegun | Steps | Turn | Go | Result | Failed | Ended
MESSAGE_KINDS: tuple[type[JobMessage], ...] = (Started, CallBegun, Steps, Turn, Go, Result, Failed, Ended)
_KIND_OF_EVENT: dict[str, type[JobMessage]] = {kind.EVENT: kind for kind in MESSAGE_KINDS}
Send = Callable[[JobMessage], None]
"""How a job hands a message on: `send` in a child, a list's `append` in a test, a probe's own listener."""
M = TypeVar("M", bound=_Message)


def encode(message: JobMessage) -> dict[str, Any]:
    """The message as a JSON object: {"event": its kind, its fields...}."""
    return {"event": message.EVENT, **message.to_fields()}


def decode(data: Any) -> JobMessage:
    """The message a JSON object holds; MessageError for an unknown kind or a malformed message."""
    if not isinstance(data, Mapping):
        raise MessageError(f"a job message is a JSON object with an 'event', not {_shown(data)}")
    event = data.get("event")
    kind = _KIND_OF_EVENT.get(event) if isinstance(event, str) else None
    if kind is None:
        raise MessageError(f"unknown job message {event!r} (known: {', '.join(_KIND_OF_EVENT)}): {_shown(data)}")
    try:
        return kind.from_fields(data)
    except KeyError as exc:
        raise MessageError(f"malformed {event!r} message: no {exc.args[0]!r} in {_shown(data)}") from exc
    except (TypeError, ValueError, AttributeError) as exc:
        raise MessageError(f"malformed {event!r} message ({type(exc).__name__}: {exc}): {_shown(data)}") from exc


def decode_as(kind: type[M], data: Any) -> M:
    """`decode(data)`, which must be of `kind` (MessageError otherwise)."""
    message = decode(data)
    if not isinstance(message, kind):
        raise MessageError(f"expected a {kind.EVENT!r} message, got {message.EVENT!r}")
    return message


def send(message: JobMessage) -> None:
    """In the child: send one message to the parent (`child_process.send`); OSError when the parent is gone."""
    child_process.send(encode(message))


def tell(child: child_process.Child, message: JobMessage) -> None:
    """In the parent: send one message to the child on its control pipe (`Child.tell`)."""
    child.tell(encode(message))


def heard(stop: threading.Event) -> JobMessage | None:
    """In the child: the next message its parent told it, waiting for it (`child_process.heard`); None once `stop` is set."""
    data = child_process.heard(stop)
    return None if data is None else decode(data)


def _optional(kind: Callable[[Any], Any], value: Any) -> Any:
    return None if value is None else kind(value)


def _peaks(value: Any) -> dict[str, int]:
    return {str(device): int(peak) for device, peak in (value or {}).items()}


def _shown(data: Any, chars: int = 200) -> str:
    text = repr(data)
    return text if len(text) <= chars else text[:chars] + "…"
