"""Interleaved rounds: several jobs measured in turns, so that a load that comes and goes hits them alike.

Runs measured one after another differ by whatever the machine did between them
(a build started, a second job ended), and an interval from the calls inside
each run cannot see that. Randomized multiple interleaved trials (Abedi &
Brecht, ICPE 2017) cure it: every round runs every candidate once, in a fresh
random order, and the comparison is made across rounds (`core.training.noise.
between_runs`).

`run_in_rounds` starts each job in a thread of its own, with a `RoundGate` among
its hooks. The gate holds the run before each call (`RunHook.wait_turn`,
left out of the run's clock) until the coordinator gives it the turn. The jobs
are set up one at a time (building and tracing are never timed against
another's steps), then each runs its warm-up call alone, then `rounds` rounds:
in each, every job in a new (seeded) random order runs its share of the steady
steps (or of the seconds, `turn_s`) and hands the turn back. The orders are
balanced (`balanced_orders`): each job takes each place equally often, since
under load the job that runs second in a round reads slower than the first. A
built model is kept between rounds, so a round costs steps, not re-tracing.
Only one job trains at a time. A job in another process takes its turns
across the process boundary (`core.training.parent_turns`): a backend child
(JAX, PyTorch), or a multi-worker cluster's chief (the other workers wait for
the chief's collectives). Before a call outside the turn it was granted
(`RoundGate.turn_grant`) it sends its steps so far and asks; its parent thread
waits here on its behalf and answers with the next grant.

Each gated run's result carries `rounds` (`RunResult.rounds`): the id shared by
the jobs interleaved together, the steps of each round, the run's place in
each round's order, and other processes' CPU share during each of its turns.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from core.machine.conditions import between, snapshot
from core.results import RunResult, RunStatus, StepRecord
from core.training.failures import explain_failure
from core.training.hooks import RunContext, RunHook

DEFAULT_ROUNDS = 6
"""Rounds a comparison, a sweep and autotune's last check measure by default: enough for a t-interval over rounds that
tells a 1.3x difference under a drifting load, few enough that each round still holds several calls."""
MAX_ROUNDS = 100
WARMUP_ROUND = -1
_POLL_S = 0.25
"""How often a waiting side looks again at a thread that may have ended or a stop that may have been asked for."""

OnTurn = Callable[[int, int, int], None]  # (job index, round (WARMUP_ROUND for the warm-up), rounds)
Starter = Callable[["RoundGate"], Any]  # runs one job with the gate among its hooks, in the job's thread; returns its result
OnCrash = Callable[[int, BaseException], Any]  # (job index, what its starter raised) -> the value the job hands back instead
log = logging.getLogger(__name__)


def balanced_orders(jobs: int, rounds: int, rng: random.Random) -> list[list[int]]:
    """Each round's order of the jobs 0..jobs-1: random, yet each job takes each place equally often.

    Rounds go in blocks of `jobs`: a block's orders are the rotations of one random permutation (a
    Latin square), the block's rounds shuffled; a last, partial block is off by at most one turn. Under
    `drift.sh`'s load, the job second in a round read about 7% slower than the first (50 busy rounds of
    CPU:0 against itself); drawn independently, the orders put one job second in all 6 rounds of a
    comparison once in 32, and it read 0.89x itself "beyond noise". Balanced, the place's cost falls
    on every job alike.
    """
    orders: list[list[int]] = []
    while len(orders) < rounds:
        first = list(range(jobs))
        rng.shuffle(first)
        block = [first[shift:] + first[:shift] for shift in range(max(jobs, 1))]
        rng.shuffle(block)
        orders.extend(block)
    return orders[:rounds]


def check_rounds(rounds: Any) -> int:
    """`rounds` as a whole number from 1 to MAX_ROUNDS, else ValueError saying what is allowed."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise ValueError(f"rounds must be a whole number from 1 to {MAX_ROUNDS}, not {rounds!r}")
    return rounds


class TurnWatcher(Protocol):
    """What a hook implements to hear its run's turns: the turn held has ended (the run is about to wait), a turn began."""

    def turn_ended(self) -> None: ...

    def turn_began(self) -> None: ...


class RoundGate(RunHook):
    """One job's side of the rounds: holds its run until the coordinator gives it a turn, notes what each turn measured."""

    takes_turns = True

    def __init__(self, turns: _Turns, index: int, turn_s: float | None) -> None:
        self._turns, self.index, self._turn_s = turns, index, turn_s
        self._total = 0
        self._warmup_steps = 0
        self._done = 0
        self._round: int | None = None  # the round of the turn it holds, None between turns
        self._quota_end = 0
        self._turn_first = 0
        self._turn_seconds = 0.0
        self._turn_start: Any = None
        self.idle = False  # waiting for a turn (set by the job's thread, read by the coordinator)
        self.end_event = threading.Event()  # set once the rounds are over: a job that runs by turns of seconds stops on it
        self.spans: dict[int, tuple[int, int]] = {}
        self.positions: dict[int, int] = {}
        self.other_share: dict[int, float | None] = {}
        self.watchers: list[TurnWatcher] = []  # told as each turn ends and begins (the run's energy meter)

    def on_run_start(self, context: RunContext) -> None:
        self._total = context.total_steps

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        if not records:
            return
        self._done = records[-1].step
        if records[0].warmup:
            self._warmup_steps = self._done
        else:
            self._turn_seconds += sum(record.step_time_s for record in records)

    def wait_turn(self, next_step: int) -> None:
        if self._round is not None and self._turn_open(next_step):
            return
        if self._round is not None:
            for watcher in self.watchers:
                watcher.turn_ended()
        self._end_turn()
        self._turns.wait_for_turn(self)
        for watcher in self.watchers:
            watcher.turn_began()

    def turn_grant(self) -> dict[str, float] | None:
        """The turn held now: {"until_step": N} (a share of steps, the warm-up call) or {"seconds": S}; None between turns."""
        if self._round is None:
            return None  # the rounds are over: the job runs on freely
        if self._round == WARMUP_ROUND or self._turn_s is None:
            return {"until_step": self._quota_end}
        return {"seconds": max(self._turn_s - self._turn_seconds, 0.0)}

    def amend_result(self, result: RunResult) -> RunResult:
        self._end_turn()
        rounds = sorted(self.spans)
        if not rounds:
            return result
        return replace(
            result,
            rounds={
                "id": self._turns.group,
                "count": self._turns.rounds,
                "seed": self._turns.seed,
                "spans": [list(self.spans[k]) for k in rounds],
                "round_index": rounds,
                "positions": [self.positions.get(k) for k in rounds],
                "other_share": [self.other_share.get(k) for k in rounds],
            },
        )

    def begin_turn(self, round_index: int, position: int) -> None:
        """The coordinator gives this job round `round_index` (WARMUP_ROUND: its first call alone)."""
        self._round = round_index
        self._turn_first = self._done + 1
        self._turn_seconds = 0.0
        self._turn_start = snapshot()
        self.positions[round_index] = position
        if round_index == WARMUP_ROUND:
            self._quota_end = 1
        elif self._turns.rounds - round_index == 1:
            self._quota_end = self._total  # the last round takes what is left
        else:
            steady = max(self._total - self._warmup_steps, 0)
            self._quota_end = self._warmup_steps + math.ceil((round_index + 1) * steady / self._turns.rounds)

    def _turn_open(self, next_step: int) -> bool:
        """Whether the turn this job holds covers the call starting at `next_step`."""
        if self._round == WARMUP_ROUND or self._turn_s is None:
            return next_step <= self._quota_end
        return self._turn_seconds < self._turn_s

    def _end_turn(self) -> None:
        """Note the steps and the load of the turn just ended (nothing when no turn was held)."""
        if self._round is None:
            return
        if self._round != WARMUP_ROUND and self._done >= self._turn_first:
            self.spans[self._round] = (self._turn_first, self._done)
            end = snapshot()
            self.other_share[self._round] = between(self._turn_start, end, "turn").other_cpu_share
        self._round = None


class _Turns:
    """The coordinator's state shared with the gates: which job holds the turn, under one condition variable."""

    def __init__(self, rounds: int, seed: int, stop_event: threading.Event) -> None:
        self.rounds, self.seed, self.stop_event = rounds, seed, stop_event
        self.group = uuid.uuid4().hex[:12]
        self.condition = threading.Condition()
        self.holder: int | None = None
        self.released = False  # the coordinator ended: no gate waits any more

    def wait_for_turn(self, gate: RoundGate) -> None:
        """In the job's thread: hand the turn back and wait until it is this job's again (or the rounds ended)."""
        with self.condition:
            gate.idle = True
            if self.holder == gate.index:
                self.holder = None
            self.condition.notify_all()
            while self.holder != gate.index and not self.released and not self.stop_event.is_set():
                self.condition.wait(_POLL_S)
            gate.idle = False

    def give(self, gate: RoundGate, round_index: int, position: int, thread: threading.Thread) -> None:
        """In the coordinator: give `gate` the turn and wait until it hands it back or its job ends."""
        with self.condition:
            gate.begin_turn(round_index, position)
            self.holder = gate.index
            self.condition.notify_all()
        self.wait_idle(gate, thread, handed_over=True)

    def wait_idle(self, gate: RoundGate, thread: threading.Thread, handed_over: bool = False) -> None:
        """Wait until the job waits for a turn (it is set up, or its turn is over) or its thread ended."""
        with self.condition:
            while thread.is_alive() and not (gate.idle and (not handed_over or self.holder != gate.index)):
                if self.stop_event.is_set():
                    break
                self.condition.wait(_POLL_S)

    def release(self) -> None:
        with self.condition:
            self.released = True
            self.condition.notify_all()


def run_in_rounds(
    starters: Sequence[Starter],
    rounds: int = DEFAULT_ROUNDS,
    stop_event: threading.Event | None = None,
    seed: int | None = None,
    on_turn: OnTurn | None = None,
    turn_s: float | None = None,
    on_ended: Callable[[int, Any], None] | None = None,
    on_crash: OnCrash | None = None,
) -> list[Any]:
    """Run the jobs `starters` make in interleaved rounds; each one's return value, in order (None: never started).

    A starter runs its job with the gate it is given among the job's hooks, in
    the thread made for it. `turn_s`: each turn lasts this many seconds of
    steady steps (the job must then end on its own, e.g. by a stop set in
    `on_ended`'s caller); None: each turn is its share of the job's steps.
    `on_turn(index, round, rounds)` is told before each turn; `on_ended(index,
    value)` after each job ended, in the coordinator's thread. Setting
    `stop_event` ends the turn in flight after its call; jobs not started yet
    are not started. A starter that raises is no job that never started: its
    value is `on_crash(index, exception)`, by default `crashed_result`'s failed
    RunResult saying what was raised (`explain_failure`).
    """
    check_rounds(rounds)
    stop_event = stop_event or threading.Event()
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    turns = _Turns(rounds, seed, stop_event)
    values: list[Any] = [None] * len(starters)
    gates = [RoundGate(turns, index, turn_s) for index in range(len(starters))]
    threads: list[threading.Thread] = []
    reported: set[int] = set()

    def report_ended() -> None:
        for index, thread in enumerate(threads):
            if not thread.is_alive() and index not in reported:
                reported.add(index)
                if on_ended is not None:
                    on_ended(index, values[index])

    try:
        for index, start in enumerate(starters):  # set up one at a time: building and tracing are never timed against steps
            if stop_event.is_set():
                break
            thread = threading.Thread(
                target=_store_into, args=(values, index, start, gates[index], on_crash), name=f"round job {index}", daemon=True
            )
            threads.append(thread)
            if on_turn is not None:
                on_turn(index, WARMUP_ROUND, rounds)
            thread.start()
            turns.wait_idle(gates[index], thread)
        orders = balanced_orders(len(threads), rounds, random.Random(seed))
        for round_index in (WARMUP_ROUND, *range(rounds)):
            planned = list(range(len(threads))) if round_index == WARMUP_ROUND else orders[round_index]
            order = [index for index in planned if threads[index].is_alive()]
            for position, index in enumerate(order):
                if stop_event.is_set():
                    break
                if on_turn is not None:
                    on_turn(index, round_index, rounds)
                turns.give(gates[index], round_index, position, threads[index])
            report_ended()
    finally:
        for gate in gates:
            gate.end_event.set()
        turns.release()
        for thread in threads:
            while thread.is_alive():
                thread.join(_POLL_S)
        report_ended()
    return values


def _store_into(values: list[Any], index: int, start: Starter, gate: RoundGate, on_crash: OnCrash | None) -> None:
    try:
        values[index] = start(gate)
    except BaseException as exc:  # the job's thread ends here: what it raised is handed back, never read as "not started"
        log.error("job %d of the rounds raised %s", index, type(exc).__name__, exc_info=exc)
        values[index] = _crash_value(index, exc, on_crash)


def _crash_value(index: int, error: BaseException, on_crash: OnCrash | None) -> Any:
    """What a job that raised `error` hands back: `on_crash`'s value, or the failed result saying what was raised."""
    if on_crash is not None:
        try:
            return on_crash(index, error)
        except Exception:  # the caller's own conversion failed: the plain failed result still says what the job raised
            log.exception("turning job %d's crash into its value failed", index)
    return crashed_result(error)


def crashed_result(error: BaseException, config: dict[str, Any] | None = None) -> RunResult:
    """The failed result of a job that raised `error` instead of ending with a result: its message says what was raised."""
    return RunResult(status=RunStatus.FAILED, config=dict(config or {}), message=explain_failure(error))


def rounds_measured(result: RunResult) -> int:
    """How many interleaved rounds a run was measured in (1: it ran alone, or whole in one turn; 0: it did not run)."""
    if not result.status.ran:
        return 0
    return max(len(result.rounds.get("spans") or []), 1)
