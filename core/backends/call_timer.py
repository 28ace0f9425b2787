"""The per-call clock of a backend job: each call's loss is read while the next calls run.

A Keras callback that reads a call's logs at its batch end makes the training
loop wait for that call before it dispatches the next, and JAX loses its
asynchronous dispatch: the device idles while Python prepares the next call.
So `model.fit` gets a `CallbackList` of its own (`timed_calls_class`) that keeps
CALLS_IN_FLIGHT calls dispatched: once call N is dispatched it reads the loss of
call N - CALLS_IN_FLIGHT (the device has the later calls queued meanwhile), and
that moment is that call's end. A call whose loss is ready already (JAX can be
asked without waiting: `is_ready`) is read at once, at each dispatch: on a CPU,
where a small call is done by the time the next is dispatched, reading only
eight calls late clocked dispatch bursts (a median of 0.2 ms beside a mean of
2 ms), not steps. A read that waits for its call takes along the calls
behind it that finished meanwhile (read only at the next dispatch, they shared
microseconds while the call read carried their time, and under load the steps'
median read 0.07 ms beside windows' 0.43 ms). Calls seen done together (those,
and the ones still in flight at an epoch's end, read after Keras's end-of-epoch
state sync) share the time since the last ones evenly, so none reads ~0 ms
beside one that carries them all;
the epoch-end work stays in the steps' time, as a user's `fit` pays it
(leaving it out over-reported the MLP's samples/s by 12-15% against the app's
own clock, and draining before it cost 6-7%: `backend_overhead`, 2026-11-27).
The run's last calls are read when the last is dispatched, before Keras's final
state sync: that sync happens once per run, after training, and counted in the
last step it made a 200-step MLP run read 38,000 samples/s beside 97,000 at 2,000. Measured with
`benchmarks/backend_overhead.py` against a bare `fit` (which runs a whole epoch
ahead): reading each call at its own end cost the MLP 27% at one step per call;
one call in flight 0.93x, two 1.01x on the MLP but 0.95-0.975x on the small CNN,
eight 1.02x on the CNN and 1.07x on the MLP.

Step time is the time between the ends of consecutive calls over the steps in
the call, the TensorFlow engine's clock; the first call (tracing, compiling) is
the warm-up, read at the end of its own one-call `fit` (`fit_job`), and so are
the next `fit`'s first calls (`start_calls`): the first, read at once, carries
that fit's set-up (~9 ms on the MLP); the next run slower as a fit starts, and
are read in flight as the others (`warmup_until`: read one by one, they left the
calls after them to start cold). Steps go to the parent at most every
SEND_INTERVAL_S (the warm-up and a stop at once, the rest at the end).

In interleaved rounds the job runs only inside the turn its parent granted
(`core.training.parent_turns`): before a call outside it, the calls in flight are
read and their steps sent, the parent is asked for the next turn, and the wait is
left out of the clock, as the TensorFlow engine leaves out its `wait_turn`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from core.backends.job_setup import peak_rss_bytes
from core.backends.peak_memory import device_peaks
from core.job_messages import Send, Steps
from core.results import StepRecord
from core.training.parent_turns import ParentTurns

SEND_INTERVAL_S = 0.05
"""How often steps are sent to the parent at most (the live plots draw at 10 Hz)."""
CALLS_IN_FLIGHT = 8
"""Calls dispatched and not yet read: the device has the next ones queued while the oldest is read."""


def window_steps(backend: str, steps_per_call: int) -> int:
    """Steps whose calls' ends a run's clock may see together (`metrics.summarize`'s windows): a backend job's calls in flight."""
    return 1 if backend == "tensorflow" else CALLS_IN_FLIGHT * max(int(steps_per_call or 1), 1)


class CallClock:
    """Calls' ends, in call order, become step records: each call's own mean loss and its steps' share of the time.

    `backend` names the framework whose accelerators' allocator peaks go with the records ("": none).
    """

    def __init__(self, steps_per_call: int, send: Send, stop: threading.Event, backend: str = "") -> None:
        self.steps_per_call, self.send, self.stop, self.backend = steps_per_call, send, stop, backend
        self.steps_done = 0
        self.warmup_until = 0  # steps up to this one are warm-up however they are read (a fit's first calls)
        self.previous_end = time.perf_counter()
        self._epoch_sum, self._epoch_steps = 0.0, 0
        self._unsent: list[StepRecord] = []
        self._last_send = 0.0

    def start(self) -> None:
        """Training begins: the warm-up call is timed from here."""
        self.previous_end = time.perf_counter()

    def calls_ended(self, calls: list[tuple[int, float]], ended: float, warmup: bool = False) -> None:
        """Calls seen done together at `ended`, in order, as (the epoch's step each ended at, Keras's running mean loss there).

        `warmup` marks them as the warm-up (the run's first call always is).

        They finished some time since the last calls seen done, and nothing tells when each did: the time is shared
        evenly over their steps (as a call's steps share its time), so no call reads ~0 ms beside one that carries all.
        """
        counted = []
        for end_step, running_mean in calls:
            if end_step < self.steps_per_call:  # the epoch's first call: Keras started its running mean again
                self._epoch_sum, self._epoch_steps = 0.0, 0
            count = end_step + 1 - self._epoch_steps
            running_sum = running_mean * (end_step + 1)
            counted.append(((running_sum - self._epoch_sum) / count, count))
            self._epoch_sum, self._epoch_steps = running_sum, end_step + 1
        per_step = (ended - self.previous_end) / max(sum(count for _, count in counted), 1)
        self.previous_end = ended
        warmup = warmup or self.steps_done == 0
        for call_loss, count in counted:
            first = self.steps_done + 1
            self.steps_done += count
            self._unsent.extend(StepRecord(first + i, call_loss, per_step, warmup or first + i <= self.warmup_until) for i in range(count))
        if warmup or self.stop.is_set() or ended - self._last_send >= SEND_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        """Send the records not sent yet."""
        if self._unsent:
            self.send(Steps(tuple(self._unsent), peak_rss_bytes(), device_peaks(self.backend)))
            self._unsent = []
            self._last_send = time.perf_counter()


def timed_calls_class() -> type:
    """The `CallbackList` class that times the calls (defined once Keras is imported with the run's backend)."""
    import keras

    class TimedCalls(keras.callbacks.CallbackList):
        """Keras's callback list for `model.fit` (with its History) that reads each call's loss CALLS_IN_FLIGHT calls late and stops the run."""

        def __init__(
            self,
            clock: CallClock,
            total_steps: int,
            model: Any,
            epochs: int,
            steps: int,
            start_calls: int = 1,
            turns: ParentTurns | None = None,
        ) -> None:
            super().__init__(add_history=True, model=model, verbose=0, epochs=epochs, steps=steps)
            self.clock, self.total_steps, self.turns = clock, total_steps, turns
            self.trained = model  # not `self.model`: on JAX that property syncs the model's state back on every call (7% of a small step)
            self.last_call = False
            self.dispatched = 0
            self.steps_before = clock.steps_done
            self.later_fit = clock.steps_done > 0
            if self.later_fit:  # its first calls are warm-up: read as the others are, so the calls after them are not read cold
                clock.warmup_until = clock.steps_done + start_calls * clock.steps_per_call
            self.in_flight: deque[tuple[int, Any]] = deque()

        def on_train_begin(self, logs: Any = None) -> None:
            super().on_train_begin(logs)
            if self.clock.steps_done == 0:
                self.clock.start()  # a later fit's set-up falls in its first call, a warm-up call too

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            super().on_train_batch_begin(batch, logs)
            next_step = self.steps_before + self.dispatched + 1
            if self.turns is None or self.turns.covers(next_step) or self.clock.stop.is_set():
                return
            self.read(len(self.in_flight))  # the turn's calls end here, their steps with the parent before it decides
            self.clock.flush()
            self.turns.wait_turn(next_step)
            self.clock.previous_end = time.perf_counter()  # the wait is no step's time

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.in_flight.append((batch, (logs or {})["loss"]))
            self.dispatched += self.clock.steps_per_call
            if self.dispatched >= self.total_steps or self.clock.stop.is_set():
                self.last_call = self.trained.stop_training = True
            if self.clock.steps_done == 0:
                return  # the warm-up: read at its fit's epoch end, Keras's one-off work there included
            if self.later_fit and self.dispatched == self.clock.steps_per_call:
                self.read(len(self.in_flight), warmup=True)  # a later fit's first call carries its set-up
                return
            if self.last_call:
                self.read(len(self.in_flight))  # the run's last calls, before Keras's final state sync
                return
            ready = 0
            while ready < len(self.in_flight) and _is_ready(self.in_flight[ready][1]):
                ready += 1  # done already: seen now, not when eight more calls were dispatched
            self.read(max(ready, len(self.in_flight) - CALLS_IN_FLIGHT))  # the calls dispatched after the oldest are queued behind it

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self.read(len(self.in_flight))
            super().on_epoch_end(epoch, logs)

        def on_train_end(self, logs: Any = None) -> None:
            self.read(len(self.in_flight))
            self.clock.flush()
            super().on_train_end(logs)

        def read(self, count: int, warmup: bool = False) -> None:
            """Wait for the oldest `count` calls in flight and clock their ends together, now."""
            if count <= 0:
                return
            calls = [self.in_flight.popleft() for _ in range(count)]
            read = [(end_step, float(loss)) for end_step, loss in calls]  # float() waits for each call, in order
            while self.in_flight and _is_ready(self.in_flight[0][1]):  # done while it waited: the wait was theirs too
                end_step, loss = self.in_flight.popleft()
                read.append((end_step, float(loss)))
            self.clock.calls_ended(read, time.perf_counter(), warmup)

    return TimedCalls


def _is_ready(value: Any) -> bool:
    """Whether a call's loss is computed already, asked without waiting (a JAX array); False where that cannot be asked."""
    is_ready = getattr(value, "is_ready", None)
    return bool(is_ready()) if callable(is_ready) else False
