"""Interleaved rounds across the process boundary: a JAX job in its child and a cluster's chief take turns like in-process jobs."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.child_process import Child
from core.jobs import JobOptions, run_job
from core.jobs.rounds import WARMUP_ROUND, RoundGate, _Turns, rounds_measured, run_in_rounds
from core.results import RunStatus
from core.training.hooks import granted_turn
from tests.core.jobs.test_rounds import JOB, Order, StepsOf

ROOT = Path(__file__).resolve().parents[3]

ECHO_CHILD = """
from core import child_process
stop = child_process.listen_to_parent()
child_process.send({"event": "ready"})
while (message := child_process.heard(stop)) is not None:
    child_process.send({"event": "echo", "heard": message})
"""


def test_a_message_told_to_a_child_is_heard_there_in_order() -> None:
    with Child([sys.executable, "-c", ECHO_CHILD], "an echoing child", limit_s=60) as child:
        messages = child.messages()
        assert next(messages) == {"event": "ready"}
        child.tell({"event": "go", "until_step": 7})
        child.tell({"event": "go", "seconds": 0.5})
        assert next(messages)["heard"] == {"event": "go", "until_step": 7}
        assert next(messages)["heard"] == {"event": "go", "seconds": 0.5}
        child.stop(grace_s=5)
        assert child.wait().how == "exited"  # the stop line ended its wait for a message, and it ended by itself


def test_a_gate_grants_its_warm_up_call_then_its_share_of_steps_or_of_seconds() -> None:
    turns = _Turns(rounds=2, seed=1, stop_event=threading.Event())
    by_steps, by_seconds = RoundGate(turns, 0, None), RoundGate(turns, 1, 0.3)
    for gate in (by_steps, by_seconds):
        gate._total = 21
        gate.begin_turn(WARMUP_ROUND, 0)
        assert gate.turn_grant() == {"until_step": 1}
    by_steps._warmup_steps = 1
    by_steps.begin_turn(0, 0)
    assert by_steps.turn_grant() == {"until_step": 11}  # the first round's half of the 20 steady steps
    by_seconds.begin_turn(0, 1)
    assert by_seconds.turn_grant() == {"seconds": 0.3}
    turns.release()  # the rounds are over: nothing holds the run any more
    assert granted_turn([by_steps], 12) == {}


@pytest.mark.slow
def test_a_jax_job_takes_its_turns_with_a_tensorflow_job_and_never_trains_out_of_them() -> None:
    order = Order()
    configs = [JOB, JOB.with_changes(backend="jax")]
    starters = [
        (lambda gate, i=i, c=c: run_job(c, None, JobOptions(hooks=(gate, StepsOf(order, i))), threading.Event()).result)
        for i, c in enumerate(configs)
    ]
    steps_by_holder: list[tuple[int, int]] = []
    original = StepsOf.on_step_records

    def noted(self, records) -> None:
        steps_by_holder.extend((self.index, order.holder) for _ in records)
        original(self, records)

    StepsOf.on_step_records = noted  # type: ignore[method-assign]
    try:
        results = run_in_rounds(starters, rounds=3, seed=5, on_turn=order.on_turn)
    finally:
        StepsOf.on_step_records = original  # type: ignore[method-assign]
    assert [r.status for r in results] == [RunStatus.COMPLETED] * 2, [r.message for r in results]
    assert all(index == holder for index, holder in steps_by_holder), "a job's steps arrived in another job's turn"
    jax = results[1]
    assert rounds_measured(jax) == 3 and jax.rounds["id"] == results[0].rounds["id"]
    spans = jax.rounds["spans"]
    assert spans[-1][1] == 25 and all(later[0] == earlier[1] + 1 for earlier, later in zip(spans, spans[1:], strict=False))


def _compare(targets: str, tmp_path: Path, steps: int) -> list[dict]:
    env = {**__import__("os").environ, "DEVICE_LAB_DATA_DIR": str(tmp_path)}
    command = [sys.executable, "main.py", "compare", "--model", "mlp", "--targets", targets, "--steps", str(steps), "--json"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_compare_of_tensorflow_and_jax_on_the_cpu_decides_in_six_rounds(tmp_path: Path) -> None:
    tensorflow, jax = _compare("CPU:0;jax:CPU:0", tmp_path, steps=300)
    assert tensorflow["rounds"] >= 6 and jax["rounds"] >= 6
    low, high = jax["speedup_ci"]
    assert low <= jax["speedup"] <= high
    if jax["beyond_noise"]:  # JAX trains the MLP about 2-4x as fast here; the interval says whether that held
        assert low > 1 or high < 1


@pytest.mark.slow
@pytest.mark.heavy  # a two-worker TensorFlow cluster beside two other jobs
def test_a_multi_worker_target_takes_its_turns_in_the_rounds(tmp_path: Path) -> None:
    rows = _compare("CPU:0;multi-worker:2", tmp_path, steps=120)
    assert [row["rounds"] for row in rows] == [6, 6], [row.get("message") for row in rows]
    assert rows[1]["speedup_ci"] is not None
