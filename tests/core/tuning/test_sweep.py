"""Setting sweeps: real runs per point, recorded in a real history as one group; failed points and Stop keep the sweep going or end it cleanly."""

from __future__ import annotations

import threading

import pytest

from core.config import ConfigError, RunConfig
from core.diagnosis.evidence import differs_only_in, matching_points
from core.history.store import RunStore
from core.jobs import JobOptions
from core.results import RunStatus
from core.tuning.sweep import SweepListener, most_samples_index, run_sweep, target_decision
from core.tuning.sweep_plan import BFLOAT16_WITHOUT_AVX512, FLOAT16_ON_CPU, next_sweep_group, parse_values, plan_sweep


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with RunStore.open(tmp_path_factory.mktemp("sweep") / "history.sqlite3") as opened:
        yield opened


class Heard(SweepListener):
    """What a sweep tells its one listener: each point's start (index, total, label), then its row."""

    def __init__(self, stop_event: threading.Event | None = None, stop_at: int = -1):
        self.announced: list[tuple[int, int, str]] = []
        self.rows: list[int] = []
        self.stop_event, self.stop_at = stop_event, stop_at

    def on_job_start(self, index, total, label) -> None:
        self.announced.append((index, total, label))

    def on_run_start(self, context) -> None:
        if self.stop_event is not None and self.announced[-1][0] == self.stop_at:
            self.stop_event.set()  # Stop while point `stop_at` is being set up

    def on_row(self, index, row) -> None:
        self.rows.append(index)


@pytest.fixture(scope="module")
def mlp_sweep(two_cpus, store):
    """The MLP at batch 16, 32 x steps per call 1, 4: four real 6-step runs, recorded."""
    plan = plan_sweep(RunConfig(model="mlp", steps=6, batch_size=16), {"batch_size": (16, 32), "steps_per_call": (1, 4)})
    group = next_sweep_group(store.groups(), plan)
    heard = Heard()
    sweep = run_sweep(plan, store, JobOptions(group=group, listener=heard))
    assert sorted(heard.rows) == [0, 1, 2, 3], "each point's row, in the order the points ended"
    return sweep, heard.announced


@pytest.mark.slow
def test_a_two_setting_sweep_runs_every_point_and_records_it_as_one_group(mlp_sweep, store) -> None:
    sweep, announced = mlp_sweep
    assert [row.settings for row in sweep.rows] == [
        {"batch_size": 16, "steps_per_call": 1},
        {"batch_size": 16, "steps_per_call": 4},
        {"batch_size": 32, "steps_per_call": 1},
        {"batch_size": 32, "steps_per_call": 4},
    ]
    assert [label for _, _, label in announced] == [
        "batch 16 · 1 step/call",
        "batch 16 · 4 steps/call",
        "batch 32 · 1 step/call",
        "batch 32 · 4 steps/call",
    ]
    assert all(row.status == RunStatus.COMPLETED and row.result.steps_done == 6 for row in sweep.rows)
    rates = [row.result.samples_per_s for row in sweep.rows]
    assert most_samples_index(sweep.rows) == rates.index(max(rates))
    decision = target_decision(sweep.rows)  # every row completed: its reached line up with the rows
    steady = {index: to.steady_seconds for index, to in enumerate(decision.reached) if to.reached}
    # the first to the common loss where that decides something; else (6 steps: too few to learn) the most samples/s
    assert sweep.best == (min(steady, key=steady.__getitem__) if decision.decides else rates.index(max(rates)))
    assert sweep.to_dict()["best_by"] == ("time_to_target" if decision.decides else "samples_per_s")
    assert [row.suggested_learning_rate for row in sweep.rows] == pytest.approx([1e-3, 1e-3, 2e-3, 2e-3])

    assert sweep.group == "sweep 1: batch × steps per call" and store.groups() == [sweep.group]
    stored = {summary.id: summary for summary in store.list_runs()}
    for row in sweep.rows:
        assert stored[row.run_id].group == sweep.group and stored[row.run_id].status == RunStatus.COMPLETED
        assert stored[row.run_id].label == f"MLP · synthetic · default · {row.label} · sweep"
        assert store.load(row.run_id).config["batch_size"] == row.settings["batch_size"]
    assert next_sweep_group(store.groups(), sweep.plan) == "sweep 2: batch × steps per call"

    data = sweep.to_dict()
    assert data["best"] == sweep.best and len(data["rows"]) == 4
    assert {
        "settings",
        "status",
        "samples_per_s",
        "step_time_median_ms",
        "final_loss",
        "peak_memory_bytes",
        "suggested_learning_rate",
    } <= set(data["rows"][0])
    assert data["rows"][0]["peak_memory_bytes"] > 0 and data["rows"][3]["final_loss"] > 0


@pytest.mark.slow
def test_sweep_rows_are_evidence_for_a_verdict(mlp_sweep) -> None:
    """A sweep's runs differ in one setting, so `core.diagnosis` can use them in place of probe runs."""
    sweep, _ = mlp_sweep
    first, more_per_call, bigger_batch, _ = sweep.results()
    assert differs_only_in(first.config, more_per_call.config, "steps_per_call")
    assert differs_only_in(first.config, bigger_batch.config, "batch_size")
    assert [p.batch_size for p in matching_points(first, sweep.results(), "batch_size")] == [32]
    assert [p.steps_per_call for p in matching_points(first, sweep.results(), "steps_per_call")] == [4]


@pytest.mark.slow
def test_a_failed_point_is_a_row_and_stop_ends_the_points_set_up_then_skips_the_rest(two_cpus, store) -> None:
    """Points are set up one at a time before the rounds: Stop during the third's set-up ends those set up, skips the fourth."""
    base = RunConfig(model="mlp", strategy="mirrored", devices=tuple(two_cpus), steps=6, batch_size=16)
    plan = plan_sweep(base, {"batch_size": (15, 16, 24, 32)})
    stop_event = threading.Event()
    heard = Heard(stop_event, stop_at=2)
    sweep = run_sweep(plan, store, JobOptions(group="sweep 9: batch", listener=heard), stop_event)
    failed, set_up, stopped, skipped = sweep.rows
    assert failed.status == RunStatus.FAILED and "multiple of the 2 replicas" in failed.result.message
    assert set_up.status == RunStatus.STOPPED and set_up.result.replicas == 2 and set_up.result.steps_done == 0
    assert stopped.status == RunStatus.STOPPED and stopped.result.steps_done == 0  # stopped before its first turn
    assert skipped.status == RunStatus.SKIPPED and skipped.run_id is None and sweep.stopped
    assert sweep.best is None and [index for index, _, _ in heard.announced] == [0, 1, 2] and sorted(heard.rows) == [0, 1, 2, 3]
    statuses = {summary.id: summary.status for summary in store.list_runs()}
    assert [statuses[row.run_id] for row in sweep.rows[:3]] == [RunStatus.FAILED, RunStatus.STOPPED, RunStatus.STOPPED]


@pytest.mark.slow
def test_a_sweep_in_rounds_stars_the_point_first_to_the_loss_and_says_why_when_it_is_not_the_most_samples_per_s() -> None:
    """Batch 8 against 256 on the MLP: 256 runs about 10x the samples/s; the star goes to the one first to the common loss.

    Here (2-core EPYC) batch 256 needed 14x the samples to reach batch 8's smoothed final loss: 1.3x slower to train.
    """
    plan = plan_sweep(RunConfig(model="mlp", dataset="digits", steps=160, steps_per_call=4), {"batch_size": (8, 256)})
    sweep = run_sweep(plan, None, rounds=4, seed=3)
    data = sweep.to_dict()
    rows = data["rows"]
    assert [row["rounds"] for row in rows] == [4, 4] and data["rounds"] == 4
    assert data["best_by_samples_per_s"] == 1 and rows[1]["samples_per_s"] > 3 * rows[0]["samples_per_s"]
    steady = [row["time_to_target_steady_s"] for row in rows]
    assert None not in steady and data["best"] == steady.index(min(steady))
    assert rows[1]["samples_to_target"] > rows[0]["samples_to_target"], "at one learning rate the larger batch learns less per sample"
    assert data["best_is_most_samples_per_s"] == (data["best"] == 1) and bool(data["best_why"]) == (data["best"] == 0)
    assert data["best_beyond_noise"] == (data["tied_with_best"] == [])


def test_precisions_a_cpu_cannot_run_usefully_are_left_out_with_the_reason() -> None:
    base = RunConfig(model="cnn", steps=6)
    values = {"batch_size": (16, 32), "precision": parse_values("precision", "float32,bfloat16,fp16")}
    plan = plan_sweep(base, values, has_accelerator=False, cpu_flags=["avx2"])
    assert plan.axes[1].values == ("off",)
    assert [(item.value, item.reason) for item in plan.left_out] == [("bfloat16", BFLOAT16_WITHOUT_AVX512), ("float16", FLOAT16_ON_CPU)]
    assert plan_sweep(base, values, has_accelerator=False, cpu_flags=["avx512f"]).axes[1].values == ("off", "bfloat16")
    assert plan_sweep(base, values, has_accelerator=True).axes[1].values == ("off", "bfloat16", "float16")
    assert plan_sweep(base, values, has_accelerator=False, keep_slow=True).axes[1].values == ("off", "bfloat16", "float16")
    fixed = plan_sweep(base, {"batch_size": (16, 32), "xla": (True,)}, has_accelerator=False)
    assert fixed.base.xla is True and [axis.name for axis in fixed.axes] == ["batch_size"]


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"batch_size": (16,)}, "settings varied: got 'none'"),
        ({"batch_size": (16, 32), "xla": (False, True), "steps_per_call": (1, 4)}, "one or two of"),
        ({"precision": ("off", "float16x")}, "precision: got 'float16x'"),
    ],
)
def test_a_sweep_that_cannot_be_planned_says_why(values, fragment) -> None:
    with pytest.raises(ConfigError, match=fragment):
        plan_sweep(RunConfig(model="mlp"), values, has_accelerator=False)


def test_values_are_parsed_with_a_message_naming_the_option() -> None:
    assert parse_values("batch_size", " 32, 16,32 ") == (32, 16)
    assert parse_values("xla", "off,on") == (False, True)
    with pytest.raises(ConfigError, match=r"--batch-sizes: got '16,x'; allowed: comma-separated whole numbers"):
        parse_values("batch_size", "16,x", "--batch-sizes")
