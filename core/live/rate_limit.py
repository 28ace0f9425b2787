"""At most so many updates per second: progress text and bars need ~4 a second, not one per poll.

A progress bar's `setValue` repaints at once (synchronously, holding the GIL
~1 ms offscreen); at the 20 Hz poll rate that alone took ~2% of a fast
training thread's time.
"""

from __future__ import annotations

import time

PROGRESS_INTERVAL_S = 0.25


class RateLimit:
    """`ready()` is True at most once per `interval_s` (monotonic clock), and always the first time."""

    def __init__(self, interval_s: float = PROGRESS_INTERVAL_S):
        self.interval_s = interval_s
        self._last: float | None = None

    def ready(self) -> bool:
        now = time.monotonic()
        if self._last is not None and now - self._last < self.interval_s:
            return False
        self._last = now
        return True

    def reset(self) -> None:
        """The next `ready()` is True (a new run)."""
        self._last = None
