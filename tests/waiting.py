"""Waiting on a condition, the one way the suite waits: poll until it holds, fail (or say False) past a generous limit.

The limit is a safety net for a hung test, never the claim: on a busy or
drifting machine a condition is late, not false.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_LIMIT_S = 30.0
POLL_S = 0.02


def became_true(
    condition: Callable[[], object], limit_s: float = DEFAULT_LIMIT_S, every_s: float = POLL_S, tick: Callable[[], object] | None = None
) -> bool:
    """Whether `condition()` held within `limit_s`; `tick` runs between polls (processing Qt events, say)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        if tick is not None:
            tick()
        time.sleep(every_s)
    return True


def wait_until(
    condition: Callable[[], object],
    what: str = "the condition",
    limit_s: float = DEFAULT_LIMIT_S,
    every_s: float = POLL_S,
    tick: Callable[[], object] | None = None,
) -> None:
    """Return once `condition()` holds; fail the test, naming `what`, when it has not within `limit_s`."""
    assert became_true(condition, limit_s, every_s, tick), f"{what} not within {limit_s:g} s"
