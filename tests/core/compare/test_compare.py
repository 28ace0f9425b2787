"""Device comparison: real runs side by side, speed-ups, targets from text, fairness warnings."""

import dataclasses
import socket
import threading

import pytest

from core.compare.runner import progress_line, run_comparison, scaling_sweep
from core.compare.table import compare_results, fairness_warnings, format_table
from core.compare.targets import CompareTarget, parse_targets, sweep_targets
from core.config import ConfigError, RunConfig
from core.jobs import JobListener, JobOptions
from core.results import RunResult, RunStatus

MLP_FORWARD_PER_EXAMPLE = 2 * (64 * 256 + 256 * 128 + 128 * 10)


@pytest.fixture(scope="module")
def cpu_vs_mirrored(two_cpus):
    """One real comparison, shared: CPU:0 against Mirrored over two logical CPUs."""
    base = RunConfig(model="mlp", dataset="digits", steps=30, batch_size=64)
    heard = Heard()
    comparison = run_comparison(
        base, parse_targets(f"{two_cpus[0]}; mirrored:{two_cpus[0]},{two_cpus[1]}"), options=JobOptions(listener=heard)
    )
    return comparison, heard.calls


class Heard(JobListener):
    """What a comparison tells its one listener: each target's start, its steps (by the target in flight), its end."""

    def __init__(self, stop_after_steps: threading.Event | None = None, stop_at_setup: bool = False):
        self.calls = {"progress": [], "steps": {}, "results": [], "turns": []}
        self.current = -1
        self.stop = stop_after_steps
        self.stop_at_setup = stop_at_setup

    def on_job_start(self, index, total, label):
        self.current = index
        self.calls["progress"].append(progress_line(index, total, label))

    def on_run_start(self, context):
        if self.stop is not None and self.stop_at_setup:
            self.stop.set()

    def on_turn(self, index, round_index, rounds):
        self.current = index
        self.calls["turns"].append((index, round_index))

    def on_step_records(self, records):
        self.calls["steps"].setdefault(self.current, []).extend(r.step for r in records)
        if self.stop is not None:
            self.stop.set()

    def on_job_end(self, index, recorded):
        self.calls["results"].append((index, recorded.result.status, recorded.started))


@pytest.mark.slow
def test_two_targets_give_two_rows_and_a_speedup_from_their_speeds(cpu_vs_mirrored):
    comparison, _ = cpu_vs_mirrored
    single, mirrored = comparison.rows
    assert [row.status for row in comparison.rows] == [RunStatus.COMPLETED, RunStatus.COMPLETED], [
        r.result.message for r in comparison.rows
    ]
    assert [row.replicas for row in comparison.rows] == [1, 2]
    assert single.samples_per_s > 0 and mirrored.samples_per_s > 0
    assert single.speedup == 1.0
    assert mirrored.speedup == mirrored.samples_per_s / single.samples_per_s
    assert mirrored.scaling_efficiency == pytest.approx(mirrored.speedup / 2)
    assert [r.result.config["batch_size"] for r in comparison.rows] == [64, 64]


@pytest.mark.slow
def test_with_baseline_inverts_the_speedup_without_rerunning(cpu_vs_mirrored):
    comparison, _ = cpu_vs_mirrored
    flipped = comparison.with_baseline(1)
    single, mirrored = flipped.rows
    assert flipped.baseline_index == 1
    assert mirrored.speedup == 1.0
    assert single.speedup == single.samples_per_s / mirrored.samples_per_s
    assert single.speedup == pytest.approx(1 / comparison.rows[1].speedup)
    assert single.result is comparison.rows[0].result
    with pytest.raises(ConfigError, match="baseline"):
        comparison.with_baseline(2)


@pytest.mark.slow
def test_callbacks_see_each_run_by_index(cpu_vs_mirrored):
    _, calls = cpu_vs_mirrored
    assert calls["progress"] == ["run 1 of 2: CPU:0", "run 2 of 2: mirrored:CPU:0,CPU:1"]
    assert calls["steps"] == {0: list(range(1, 31)), 1: list(range(1, 31))}
    assert calls["results"] == [(0, RunStatus.COMPLETED, True), (1, RunStatus.COMPLETED, True)]


@pytest.mark.slow
def test_comparison_explains_flops_and_shared_logical_cpus(cpu_vs_mirrored):
    comparison, _ = cpu_vs_mirrored
    assert comparison.flops_per_step == pytest.approx(3 * 64 * MLP_FORWARD_PER_EXAMPLE, rel=0.01)
    for row in comparison.rows:
        assert row.achieved_flops == pytest.approx(comparison.flops_per_step * row.samples_per_s / 64)
        assert row.estimate_flops > 0 and row.fraction_of_estimate == pytest.approx(row.achieved_flops / row.estimate_flops)
        assert row.result.bound in ("compute", "unknown"), row.result.bound_evidence  # judged without probe runs
    assert any("logical CPU devices share the same physical cores" in w for w in comparison.warnings)


@pytest.mark.slow
def test_rows_dict_and_table(cpu_vs_mirrored):
    comparison, _ = cpu_vs_mirrored
    rows = comparison.to_rows_dict()
    assert [row["label"] for row in rows] == ["CPU:0", "mirrored:CPU:0,CPU:1"]
    assert rows[1]["speedup"] == comparison.rows[1].speedup and rows[0]["baseline"] is True
    assert {"samples_per_s", "step_time_median_ms", "scaling_efficiency", "achieved_flops", "fraction_of_peak"} <= rows[0].keys()
    assert all(row["bound"] and row["bound_evidence"] and row["advice"] for row in rows), "every compared row has a verdict"
    table = format_table(comparison)
    header = table.splitlines()[0]
    for column in (
        "target",
        "replicas",
        "Warm-up (s)",
        "Median step (ms)",
        "p95 step (ms)",
        "Spread",
        "Samples/s",
        "Final loss",
        "Peak memory",
        "speed-up",
        "efficiency",
        "% of peak",
    ):
        assert column in header
    assert "CPU:0 *" in table and f"{comparison.rows[1].speedup:.2f}x" in table


def test_target_that_cannot_run_here_becomes_a_failed_row_and_the_rest_run(two_cpus):
    base = RunConfig(model="mlp", dataset="digits", steps=6, batch_size=32)
    heard = Heard()
    comparison = run_comparison(base, parse_targets(f"CPU:9; mirrored:CPU:0,GPU:0; {two_cpus[0]}"), options=JobOptions(listener=heard))
    missing, mixed, cpu = comparison.rows
    assert (missing.status, mixed.status, cpu.status) == (RunStatus.FAILED, RunStatus.FAILED, RunStatus.COMPLETED), cpu.result.message
    assert "CPU:9" in missing.result.message and "devices TensorFlow sees here" in missing.result.message
    assert "devices of one kind" in mixed.result.message
    assert [started for _, _, started in heard.calls["results"]] == [False, False, True]
    assert missing.speedup is None and cpu.speedup is None
    assert any("pick another baseline" in w for w in comparison.warnings)
    assert comparison.with_baseline(2).rows[2].speedup == 1.0


def test_stop_ends_the_current_run_and_skips_the_rest(two_cpus):
    """Stop while the first target is set up: it ends stopped, the second is never set up and is a skipped row."""
    stop = threading.Event()
    heard = Heard(stop_after_steps=stop, stop_at_setup=True)
    comparison = run_comparison(
        RunConfig(model="mlp", dataset="digits", steps=500, batch_size=32),
        parse_targets(f"{two_cpus[0]}; {two_cpus[1]}"),
        options=JobOptions(listener=heard),
        stop_event=stop,
    )
    first, second = comparison.rows
    assert first.status == RunStatus.STOPPED and first.result.steps_done < 500
    assert second.status == RunStatus.SKIPPED and second.result.config["devices"] == [two_cpus[1]]
    assert heard.calls["progress"] == [f"run 1 of 2: {two_cpus[0]}"] and heard.calls["results"] == [(0, RunStatus.STOPPED, True)]
    assert any("stopped early" in w for w in comparison.warnings)
    assert any(w.startswith(f"{two_cpus[1]} was not run") for w in comparison.warnings)


def test_stop_in_a_round_ends_every_target_set_up_after_its_call_in_flight(two_cpus):
    """Stop at the first steps: both targets were set up before any trained; each ends stopped, none runs on."""
    stop = threading.Event()
    heard = Heard(stop_after_steps=stop)
    comparison = run_comparison(
        RunConfig(model="mlp", dataset="digits", steps=500, batch_size=32),
        parse_targets(f"{two_cpus[0]}; {two_cpus[1]}"),
        options=JobOptions(listener=heard),
        stop_event=stop,
    )
    assert [row.status for row in comparison.rows] == [RunStatus.STOPPED, RunStatus.STOPPED]
    assert comparison.rows[0].result.steps_done < 500 and comparison.rows[1].result.steps_done == 0
    assert sorted(index for index, _, _ in heard.calls["results"]) == [0, 1]


@pytest.mark.slow
def test_scaling_sweep_runs_one_then_mirrored_devices(two_cpus):
    comparison = scaling_sweep(RunConfig(model="mlp", dataset="digits", steps=4, batch_size=32), "CPU", counts=[1, 2])
    assert [(row.strategy, row.replicas, row.status) for row in comparison.rows] == [
        ("one-device", 1, RunStatus.COMPLETED),
        ("mirrored", 2, RunStatus.COMPLETED),
    ]
    with pytest.raises(ConfigError, match="counts"):
        scaling_sweep(RunConfig(), "CPU", counts=[len(two_cpus) + 1])
    with pytest.raises(ConfigError, match="device_kind"):
        scaling_sweep(RunConfig(), "TPU")


def test_sweep_targets():
    assert sweep_targets(["GPU:0", "GPU:1", "GPU:2"], [1, 3]) == [
        CompareTarget("GPU:0", "one-device", ("GPU:0",)),
        CompareTarget("mirrored x3: GPU:0,GPU:1,GPU:2", "mirrored", ("GPU:0", "GPU:1", "GPU:2")),
    ]


def test_parse_targets_accepts_every_form():
    text = "CPU:0; gpu:1 ;mirrored:CPU:0,cpu:1\nmirrored;default;multi-worker:2;multi-worker;tpu:local;one-device:GPU:0;tpu:grpc://10.0.0.2:8470;"
    assert parse_targets(text) == [
        CompareTarget("CPU:0", "one-device", ("CPU:0",)),
        CompareTarget("GPU:1", "one-device", ("GPU:1",)),
        CompareTarget("mirrored:CPU:0,CPU:1", "mirrored", ("CPU:0", "CPU:1")),
        CompareTarget("mirrored", "mirrored"),
        CompareTarget("default", "default"),
        CompareTarget("multi-worker:2", "multi-worker", workers=2),
        CompareTarget("multi-worker", "multi-worker"),
        CompareTarget("tpu:local", "tpu", tpu_address="local"),
        CompareTarget("GPU:0", "one-device", ("GPU:0",)),
        CompareTarget("tpu:grpc://10.0.0.2:8470", "tpu", tpu_address="grpc://10.0.0.2:8470"),
    ]


@pytest.mark.parametrize(
    "text, bad",
    [
        ("", ""),
        ("CPU:0;cpu", "cpu"),
        ("GPX:0", "GPX:0"),
        ("mirrored:CPU:0,", "mirrored:CPU:0,"),
        ("multi-worker:x", "multi-worker:x"),
        ("multi-worker:0", "multi-worker:0"),
        ("tpu", "tpu"),
        ("default:CPU:0", "default:CPU:0"),
        ("one-device:CPU:0,CPU:1", "one-device:CPU:0,CPU:1"),
    ],
)
def test_parse_targets_rejects_bad_syntax_saying_what_is_allowed(text, bad):
    with pytest.raises(ConfigError) as error:
        parse_targets(text)
    assert error.value.field == "targets" and error.value.given == bad
    assert "allowed" in str(error.value) and "mirrored:" in str(error.value)


def test_targets_separated_with_commas_are_refused_with_the_semicolons_they_meant():
    with pytest.raises(ConfigError) as error:
        parse_targets("CPU:0, jax:CPU:0,GPU:1")
    assert error.value.given == "CPU:0, jax:CPU:0,GPU:1" and "allowed: 'CPU:0;jax:CPU:0;GPU:1': targets are separated with ';'" in str(
        error.value
    )
    for text in ("CPU:0,GPX:1", "jax:mirrored:CPU:0,CPU:99999"):  # a piece that is no target; a device list's own refusal
        with pytest.raises(ConfigError) as error:
            parse_targets(text)
        assert "separated" not in str(error.value), text


def test_config_for_moves_the_base_job_to_the_target():
    base = RunConfig(model="cnn", batch_size=128, steps=7, seed=3)
    config = CompareTarget("multi-worker:3", "multi-worker", workers=3).config_for(base)
    assert (config.strategy, config.workers, config.model, config.batch_size, config.steps, config.seed) == (
        "multi-worker",
        3,
        "cnn",
        128,
        7,
        3,
    )
    assert CompareTarget("tpu:local", "tpu", tpu_address="local").config_for(base).tpu_address == "local"


def _result(
    status=RunStatus.COMPLETED,
    devices=("CPU:0",),
    samples=1000.0,
    median_ms=5.0,
    spread=0.1,
    steps=100,
    replicas=1,
    environment=None,
    **config,
):
    """A finished run as the engine records it (for warnings that need no real run)."""
    return RunResult(
        status=status,
        config=RunConfig(**{"model": "mlp", "steps": 100, **config}).to_dict(),
        message="boom" if status == RunStatus.FAILED else "",
        steps_done=steps,
        replicas=replicas,
        warmup_steps=1,
        step_time_median_ms=median_ms,
        step_time_spread=spread,
        samples_per_s=samples,
        environment={"devices": list(devices), "host": socket.gethostname(), **(environment or {})},
    )


def test_clean_comparison_has_no_warnings():
    comparison = compare_results([("CPU:0", _result()), ("CPU:0 again", _result(samples=1100.0))])
    assert comparison.warnings == ()
    assert fairness_warnings(comparison) == []


def test_warns_about_a_stopped_run():
    warnings = compare_results([("CPU:0", _result()), ("CPU:1", _result(status=RunStatus.STOPPED, steps=40))]).warnings
    (stopped,) = warnings
    assert stopped.startswith("CPU:1 stopped early") and "40 of 100 steps" in stopped


def test_warns_about_float16_on_cpu():
    warnings = compare_results([("CPU:0", _result()), ("CPU:0 fp16", _result(precision="float16"))]).warnings
    assert any(w.startswith("CPU:0 fp16 runs float16 on a CPU") for w in warnings)
    assert any("differ in precision (off, float16)" in w for w in warnings)


def test_warns_about_a_wide_spread_with_its_value():
    warnings = compare_results(
        [("CPU:0", _result()), ("GPU:0", _result(devices=("GPU:0",), spread=0.45, median_ms=20.0))], model_params=5_000_000
    ).warnings
    (spread,) = warnings
    assert spread.startswith("GPU:0:") and "45%" in spread and "re-run with more steps" in spread


def test_warns_that_a_small_model_cannot_load_a_gpu():
    # A recorded GPU run (no GPU here): the warning reads only the row's figures.
    rows = [("CPU:0", _result()), ("GPU:0", _result(devices=("GPU:0",), median_ms=0.4))]
    warnings = compare_results(rows, model_params=50_826).warnings
    (small,) = warnings
    assert small.startswith("GPU:0:") and "too small to load a GPU" in small and "50,826 parameters" in small and "0.40 ms" in small
    assert "Try the ResNet or Transformer" in small  # what to do about it


def test_warns_about_too_few_steady_state_steps_and_failures_and_mismatches():
    rows = [("CPU:0", _result(steps=8)), ("CPU:1", _result(status=RunStatus.FAILED, samples=None, batch_size=128))]
    warnings = compare_results(rows).warnings
    assert any(w.startswith("CPU:0: only 7 steady-state step timings") for w in warnings)
    assert "CPU:1 failed: boom" in warnings
    assert any("differ in batch_size (64, 128)" in w for w in warnings)


def test_efficiency_only_compares_like_with_like():
    rows = [
        ("CPU:0", _result()),
        ("mirrored CPUs", _result(devices=("CPU:0", "CPU:1"), samples=1500.0, replicas=2)),
        ("GPU:0", _result(devices=("GPU:0",), samples=8000.0)),
        ("jax:CPU:0", _result(samples=1850.0, backend="jax")),
    ]
    base, mirrored, gpu, jax = compare_results(rows).rows
    assert base.scaling_efficiency == 1.0
    assert mirrored.speedup == 1.5 and mirrored.scaling_efficiency == 0.75
    assert gpu.speedup == 8.0 and gpu.scaling_efficiency is None
    assert jax.speedup == 1.85 and jax.scaling_efficiency is None, "another backend on the same CPU is no scaling"


def test_runs_that_counted_their_own_flops_name_their_counter_over_a_counter_that_did_not_count():
    counted = {"flops_per_step": 1.8e7, "flops_method": "XLA's cost analysis of the JAX train step"}
    rows = [(label, dataclasses.replace(_result(backend="jax"), **counted)) for label in ("jax:CPU:0", "jax:CPU:0 again")]
    comparison = compare_results(rows, flops_method="not counted")
    assert comparison.flops_per_step == 1.8e7 and comparison.flops_method == counted["flops_method"]


def test_a_run_that_counted_its_own_flops_shows_its_own_flop_rate_beside_a_run_counted_by_tensorflow():
    tensorflow = dataclasses.replace(_result(), flops_per_step=2.0e7, flops_method="TensorFlow's graph count")
    jax = dataclasses.replace(_result(backend="jax", samples=2000.0), flops_per_step=1.8e7, flops_method="XLA's cost analysis")
    comparison = compare_results([("CPU:0", tensorflow), ("jax:CPU:0", jax)], flops_per_step=2.0e7, flops_method="TensorFlow's graph count")
    tf_row, jax_row = comparison.rows
    assert tf_row.achieved_flops == pytest.approx(2.0e7 * 1000.0 / 64)
    assert jax_row.achieved_flops == pytest.approx(1.8e7 * 2000.0 / 64)  # its own count, as the run shows alone
    said = comparison.flops_method
    assert said.startswith(tensorflow.flops_method) and "jax:CPU:0 counted its own: 1.8e+07" in said and jax.flops_method in said


def test_table_shows_dashes_for_missing_figures():
    comparison = compare_results(
        [("CPU:0", _result()), ("CPU:9", _result(status=RunStatus.FAILED, samples=None, median_ms=None, spread=None))]
    )
    table = format_table(comparison)
    failed_line = next(line for line in table.splitlines() if line.startswith("CPU:9"))
    assert "[failed]" in failed_line and failed_line.split()[-1] == "-"
    assert "boom" not in table and comparison.warnings == ("CPU:9 failed: boom",)


def test_table_has_a_column_per_figure_in_figures_order():
    from core.results import FIGURES

    header = format_table(compare_results([("CPU:0", _result())])).splitlines()[0]
    positions = [header.index(figure.title) for figure in FIGURES]
    assert positions == sorted(positions) and header.index("replicas") < positions[0] < positions[-1] < header.index("speed-up")


def test_rows_read_their_figures_from_the_run():
    row = compare_results([("CPU:0", _result(median_ms=7.5, spread=0.2))]).rows[0]
    assert (row.step_time_median_ms, row.step_time_spread, row.samples_per_s) == (7.5, 0.2, 1000.0)
    with pytest.raises(AttributeError):
        row.no_such_figure  # noqa: B018


def test_comparison_reads_only_the_results_never_the_hardware(monkeypatch):
    import core.machine.peak_estimates as flops

    def no_hardware(*args):
        raise AssertionError("a comparison must not read the hardware")

    for name in ("peak_flops_for_devices", "cpu_peak_flops", "cpu_flags", "_gpu_model_names"):
        monkeypatch.setattr(flops, name, no_hardware)
    recorded = _result(environment={"peak_flops": 1e12, "peak_flops_how": "from the run", "cpu_native_bfloat16": True})
    older = _result()
    comparison = compare_results([("new", recorded), ("old", older)], flops_per_step=1e9)
    new, old = comparison.rows
    assert (new.estimate_flops, new.estimate_how) == (1e12, "from the run")
    assert new.fraction_of_estimate == pytest.approx(1e9 * 1000.0 / 64 / 1e12)
    assert old.estimate_flops is None and old.fraction_of_estimate is None and "not recorded" in old.estimate_how


@pytest.mark.parametrize("native, warned", [(False, True), (True, False), (None, False)])
def test_bfloat16_on_cpu_warning_uses_what_the_run_recorded(native, warned):
    environment = {} if native is None else {"cpu_native_bfloat16": native}
    rows = [("CPU:0", _result(precision="bfloat16", environment=environment)), ("CPU:0 again", _result(precision="bfloat16"))]
    warnings = compare_results(rows).warnings
    assert any(w.startswith("CPU:0 runs bfloat16 on a CPU without AVX-512 BF16 or AMX") for w in warnings) is warned


def test_a_run_picked_from_the_history_keeps_its_flops_per_step():
    # A compare run has no verdict of its own; live, the comparison's counter gave its FLOPs per
    # step. From the history there is no counter: the FLOPs the run recorded give the same figure.
    picked = dataclasses.replace(_result(samples=1000.0, batch_size=64), flops_per_step=2e6)
    live = compare_results([("CPU:0", dataclasses.replace(picked, flops_per_step=None))], flops_per_step=2e6).rows[0]
    from_history = compare_results([("CPU:0", picked)]).rows[0]
    assert from_history.achieved_flops == live.achieved_flops == pytest.approx(2e6 * 1000.0 / 64)
