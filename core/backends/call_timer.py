"""The per-call clock of a backend job, read off the training loop so Keras's dispatch never waits for it.

Keras hands a batch-end callback that says `async_safe` to a thread pool,
with the call's logs as the backend's arrays: reading the loss there waits for
that call alone to finish, while the training loop already dispatches the next
one (JAX keeps its asynchronous dispatch, as in a bare `model.fit`). A call
ends when its loss has been read back, the TensorFlow engine's clock; step time
is the time between the ends of consecutive calls over the steps in the call.

The pool may run two calls' callbacks out of order, so the calls are put back
in order (by epoch and step) and an end is never earlier than the previous
call's: one device runs the calls in order, so a later call's end bounds an
earlier one's. Whether to dispatch another call (the run's steps reached, or
Stop asked) is decided in the training loop's thread before each call. Steps go
to the parent at most every SEND_INTERVAL_S (the warm-up call, a stop and the
end at once), so sending never costs a call its time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from core.backends.job_setup import peak_rss_bytes

Send = Callable[[dict[str, Any]], None]
SEND_INTERVAL_S = 0.01
"""How often steps are sent to the parent at most (the live plots draw at 10 Hz)."""


class CallClock:
    """Call ends in call order: (epoch, end step, the epoch's running mean loss, when it was read) in, step records out."""

    def __init__(self, steps_per_call: int, calls_per_epoch: int, send: Send, stop: threading.Event) -> None:
        self.steps_per_call, self.calls_per_epoch = steps_per_call, calls_per_epoch
        self.send, self.stop = send, stop
        self.steps_done = 0
        self.previous_end = time.perf_counter()
        self._lock = threading.Lock()
        self._arrived: dict[int, tuple[int, float, float]] = {}
        self._next_call = 0
        self._epoch_sum, self._epoch_steps = 0.0, 0
        self._unsent: list[list[Any]] = []
        self._last_send = 0.0

    def start(self) -> None:
        """Training begins: the warm-up call is timed from here."""
        self.previous_end = time.perf_counter()

    def call_ended(self, epoch: int, end_step: int, running_mean: float, ended: float) -> None:
        """One call's loss was read back at `ended`; its steps (and any it was waiting for) become records."""
        index = epoch * self.calls_per_epoch + end_step // self.steps_per_call
        with self._lock:
            self._arrived[index] = (end_step, running_mean, ended)
            while self._next_call in self._arrived:
                self._add(*self._arrived.pop(self._next_call))
                self._next_call += 1

    def flush(self) -> None:
        """Send the records not sent yet."""
        with self._lock:
            self._send()

    def _add(self, end_step: int, running_mean: float, ended: float) -> None:
        """The call's records: its mean loss (from the epoch's running mean) and its steps' share of the time since the previous end."""
        if end_step < self.steps_per_call:  # the epoch's first call: Keras reset its running mean
            self._epoch_sum, self._epoch_steps = 0.0, 0
        count = end_step + 1 - self._epoch_steps
        running_sum = running_mean * (end_step + 1)
        call_loss = (running_sum - self._epoch_sum) / count
        self._epoch_sum, self._epoch_steps = running_sum, end_step + 1
        ended = max(ended, self.previous_end)
        per_step = (ended - self.previous_end) / count
        self.previous_end = ended
        warmup = self.steps_done == 0
        first = self.steps_done + 1
        self.steps_done += count
        self._unsent.extend([first + i, call_loss, per_step, warmup] for i in range(count))
        if warmup or self.stop.is_set() or ended - self._last_send >= SEND_INTERVAL_S:
            self._send()

    def _send(self) -> None:
        if self._unsent:
            self.send({"event": "steps", "records": self._unsent, "peak_rss_bytes": peak_rss_bytes()})
            self._unsent = []
            self._last_send = time.perf_counter()


def call_timer_class() -> type:
    """The Keras callback class (defined once Keras is imported with the run's backend)."""
    import keras

    class CallTimer(keras.callbacks.Callback):
        """Feeds a `CallClock` from Keras's batch ends and stops `model.fit` once the run's steps are dispatched or Stop is asked."""

        async_safe = True  # reads nothing of the model: Keras may call on_train_batch_end from its pool

        def __init__(self, total_steps: int, clock: CallClock) -> None:
            super().__init__()
            self.total_steps, self.clock = total_steps, clock
            self.epoch = 0
            self.dispatched = 0

        def on_train_begin(self, logs: Any = None) -> None:
            self.clock.start()

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.epoch = epoch  # stable in the pool: Keras waits for an epoch's batch ends before the next epoch

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self.dispatched += self.clock.steps_per_call
            if self.dispatched >= self.total_steps or self.clock.stop.is_set():
                self.model.stop_training = True  # this call is the last

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            running_mean = float(logs["loss"])  # waits for this call only (Keras converted it already when not async)
            self.clock.call_ended(self.epoch, batch, running_mean, time.perf_counter())

        def on_train_end(self, logs: Any = None) -> None:
            self.clock.flush()

    return CallTimer
