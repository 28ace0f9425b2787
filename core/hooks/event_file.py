"""TensorBoard event files written off the training thread, without a TensorFlow op per value.

`EventFileThread` queues a run's step records (an append in the training
thread) and writes them every few seconds. Each step's scalars become one
`Event` holding what `tf.summary.scalar` would write: a float32 scalar tensor
tagged with the "scalars" plugin on its first value. Records are framed by
`tf.io.TFRecordWriter` (length and CRCs), as every event file is.

Two encoders make the same bytes: `WireEncoder` writes the protocol-buffer
wire format by hand, `ProtoEncoder` fills TensorFlow's own `Event` and
`Summary` messages. The `hook_overhead` benchmark compares them on training
throughput (README, Performance).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from core.results import StepRecord

FILE_VERSION = "brain.Event:2"
SCALARS = (b"scalars", 1)  # plugin name, SummaryMetadata.DataClass (DATA_CLASS_SCALAR)
TEXT = (b"text", 2)  # DATA_CLASS_TENSOR


class EventEncoder(Protocol):
    """Turns one event's content into the bytes of a serialised `Event`."""

    def file_version(self, wall_time: float) -> bytes: ...

    def scalars(self, wall_time: float, step: int, values: Sequence[tuple[str, float]]) -> bytes: ...

    def text(self, wall_time: float, step: int, tag: str, text: str) -> bytes: ...


class EventFileThread(threading.Thread):
    """Writes one run's queued steps to one event file, every `flush_s` seconds and on `close()`.

    Per step: "loss", "step_time_ms" and "samples_per_s" (batch_size / step
    time); after each batch of steps written, what `memory_now()` returns
    ({tag: bytes}) at the latest step.
    """

    def __init__(
        self,
        run_dir: Path,
        batch_size: int,
        flush_s: float,
        memory_now: Callable[[], Mapping[str, int]],
        encoder: EventEncoder | None = None,
    ) -> None:
        super().__init__(name="tensorboard-writer", daemon=True)
        import tensorflow as tf

        self._batch_size = batch_size
        self._flush_s = flush_s
        self._memory_now = memory_now
        self._encoder = encoder or WireEncoder()
        self._lock = threading.Lock()
        self._pending: list[tuple[float, Sequence[StepRecord]]] = []
        self._closing = threading.Event()
        self._last_step = 0
        name = f"events.out.tfevents.{time.time():.0f}.{socket.gethostname()}.{os.getpid()}.{id(self)}.v2"
        self._file = tf.io.TFRecordWriter(str(run_dir / name))
        self._file.write(self._encoder.file_version(time.time()))

    def add_steps(self, records: Sequence[StepRecord]) -> None:
        """Queue one call's records (in the training thread: an append under a lock, nothing more)."""
        if records:
            with self._lock:
                self._pending.append((time.time(), records))

    def add_text(self, tag: str, text: str, step: int) -> None:
        """Write a text summary (a string tensor of the "text" plugin) at once."""
        self._file.write(self._encoder.text(time.time(), step, tag, text))

    def run(self) -> None:
        while not self._closing.wait(self._flush_s):
            self._write_pending()

    def close(self) -> None:
        """Write what is queued and the memory at the last step, then close the file."""
        self._closing.set()
        if self.is_alive():
            self.join()
        self._write_pending(final=True)
        self._file.close()

    def _write_pending(self, final: bool = False) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        write, batch, scalars = self._file.write, float(self._batch_size), self._encoder.scalars
        for wall_time, records in pending:
            for record in records:
                milliseconds = record.step_time_s * 1000.0
                values = [("loss", record.loss), ("step_time_ms", milliseconds)]
                if milliseconds > 0:
                    values.append(("samples_per_s", batch * 1000.0 / milliseconds))
                write(scalars(wall_time, record.step, values))
                self._last_step = record.step
        if (pending or final) and self._last_step:
            memory = [(tag, float(value)) for tag, value in self._memory_now().items()]
            if memory:
                write(scalars(time.time(), self._last_step, memory))
        self._file.flush()


class WireEncoder:
    """Writes the `Event` wire format by hand: each tag's prefix encoded once, then a few bytes a value."""

    def __init__(self) -> None:
        self._tags = TagPrefixes()

    def file_version(self, wall_time: float) -> bytes:
        return _event(wall_time, None, _bytes_field(3, FILE_VERSION.encode()))  # Event.file_version

    def scalars(self, wall_time: float, step: int, values: Sequence[tuple[str, float]]) -> bytes:
        return _event(wall_time, step, _summary([self._tags.scalar(tag, value) for tag, value in values]))

    def text(self, wall_time: float, step: int, tag: str, text: str) -> bytes:
        tensor = _varint_field(1, 7) + _bytes_field(8, text.encode())  # dtype DT_STRING, string_val
        return _event(wall_time, step, _summary([self._tags.prefix(tag, TEXT) + _bytes_field(8, tensor)]))


class ProtoEncoder:
    """Fills TensorFlow's own `Event` and `Summary` messages and serialises them."""

    def __init__(self) -> None:
        from tensorflow.core.framework import summary_pb2, tensor_pb2, types_pb2
        from tensorflow.core.util import event_pb2

        self._event, self._summary, self._tensor, self._types = event_pb2.Event, summary_pb2, tensor_pb2, types_pb2
        self._seen: set[str] = set()

    def file_version(self, wall_time: float) -> bytes:
        return self._event(wall_time=wall_time, file_version=FILE_VERSION).SerializeToString()

    def scalars(self, wall_time: float, step: int, values: Sequence[tuple[str, float]]) -> bytes:
        event = self._event(wall_time=wall_time, step=step)
        for tag, value in values:
            tensor = self._tensor.TensorProto(dtype=self._types.DT_FLOAT, float_val=[value])
            self._add(event, tag, SCALARS, tensor)
        return event.SerializeToString()

    def text(self, wall_time: float, step: int, tag: str, text: str) -> bytes:
        event = self._event(wall_time=wall_time, step=step)
        self._add(event, tag, TEXT, self._tensor.TensorProto(dtype=self._types.DT_STRING, string_val=[text.encode()]))
        return event.SerializeToString()

    def _add(self, event, tag: str, plugin: tuple[bytes, int], tensor) -> None:
        value = event.summary.value.add(tag=tag, tensor=tensor)
        if tag not in self._seen:
            self._seen.add(tag)
            value.metadata.plugin_data.plugin_name = plugin[0].decode()
            value.metadata.data_class = plugin[1]


class TagPrefixes:
    """The encoded start of each tag's `Summary.Value`: the tag, and the plugin on its first value only."""

    def __init__(self) -> None:
        self._seen: dict[str, bytes] = {}

    def prefix(self, tag: str, plugin: tuple[bytes, int]) -> bytes:
        known = self._seen.get(tag)
        if known is not None:
            return known
        self._seen[tag] = _bytes_field(1, tag.encode())  # Value.tag
        name, data_class = plugin
        metadata = _bytes_field(1, _bytes_field(1, name)) + _varint_field(4, data_class)  # plugin_data.plugin_name, data_class
        return self._seen[tag] + _bytes_field(9, metadata)  # Value.metadata

    def scalar(self, tag: str, value: float) -> bytes:
        """A `Summary.Value` holding a float32 scalar tensor (dtype DT_FLOAT, one packed float_val)."""
        return self.prefix(tag, SCALARS) + b"\x42\x08\x08\x01\x2a\x04" + struct.pack("<f", value)


def _summary(values: Sequence[bytes]) -> bytes:
    """`Event.summary` (field 5): a `Summary` of these encoded values."""
    return _bytes_field(5, b"".join(_bytes_field(1, value) for value in values))


def _event(wall_time: float, step: int | None, content: bytes) -> bytes:
    """An `Event`: wall_time (field 1, double), step (field 2), then `content` (encoded fields)."""
    head = b"\x09" + struct.pack("<d", wall_time)
    return head + (_varint_field(2, step) if step is not None else b"") + content


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
