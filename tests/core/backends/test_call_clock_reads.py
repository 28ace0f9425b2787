"""A read that waits for a call hands the calls done meanwhile their share of the wait (real JAX arrays, a JAX process).

A JAX job's median step stood above its mean (0.84 against 0.74 ms): reading one call that was not done waited for it,
the calls queued behind it finished during that wait, and, read only at the next dispatch, they shared a few
microseconds while the call read carried their time. Windows of eight calls then held either the wait or the crumbs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.backends.available import is_installed

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not is_installed("jax"), reason="JAX is not installed")]

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = textwrap.dedent(
    """
    import json, threading
    import jax.numpy as jnp
    from core.backends.call_timer import CallClock, timed_calls_class

    sent = []
    clock = CallClock(1, sent.append, threading.Event())
    calls = timed_calls_class()(clock, 100, None, 1, 100)
    big = jnp.ones((2000, 2000))
    slow = (big @ big).sum()  # dispatched: the read below waits for it
    done = [jnp.asarray(float(i)).block_until_ready() for i in range(3)]
    unknown = 2.5  # a loss that cannot be asked whether it is done: left in flight, and the calls after it
    calls.in_flight.extend([(0, slow), (1, done[0]), (2, done[1]), (3, unknown), (4, done[2])])
    calls.read(1)
    clock.flush()
    records = [record for message in sent for record in message.records]
    print(json.dumps({"steps": [r.step for r in records], "times": [r.step_time_s for r in records], "in_flight": len(calls.in_flight)}))
    """
)


def test_the_calls_done_while_a_read_waited_are_read_with_it_and_share_its_time():
    env = dict(os.environ, KERAS_BACKEND="jax")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert read["steps"] == [1, 2, 3], "the call waited for and the two done behind it, not the one that cannot tell"
    assert len(set(read["times"])) == 1 and read["times"][0] > 0, "one wait, shared evenly"
    assert read["in_flight"] == 2
