"""Interleaved rounds: real TensorFlow jobs taking turns, one at a time, each run carrying its rounds; the interval over rounds."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import replace

import pytest

from core.config import RunConfig
from core.jobs import JobListener, JobOptions, run_job
from core.jobs.rounds import WARMUP_ROUND, balanced_orders, check_rounds, rounds_measured, run_in_rounds
from core.results import RunResult, RunStatus
from core.training.hooks import RunHook
from core.training.noise import between_runs, rounds_ratio

JOB = RunConfig(model="mlp", dataset="digits", steps=25, batch_size=32)


class Order(JobListener):
    """Which job's steps arrive in which order: the steps after on_turn(i) must be job i's."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turns: list[tuple[int, int]] = []
        self.steps: list[tuple[int, int]] = []  # (the job that holds the turn, step number)
        self.holder = -1
        self.training = 0
        self.overlap = False

    def on_turn(self, index: int, round_index: int, rounds: int) -> None:
        with self.lock:
            self.turns.append((index, round_index))
            self.holder = index


class StepsOf(RunHook):
    """One job's hook: notes its steps under the shared order, and whether another job trained at the same time."""

    def __init__(self, order: Order, index: int) -> None:
        self.order, self.index = order, index

    def on_call_begin(self, first_step: int, steps: int) -> None:
        with self.order.lock:
            self.order.training += 1
            self.order.overlap |= self.order.training > 1 or self.order.holder != self.index

    def on_step_records(self, records) -> None:
        with self.order.lock:
            self.order.training -= 1
            self.order.steps.extend((self.index, r.step) for r in records)


def _starters(order: Order, configs):
    return [
        (lambda gate, i=i, c=c: run_job(c, None, JobOptions(hooks=(gate, StepsOf(order, i))), threading.Event()).result)
        for i, c in enumerate(configs)
    ]


@pytest.mark.slow
def test_jobs_take_turns_one_at_a_time_and_each_run_carries_its_rounds():
    order = Order()
    results = run_in_rounds(_starters(order, [JOB, JOB.with_changes(steps_per_call=4)]), rounds=3, seed=7, on_turn=order.on_turn)
    assert [r.status for r in results] == [RunStatus.COMPLETED, RunStatus.COMPLETED], [r.message for r in results]
    assert not order.overlap, "two jobs trained at once, or one trained out of its turn"
    assert order.turns[:2] == [(0, WARMUP_ROUND), (1, WARMUP_ROUND)], "each job is set up alone, in order"
    measured = [turn for turn in order.turns if turn[1] >= 0]
    assert sorted(measured) == [(i, k) for i in range(2) for k in range(3)], "every round runs every job once"
    for result in results:
        spans = result.rounds["spans"]
        assert len(spans) == 3 and rounds_measured(result) == 3 and result.rounds["seed"] == 7
        assert spans[0][0] == result.warmup_steps + 1 and spans[-1][1] == 25, "the rounds cover every steady step once"
        assert all(later[0] == earlier[1] + 1 for earlier, later in zip(spans, spans[1:], strict=False))
        assert sorted(result.rounds["round_index"]) == [0, 1, 2]
    assert results[0].rounds["id"] == results[1].rounds["id"]
    per_round = [sorted((results[i].rounds["positions"][k], i) for i in range(2)) for k in range(3)]
    assert all([pos for pos, _ in positions] == [0, 1] for positions in per_round), "each round's order is a permutation"
    interval = between_runs(results[0], results[1])
    assert interval is not None and interval.rounds == 3 and len(interval.round_ratios) == 3


@pytest.mark.parametrize(("jobs", "rounds"), [(2, 6), (3, 6), (3, 9), (4, 8), (5, 5)])
def test_each_job_takes_each_place_equally_often_in_orders_that_still_vary(jobs, rounds):
    orders = balanced_orders(jobs, rounds, random.Random(jobs * 100 + rounds))
    assert len(orders) == rounds and all(sorted(order) == list(range(jobs)) for order in orders)
    places = Counter((job, order.index(job)) for order in orders for job in range(jobs))
    assert set(places.values()) == {rounds // jobs}, f"every job in every place {rounds // jobs} times: {places}"
    schedules = {tuple(map(tuple, balanced_orders(jobs, rounds, random.Random(seeded)))) for seeded in range(20)}
    assert len(schedules) >= 5, "the orders are drawn at random, not one fixed schedule"


def test_rounds_that_are_no_multiple_of_the_jobs_are_off_by_one_turn_at_most():
    for seed in range(20):
        orders = balanced_orders(3, 7, random.Random(seed))
        firsts = Counter(order[0] for order in orders)
        assert len(orders) == 7 and max(firsts.values()) - min(firsts[j] for j in range(3)) <= 1


@pytest.mark.slow
def test_the_same_seed_gives_the_same_order_of_turns():
    orders = []
    for _ in range(2):
        order = Order()
        run_in_rounds(_starters(order, [JOB.with_changes(steps=12)] * 3), rounds=3, seed=11, on_turn=order.on_turn)
        orders.append(order.turns)
    assert orders[0] == orders[1]


@pytest.mark.slow
def test_the_time_a_hook_holds_a_run_for_its_turn_is_no_steps_time():
    class Holds(RunHook):
        def wait_turn(self, next_step: int) -> None:
            if next_step == 10:
                time.sleep(0.5)

    result = run_job(JOB, None, JobOptions(hooks=(Holds(),))).result
    assert result.ok, result.message
    assert result.step_times_s[9] < 0.25, "half a second held before step 10 was counted as its time"
    assert result.wall_s > 0.5


def _run(rates: list[float], batch: int = 32, group: str = "g", steps: int = 10, loads: list[float] | None = None) -> RunResult:
    """A finished run whose round k ran `steps` steps at rates[k] samples/s (its step times made so), in rounds `group`;
    `loads`: other processes' CPU share in each of its turns (none read when not given)."""
    times = [0.5]  # the warm-up
    spans = []
    for rate in rates:
        first = len(times) + 1
        times += [batch / rate] * steps
        spans.append([first, len(times)])
    return RunResult(
        status=RunStatus.COMPLETED,
        config={"batch_size": batch, "steps_per_call": 1},
        steps_done=len(times),
        warmup_steps=1,
        step_times_s=tuple(times),
        rounds={"id": group, "spans": spans, "round_index": list(range(len(rates))), "other_share": loads or [None] * len(rates)},
    )


def test_a_load_that_changes_between_rounds_but_hits_both_alike_is_no_difference():
    """Each round both runs see the same load: the per-round ratio stays near 1 however the load swings; nothing is claimed."""
    load = [1000.0, 400.0, 900.0, 300.0, 1000.0, 500.0]
    wobble = [1.02, 0.98, 1.01, 0.99, 1.03, 0.97]
    a, b = _run(load), _run([rate * w for rate, w in zip(load, wobble, strict=True)])
    interval = between_runs(a, b)
    assert interval is not None and interval.rounds == 6
    assert interval.low <= 1.0 <= interval.high and not interval.beyond_noise


def test_a_real_difference_under_the_same_swings_is_beyond_noise():
    load = [1000.0, 400.0, 900.0, 300.0, 1000.0, 500.0]
    wobble = [1.02, 0.98, 1.01, 0.99, 1.03, 0.97]
    a, b = _run(load), _run([rate * 1.5 * w for rate, w in zip(load, wobble, strict=True)])
    interval = between_runs(a, b)
    assert interval is not None and interval.beyond_noise and 1.4 < interval.low < 1.5 < interval.high < 1.6
    assert interval.sureness().startswith("at least")


def test_under_load_two_copies_differ_by_more_than_their_rounds_spread_so_a_steady_10_percent_is_not_claimed():
    """The same 10% in every round: beyond noise when the turns were quiet; under load (busy turns) copies of one job
    differ that much (LOADED_COPIES_SD), so the interval widens with the share of busy rounds and holds 1."""
    rates = [1000.0, 980.0, 1010.0, 990.0, 1020.0, 1000.0]
    wobble = [1.10, 1.11, 1.09, 1.10, 1.12, 1.08]
    faster = [rate * w for rate, w in zip(rates, wobble, strict=True)]
    quiet = between_runs(_run(rates, loads=[0.0] * 6), _run(faster, loads=[0.02] * 6))
    assert quiet is not None and quiet.beyond_noise and quiet.low > 1.05
    busy = between_runs(_run(rates, loads=[0.6] * 6), _run(faster, loads=[0.65] * 6))
    assert busy is not None and not busy.beyond_noise and busy.ratio == pytest.approx(quiet.ratio)
    partly = between_runs(_run(rates, loads=[0.6, 0.0, 0.0, 0.0, 0.0, 0.0]), _run(faster, loads=[0.0] * 6))
    assert partly is not None and quiet.high - quiet.low < partly.high - partly.low < busy.high - busy.low
    double = between_runs(_run(rates, loads=[0.6] * 6), _run([rate * 2 for rate in rates], loads=[0.6] * 6))
    assert double is not None and double.beyond_noise and double.low > 1.6, "a twofold speed-up is told under load"


def test_runs_measured_one_after_another_claim_nothing_however_tight_their_calls():
    """Without shared rounds (history runs, other rounds' runs) the calls' interval is shown, and no difference is claimed."""
    a, b = _run([1000.0] * 3, group="first"), _run([2000.0] * 3, group="second")
    assert rounds_ratio(a, b) is None
    interval = between_runs(a, b)
    assert interval is not None and interval.rounds == 1 and interval.low > 1.5
    assert not interval.beyond_noise and "one after another" in interval.text()
    alone = replace(b, rounds={})
    assert between_runs(a, alone).rounds == 1 and not between_runs(a, alone).beyond_noise


def test_rounds_are_checked_before_anything_runs():
    assert check_rounds(6) == 6
    for bad in (0, -1, 101, 2.5, True, "6"):
        with pytest.raises(ValueError, match="whole number from 1 to 100"):
            check_rounds(bad)
