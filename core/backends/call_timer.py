"""The per-call clock of a backend job: each call's loss is read while the next calls run.

A Keras callback that reads a call's logs at its batch end makes the training
loop wait for that call before it dispatches the next, and JAX loses its
asynchronous dispatch: the device idles while Python prepares the next call.
So `model.fit` gets a `CallbackList` of its own (`timed_calls_class`) that keeps
CALLS_IN_FLIGHT calls dispatched: once call N is dispatched it reads the loss of
call N - CALLS_IN_FLIGHT (the device has the later calls queued meanwhile), and
that moment is that call's end. The calls still in flight at an epoch's end are
read there, where Keras synchronises anyway. Measured with
`benchmarks/backend_overhead.py` against a bare `fit` (which runs a whole epoch
ahead): reading each call at its own end cost the MLP 27% at one step per call;
one call in flight 0.93x, two 1.01x on the MLP but 0.95-0.975x on the small CNN,
eight 1.02x on the CNN and 1.07x on the MLP.

Step time is the time between the ends of consecutive calls over the steps in
the call, the TensorFlow engine's clock; the first call (tracing, compiling) is
the warm-up. Steps go to the parent at most every SEND_INTERVAL_S (the warm-up
call and a stop at once, the rest at the end).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from core.backends.job_setup import peak_rss_bytes

Send = Callable[[dict[str, Any]], None]
SEND_INTERVAL_S = 0.05
"""How often steps are sent to the parent at most (the live plots draw at 10 Hz)."""
CALLS_IN_FLIGHT = 8
"""Calls dispatched and not yet read: the device has the next ones queued while the oldest is read."""


class CallClock:
    """Calls' ends, in call order, become step records: each call's own mean loss and its steps' share of the time."""

    def __init__(self, steps_per_call: int, send: Send, stop: threading.Event) -> None:
        self.steps_per_call, self.send, self.stop = steps_per_call, send, stop
        self.steps_done = 0
        self.previous_end = time.perf_counter()
        self._epoch_sum, self._epoch_steps = 0.0, 0
        self._unsent: list[list[Any]] = []
        self._last_send = 0.0

    def start(self) -> None:
        """Training begins: the warm-up call is timed from here."""
        self.previous_end = time.perf_counter()

    def call_ended(self, end_step: int, running_mean: float, ended: float) -> None:
        """The call that ended at the epoch's step `end_step` was read back at `ended`; Keras's loss is the epoch's running mean."""
        if end_step < self.steps_per_call:  # the epoch's first call: Keras started its running mean again
            self._epoch_sum, self._epoch_steps = 0.0, 0
        count = end_step + 1 - self._epoch_steps
        running_sum = running_mean * (end_step + 1)
        call_loss = (running_sum - self._epoch_sum) / count
        self._epoch_sum, self._epoch_steps = running_sum, end_step + 1
        per_step = (ended - self.previous_end) / count
        self.previous_end = ended
        warmup = self.steps_done == 0
        first = self.steps_done + 1
        self.steps_done += count
        self._unsent.extend([first + i, call_loss, per_step, warmup] for i in range(count))
        if warmup or self.stop.is_set() or ended - self._last_send >= SEND_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        """Send the records not sent yet."""
        if self._unsent:
            self.send({"event": "steps", "records": self._unsent, "peak_rss_bytes": peak_rss_bytes()})
            self._unsent = []
            self._last_send = time.perf_counter()


def timed_calls_class() -> type:
    """The `CallbackList` class that times the calls (defined once Keras is imported with the run's backend)."""
    import keras

    class TimedCalls(keras.callbacks.CallbackList):
        """Keras's callback list for `model.fit` (with its History) that reads each call's loss CALLS_IN_FLIGHT calls late and stops the run."""

        def __init__(self, clock: CallClock, total_steps: int, model: Any, epochs: int, steps: int) -> None:
            super().__init__(add_history=True, model=model, verbose=0, epochs=epochs, steps=steps)
            self.clock, self.total_steps = clock, total_steps
            self.dispatched = 0
            self.in_flight: deque[tuple[int, Any]] = deque()

        def on_train_begin(self, logs: Any = None) -> None:
            super().on_train_begin(logs)
            self.clock.start()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.in_flight.append((batch, (logs or {})["loss"]))
            if len(self.in_flight) > CALLS_IN_FLIGHT:
                self.read_oldest()  # the calls dispatched after it are queued behind it
            self.dispatched += self.clock.steps_per_call
            if self.dispatched >= self.total_steps or self.clock.stop.is_set():
                self.model.stop_training = True  # this call is the last

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self.read_in_flight()
            super().on_epoch_end(epoch, logs)

        def on_train_end(self, logs: Any = None) -> None:
            self.read_in_flight()
            self.clock.flush()
            super().on_train_end(logs)

        def read_in_flight(self) -> None:
            """Wait for every call in flight and clock their ends."""
            while self.in_flight:
                self.read_oldest()

        def read_oldest(self) -> None:
            """Wait for the oldest call in flight and clock its end."""
            end_step, loss = self.in_flight.popleft()
            running_mean = float(loss)
            self.clock.call_ended(end_step, running_mean, time.perf_counter())

    return TimedCalls
