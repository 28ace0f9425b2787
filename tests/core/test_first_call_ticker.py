"""The CLI's line while the engine's first call blocks: the elapsed time, updated, and what a stop does then."""

from __future__ import annotations

import io
import threading

from core.cli.output import ProgressPrinter, first_call_text
from core.formatting import format_elapsed
from core.results import StepRecord
from tests.waiting import wait_until


def test_the_first_call_shows_its_elapsed_time_and_a_stop_says_when_it_takes_effect():
    stream = io.StringIO()
    printer = ProgressPrinter(total_steps=3, batch_size=8, stream=stream)
    stop = threading.Event()
    with printer.ticking(stop):
        wait_until(lambda: "building the model and compiling the step… 2 s" in stream.getvalue())
        stop.set()
        wait_until(lambda: "stopping when the first call ends (compiling cannot be interrupted)…" in stream.getvalue())
        printer([StepRecord(step=1, loss=0.5, step_time_s=0.01, warmup=True)])
        ticked = stream.getvalue()
    assert stream.getvalue() == ticked and ticked.endswith("(warm-up)   "), "no tick after the first step"


def test_elapsed_times_read_as_spoken():
    assert [format_elapsed(s) for s in (0, 42, 72, 3725)] == ["0 s", "42 s", "1 min 12 s", "1 h 2 min"]
    assert first_call_text(72).startswith("building the model and compiling") and first_call_text(72).endswith(format_elapsed(72))
