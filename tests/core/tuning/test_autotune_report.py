"""What autotune reports when it keeps the start: its gain figures describe the adopted setting (the start), the rival it
was kept against is reported apart, a rival slower beyond noise is called slower, and Keras's defaults running faster
than the adopted setting is said in words (a GPU run kept the start and said "gain 1.00x (interval 0.77–0.92)")."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import pytest

from core import RunConfig
from core.cli.tuning_commands import format_autotune
from core.jobs import JobOptions, RecordedRun, run_job
from core.jobs.rounds import RoundGate
from core.training.hooks import RunHook
from core.training.noise import Interval
from core.tuning.autotune import autotune, kept_start_note, keras_defaults_faster_note, settings_of

JOB = RunConfig(model="mlp", dataset="synthetic", batch_size=32)  # one step per call, float32, no XLA: Keras's defaults
FLOAT32_ONLY = {"has_accelerator": False, "cpu_flags": ("avx2",)}
"""A CPU without bfloat16 units: the space is the call sizes and XLA at float32."""
LARGE_BUDGET_S = 600.0
EXTRA_S_PER_STEP = 0.005
"""What a heavier setting adds to each of its steps: several times a step of the MLP at batch 32 on a CPU."""


class HeavierSteps(RunHook):
    """Makes a run's every step EXTRA_S_PER_STEP longer, for real: it sleeps before each call, inside the call's step time."""

    def on_call_begin(self, first_step: int, steps: int) -> None:
        time.sleep(EXTRA_S_PER_STEP * steps)


def heavier_where(heavier: Callable[[RunConfig, bool], bool]) -> Callable[..., RecordedRun]:
    """The job service, with the runs that `heavier(job, in the rounds)` picks made slower (HeavierSteps)."""

    def run(job: RunConfig, store, options: JobOptions, stop_event) -> RecordedRun:
        if heavier(job, any(isinstance(hook, RoundGate) for hook in options.hooks)):
            options = replace(options, hooks=(*options.hooks, HeavierSteps()))
        return run_job(job, store, options, stop_event)

    return run


@pytest.mark.slow
def test_a_start_kept_against_slower_rivals_claims_no_gain_and_names_its_rival_slower():
    """Every setting but the start made heavier in the rounds (as if a load or a slower path showed up side by side)."""
    start = settings_of(JOB)
    heavier = heavier_where(lambda job, in_rounds: in_rounds and settings_of(job) != start)
    result = autotune(JOB, LARGE_BUDGET_S, rounds=4, run=heavier, **FLOAT32_ONLY)

    assert result.best == result.start and result.changes() == {} and result.confirmed is False, result.notes
    data = result.to_dict()
    assert data["gain"] == 1.0
    assert data["gain_ci"] is None and data["beyond_noise"] is None and "no gain claimed" in data["sureness"]
    assert data["rounds"] == result.rounds_run == 4
    assert data["rival"] is not None and data["rival"] != start
    assert data["rival_beyond_noise"] is True and data["rival_ci"][1] < 1 and data["rival_ratio"] < 1
    assert data["rival_sureness"].endswith("slower with 95% confidence")
    kept = next(note for note in result.notes if note.startswith("not adopted: "))
    assert " was slower: " in kept and kept.endswith("the start is kept"), kept  # no advice to re-run: the rounds told them apart
    assert "could not tell" not in kept and "re-run" not in kept
    # the start is Keras's defaults: the same figure, the same run, no gain over them either way
    assert data["keras_defaults_samples_per_s"] == data["baseline_samples_per_s"] and data["gain_over_keras_defaults"] == 1.0
    assert data["keras_defaults_faster"] is False and data["gain_over_keras_defaults_ci"] is None
    assert "your settings kept against " in format_autotune(result) and "how sure:" not in format_autotune(result)


@pytest.mark.slow
def test_keras_defaults_faster_than_the_setting_kept_is_said_with_how_much_and_that_nothing_is_claimed_beyond_noise():
    """The start (4 steps per call) made heavier, one round (nothing adopted): Keras's defaults ran faster, measured apart."""
    job = JOB.with_changes(steps_per_call=4)
    start = settings_of(job)
    result = autotune(job, LARGE_BUDGET_S, rounds=1, run=heavier_where(lambda run, _: settings_of(run) == start), **FLOAT32_ONLY)

    assert result.best == result.start and result.confirmed is False
    data = result.to_dict()
    assert data["keras_defaults_faster"] is True and data["gain_over_keras_defaults"] < 1
    assert data["gain_over_keras_defaults_ci"] is None and data["gain_over_keras_defaults_beyond_noise"] is None
    said = next(note for note in result.notes if note.startswith("Keras's defaults "))
    assert f"{1 / data['gain_over_keras_defaults']:.2f}× its samples/s" in said and "not told apart beyond noise" in said
    assert data["gain_ci"] is None and data["rival"] is not None and data["rival_beyond_noise"] is False  # one round claims nothing
    assert "(Keras's defaults ran faster: see the note)" in format_autotune(result)


def _interval(ratio: float, low: float, high: float, rounds: int = 6) -> Interval:
    return Interval(ratio, low, high, (40, 40), rounds)


START = settings_of(JOB.with_changes(backend="jax"))


def test_a_rival_slower_beyond_noise_is_called_slower_and_no_re_run_is_advised():
    note = kept_start_note(START, [({**START, "precision": "float16"}, _interval(0.84, 0.77, 0.92))])

    assert note == "not adopted: float16 was slower: 0.84× (95% interval 0.77–0.92×, 6 rounds) — the start is kept"


def test_a_rival_within_noise_keeps_the_advice_to_re_run():
    note = kept_start_note(
        START,
        [({**START, "precision": "float16"}, _interval(0.84, 0.77, 0.92)), ({**START, "steps_per_call": 16}, _interval(1.03, 0.97, 1.1))],
    )

    assert note.startswith("not adopted: float16 was slower: 0.84× ")
    assert "; 16 steps/call: 1.03× (95% interval 0.97–1.10×, 6 rounds): no difference beyond noise — the start is kept" in note
    assert note.endswith("could not tell a gain: re-run on a quiet machine or with a larger --budget-s")


def test_keras_defaults_faster_says_whether_beyond_noise_only_from_shared_rounds():
    beyond = keras_defaults_faster_note(1.10, _interval(0.91, 0.86, 0.96))
    assert beyond.endswith("1.10× its samples/s, beyond noise: the adopted setting ran 0.91× theirs (95% interval 0.86–0.96×, 6 rounds)")
    within = keras_defaults_faster_note(1.03, _interval(0.97, 0.9, 1.05))
    assert "1.03× its samples/s, not beyond noise: " in within
    apart = keras_defaults_faster_note(1.10, None)
    assert apart.endswith("measured apart (not in the same interleaved rounds): not told apart beyond noise")
