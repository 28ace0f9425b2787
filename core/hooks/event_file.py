"""TensorBoard event files written off the training thread, without a TensorFlow op per value.

`EventFileThread` queues a run's step records (an append in the training
thread) and writes them every few seconds. Each step's scalars become one
`Event` holding what `tf.summary.scalar` would write: a float32 scalar tensor
tagged with the "scalars" plugin on its first value, built with TensorFlow's
own `Event`/`Summary` messages. Records are framed by `tf.io.TFRecordWriter`
(length and CRCs), as every event file is. (A hand-written wire-format encoder
was measured against these messages in the writer thread: no difference in
training throughput beyond noise, so the messages stay; README, Performance.)
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.results import StepRecord

FILE_VERSION = "brain.Event:2"
SCALARS = (b"scalars", 1)  # plugin name, SummaryMetadata.DataClass (DATA_CLASS_SCALAR)
TEXT = (b"text", 2)  # DATA_CLASS_TENSOR


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
    ) -> None:
        super().__init__(name="tensorboard-writer", daemon=True)
        import tensorflow as tf

        self._batch_size = batch_size
        self._flush_s = flush_s
        self._memory_now = memory_now
        self._encoder = EventEncoder()
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


class EventEncoder:
    """Fills TensorFlow's own `Event` and `Summary` messages and serialises them."""

    def __init__(self) -> None:
        from tensorflow.core.framework import tensor_pb2, types_pb2
        from tensorflow.core.util import event_pb2

        self._event, self._tensor, self._types = event_pb2.Event, tensor_pb2, types_pb2
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

    def _add(self, event: Any, tag: str, plugin: tuple[bytes, int], tensor: Any) -> None:
        """One `Summary.Value`; the plugin metadata on a tag's first value only, as tf.summary writes it."""
        value = event.summary.value.add(tag=tag, tensor=tensor)
        if tag not in self._seen:
            self._seen.add(tag)
            value.metadata.plugin_data.plugin_name = plugin[0].decode()
            value.metadata.data_class = plugin[1]
