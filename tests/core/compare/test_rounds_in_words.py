"""What a comparison in rounds says: how many rounds each row has, a load that changed between them, one round claiming nothing."""

from __future__ import annotations

from core.compare.significance import HOLDS_ONE, noise_reason
from core.compare.table import compare_results, format_table
from core.results import RunResult, RunStatus


def _run(rates: list[float], loads: list[float | None], group: str = "g", steps: int = 10) -> RunResult:
    """A finished run whose round k ran `steps` steps at rates[k] samples/s while other processes used loads[k] of the CPU."""
    times, spans = [0.5], []
    for rate in rates:
        first = len(times) + 1
        times += [32 / rate] * steps
        spans.append([first, len(times)])
    steady = times[1:]
    return RunResult(
        status=RunStatus.COMPLETED,
        config={"batch_size": 32, "steps_per_call": 1, "model": "mlp", "devices": ["CPU:0"]},
        steps_done=len(times),
        warmup_steps=1,
        samples_per_s=32 * len(steady) / sum(steady),
        step_times_s=tuple(times),
        rounds={"id": group, "spans": spans, "round_index": list(range(len(rates))), "other_share": loads},
    )


def test_a_load_that_changed_between_rounds_and_left_the_answer_open_is_named_with_what_to_do():
    loads = [0.02, 0.85, 0.05, 0.80]
    a = _run([1000.0, 500.0, 1000.0, 520.0], loads)
    b = _run([1100.0, 450.0, 930.0, 560.0], loads)
    comparison = compare_results([("CPU:0", a), ("CPU:0", b)])
    row = comparison.rows[1]
    assert row.rounds == 4 and row.beyond_noise is False and noise_reason(row) == HOLDS_ONE
    notes = " ".join(comparison.warnings)
    assert "load changed between rounds" in notes and "2%–85%" in notes  # named, with the loads it ran under
    assert "--rounds 8" in notes and "quiet machine" in notes  # what to do
    assert [entry["rounds"] for entry in comparison.to_rows_dict()] == [4, 4]
    table = format_table(comparison)
    assert "rounds" in table.splitlines()[0] and "interleaved rounds each target was measured in" in table


def test_under_a_steady_load_a_real_difference_over_rounds_is_beyond_noise_and_no_load_change_is_claimed():
    loads = [0.6, 0.62, 0.58, 0.61]
    a = _run([1000.0, 980.0, 1010.0, 990.0], loads)
    b = _run([2000.0, 1990.0, 2030.0, 1970.0], loads)
    comparison = compare_results([("A", a), ("B", b)])
    low, high = comparison.rows[1].speedup_ci
    assert comparison.rows[1].beyond_noise is True and 1.6 < low < 1.9 and 2.1 < high < 2.4, "widened: loaded copies differ"
    assert not any("load changed" in w for w in comparison.warnings)


def test_runs_picked_from_the_history_are_told_apart_by_nothing_and_say_why():
    a = _run([1000.0] * 3, [0.0] * 3, group="first")
    b = _run([3000.0] * 3, [0.0] * 3, group="second")
    comparison = compare_results([("earlier", a), ("later", b)])
    row = comparison.rows[1]
    assert row.speedup > 2.9 and row.beyond_noise is False
    assert any(
        "measured one after another, not in interleaved rounds" in w and "6 or more interleaved rounds" in w for w in comparison.warnings
    )
