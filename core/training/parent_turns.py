"""A run in a child process taking its turns in interleaved rounds from its parent (`core.jobs.rounds`).

The parent starts the child with TAKES_TURNS in its environment where one of the
run's hooks takes turns (a `RoundGate`). Before a call outside the turn it holds,
the child has sent the steps of its earlier calls, sends `Turn(next_step)`
and waits on its control pipe for `Go(until_step=N)` (calls starting at that
step at most) or `Go(seconds=S)` (of training), messages of `core.job_messages`;
the parent waits in its hooks' `wait_turn` on the child's behalf meanwhile
(`hooks.granted_turn`). Used by backend jobs (`core.backends.call_timer`,
which first reads the calls in flight) and by a cluster's chief worker (as a hook of
the TensorFlow engine, which leaves the wait out of the run's clock).
"""

from __future__ import annotations

import os
import threading
import time

from core.job_messages import Go, MessageError, Send, Turn, heard
from core.training.hooks import RunHook

TAKES_TURNS = "DEVICE_LAB_TAKES_TURNS"


def takes_turns() -> bool:
    """Whether this process was started to take turns (TAKES_TURNS set by its parent)."""
    return bool(os.environ.get(TAKES_TURNS))


class ParentTurns(RunHook):
    """The child's side: whether a call may start inside the turn granted, and asking the parent for the next one."""

    def __init__(self, send: Send, stop: threading.Event) -> None:
        self.send, self.stop = send, stop
        self.until_step: float = 0  # calls starting at this step at most, in the turn held
        self.deadline: float = 0.0  # or until this moment (time.perf_counter) for a turn of seconds

    def covers(self, next_step: int) -> bool:
        """Whether the turn held covers the call starting at `next_step`."""
        if self.deadline:
            return time.perf_counter() < self.deadline
        return next_step <= self.until_step

    def wait_turn(self, next_step: int) -> None:
        """Before the call at `next_step`: outside the turn held, ask the parent for the next and wait (or for a stop)."""
        if self.covers(next_step) or self.stop.is_set():
            return
        self.send(Turn(next_step))
        grant = heard(self.stop) or Go()  # a stop ends the wait: the run leaves after this call
        if not isinstance(grant, Go):
            raise MessageError(f"a turn is answered with a 'go' message, not {grant.EVENT!r}")
        if grant.seconds is not None:
            self.until_step, self.deadline = 0, time.perf_counter() + grant.seconds
        else:
            self.until_step, self.deadline = grant.until_step if grant.until_step is not None else float("inf"), 0.0
