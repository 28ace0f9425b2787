"""The largest-batch search: its arithmetic on memory curves, sizes, and Stop killing the probe's child process."""

from __future__ import annotations

import random
import threading
import time

import psutil
import pytest

from core.config import ConfigError, RunConfig
from core.tuning.max_batch import MARGIN, TOLERANCE, bytes_per_example, find_max_batch, margin_text, parse_size
from core.tuning.max_batch_probe import Probe, ProbeLimits, run_probe
from tests.waiting import wait_until

MiB = 2**20


def memory_curve(base: float, per_example: float, noise: float, seed: int = 0):
    """A stand-in for the child's measurement, so the search's arithmetic alone is checked: peak = base + per_example x batch ± noise."""
    rng = random.Random(seed)

    def probe(config, batch, limits, stop_event):
        peak = int(base + per_example * batch + rng.uniform(-noise, noise))
        return Probe(batch, peak <= limits.host_bytes, peak)

    return probe


@pytest.mark.parametrize(
    ("base", "per_example", "budget", "start"),
    [
        (600 * MiB, 3_000, 2048 * MiB, 64),
        (650 * MiB, 380_000, 2048 * MiB, 64),
        (600 * MiB, 3_000, 900 * MiB, 16_384),
        (600 * MiB, 380_000, 700 * MiB, 512),
    ],
)
def test_the_search_lands_just_below_the_true_limit_never_above(base, per_example, budget, start) -> None:
    for seed in range(3):
        result = find_max_batch(RunConfig(model="mlp"), budget, start=start, probe=memory_curve(base, per_example, 4 * MiB, seed))
        true_largest = int((budget - base - 4 * MiB) / per_example)  # fits whatever the noise
        assert result.finished and result.limit_kind == "host memory budget" and result.memory_limit == budget
        assert 0.9 * true_largest <= result.max_batch <= true_largest
        assert result.max_batch == int(result.largest_fitting * (1 - MARGIN))
        assert result.smallest_failing - result.largest_fitting <= TOLERANCE * result.largest_fitting
        assert len(result.probes) <= 14
        fitting = [p.batch for p in result.probes if p.fits]
        if result.bytes_per_example is None:  # the batches that fit lie too close for their peaks to rise beyond noise
            assert (max(fitting) - min(fitting)) * per_example <= 2 * 4 * MiB + 0.01 * budget
        else:
            assert abs(result.bytes_per_example - per_example) <= 2 * 4 * MiB / (max(fitting) - min(fitting))  # the noise over the span


def test_nothing_fits_gives_zero_and_a_start_that_does_not_fit_is_halved() -> None:
    none_fit = find_max_batch(RunConfig(model="mlp"), 500 * MiB, start=8, probe=memory_curve(600 * MiB, 3_000, 0))
    assert none_fit.max_batch == 0 and none_fit.finished and [p.batch for p in none_fit.probes] == [8, 4, 2, 1]
    assert "no batch fit" in none_fit.notes[0]
    halved = find_max_batch(RunConfig(model="mlp"), 700 * MiB, start=4096, probe=memory_curve(600 * MiB, 380_000, 0))
    assert halved.probes[0].batch == 4096 and not halved.probes[0].fits and 0 < halved.max_batch < 276


def test_sizes_are_read_in_binary_and_decimal_units_and_bad_ones_say_what_is_allowed() -> None:
    assert parse_size("4GiB") == 4 * 2**30 and parse_size("512 MiB") == 512 * MiB and parse_size("1.5GB") == 1_500_000_000
    assert bytes_per_example([(64, 100), (64, 120)]) is None
    # a small model's host peaks: 300 MiB at batch 64 and 2 MiB more at 4096 read "725 B per example" before; noise, said so
    assert bytes_per_example([(64, 300 * MiB), (4096, 302 * MiB)]) is None
    assert bytes_per_example([(64, 300 * MiB), (4096, 300 * MiB + 4032 * 10_000)]) == pytest.approx(10_000)
    for bad in ("4XB", "", "-1GiB", "0.5KiB"):
        with pytest.raises(ConfigError, match="a size such as 512MiB or 4GiB"):
            parse_size(bad)
    with pytest.raises(ConfigError, match="--memory-limit: got '4XB'"):
        parse_size("4XB")


def test_stop_kills_the_probe_in_flight_and_its_child_process() -> None:
    stop_event = threading.Event()
    started = threading.Event()
    outcome = {}
    before = {child.pid for child in psutil.Process().children(recursive=True)}

    def search() -> None:
        outcome["result"] = find_max_batch(RunConfig(model="mlp"), 2**30, stop_event=stop_event, on_probe=lambda b, p: p or started.set())

    thread = threading.Thread(target=search)
    thread.start()
    assert started.wait(30)

    def new_children() -> list[psutil.Process]:
        return [c for c in psutil.Process().children(recursive=True) if c.pid not in before]

    wait_until(new_children, "the probe's child process")
    children = new_children()
    stop_event.set()
    thread.join(10)
    assert not thread.is_alive()
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
    result = outcome["result"]
    assert result.stopped and not result.finished and result.probes == ()
    assert result.stopped_by == "stop" and result.unfinished_batch == RunConfig(model="mlp").batch_size
    assert margin_text(result).startswith(f"stopped during the probe of batch {result.unfinished_batch:,} after 0 probe(s)")


def test_a_budget_stops_the_search_and_it_says_what_it_knows() -> None:
    curve = memory_curve(600 * MiB, 3_000, 0)

    def slow_probe(config, batch, limits, stop_event):
        stop_event.wait(0.3)  # a probe takes a while; the budget's deadline sets the event
        return Probe(batch, False, None, stopped=True) if stop_event.is_set() else curve(config, batch, limits, stop_event)

    began = time.monotonic()
    result = find_max_batch(RunConfig(model="mlp"), 2**40, start=64, probe=slow_probe, budget_s=1.0)
    assert time.monotonic() - began < 2.0
    assert result.stopped and not result.finished and result.smallest_failing is None and result.largest_fitting >= 64
    assert result.stopped_by == "budget" and result.budget_s == 1.0
    cut_short = result.unfinished_batch
    assert cut_short and cut_short > result.largest_fitting and cut_short not in [p.batch for p in result.probes]
    text = margin_text(result)
    assert text == (
        f"the budget of 1 s ran out during the probe of batch {cut_short:,} after {len(result.probes)} probe(s): "
        f"batch {result.largest_fitting:,} fits, {cut_short:,} was not measured; the limit was not found"
    )
    assert "every batch tried fit" not in text and result.bytes_per_example != 0
    answer = result.to_dict()
    assert (answer["stopped_by"], answer["unfinished_batch"], answer["largest_fitting"]) == ("budget", cut_short, result.largest_fitting)


def test_a_budget_that_runs_out_while_narrowing_the_gap_keeps_the_bracket_and_says_so() -> None:
    curve = memory_curve(600 * MiB, 3_000, 0)  # 32,768 fits 700 MiB, 65,536 does not
    tried = []

    def probe(config, batch, limits, stop_event):
        tried.append(batch)
        if len(tried) < 3:
            return curve(config, batch, limits, stop_event)
        stop_event.wait()  # the third probe runs until the budget's deadline kills it
        return Probe(batch, False, None, stopped=True)

    result = find_max_batch(RunConfig(model="mlp"), 700 * MiB, start=32_768, probe=probe, budget_s=1.0)
    assert (result.largest_fitting, result.smallest_failing, result.stopped_by) == (32_768, 65_536, "budget")
    assert result.unfinished_batch == tried[2] and result.max_batch == int(32_768 * (1 - MARGIN))
    assert margin_text(result) == (
        f"5% below 32,768, the largest that fit; the budget of 1 s ran out during the probe of batch {tried[2]:,} after 2 probe(s), "
        "before the gap to 65,536 was narrowed"
    )


def test_a_gpu_probe_cut_short_shows_no_host_figure_where_device_peaks_are_read() -> None:
    """On an H200 a probe the budget cut short showed its host's 5.3 GiB beside the device peaks, read as over the 4 GiB cap.

    No GPU here: the probes are stand-ins, as a GPU probe reports (device peaks on_accelerator, the watched host peak when killed)."""
    shown = []

    def gpu_probe(config, batch, limits, stop_event):
        if batch < 256:
            return Probe(batch, True, 130 * MiB + 3_300 * batch, on_accelerator=True)
        stop_event.wait()
        return Probe(batch, False, 5 * 2**30, "stopped", stopped=True)

    job = RunConfig(model="mlp", backend="jax", strategy="one-device", devices=("GPU:0",))
    result = find_max_batch(job, 4 * 2**30, start=64, probe=gpu_probe, budget_s=1.0, on_probe=lambda b, p: p and shown.append(p))
    cut = shown[-1]
    assert cut.stopped and cut.batch == 256 and cut.peak_bytes is None
    assert cut.reason == "the budget of 1 s ran out before it finished (the device's memory is read when a probe finishes)"
    assert result.limit_kind == "device memory" and result.unfinished_batch == 256 and result.largest_fitting == 128


def test_a_budget_kills_the_real_probe_in_flight() -> None:
    began = time.monotonic()
    result = find_max_batch(RunConfig(model="mlp"), 2**30, budget_s=2.0)  # the child is still starting TensorFlow at 2 s
    assert time.monotonic() - began < 8.0
    assert result.stopped and result.probes == () and result.stopped_by == "budget"
    batch = result.unfinished_batch
    assert batch == RunConfig(model="mlp").batch_size
    assert margin_text(result) == (
        f"the budget of 2 s ran out during the probe of batch {batch:,} after 0 probe(s): "
        f"no batch was found to fit yet, {batch:,} was not measured; the limit was not found"
    )


@pytest.mark.slow
def test_a_probe_past_its_host_budget_is_killed_by_the_memory_watch() -> None:
    budget = 200 * MiB  # TensorFlow alone takes more once imported
    probe = run_probe(RunConfig(model="mlp", strategy="one-device", devices=("CPU:0",)), 8, ProbeLimits(budget), timeout_s=120)
    assert not probe.fits and not probe.stopped
    assert probe.reason == f"over the memory budget: the process passed {budget:,} bytes and was stopped"
    assert probe.peak_bytes is not None and probe.peak_bytes > budget


@pytest.mark.slow
@pytest.mark.heavy  # a JAX process per probe
def test_a_jax_probe_past_the_budget_is_killed_by_the_watch_and_the_search_still_answers() -> None:
    job = RunConfig(model="cnn", backend="jax")  # about 1.2 MiB more per example: the budget is crossed within a few probes
    base = run_probe(job, 16, ProbeLimits(4 * 2**30), timeout_s=120)
    assert base.fits and base.peak_bytes, base
    budget = base.peak_bytes + 70 * MiB  # crossed near batch 96 (a probe's peak varies by about 25 MiB)
    result = find_max_batch(job, budget, start=32, cap=1024, tolerance=0.5)
    killed = [p for p in result.probes if p.reason == f"over the memory budget: the process passed {budget:,} bytes and was stopped"]
    assert killed, result.probes
    assert all(not p.fits and p.peak_bytes > budget for p in killed)
    assert result.finished and result.smallest_failing and 16 <= result.max_batch < result.smallest_failing


@pytest.mark.slow
def test_a_budget_kills_a_jax_probe_in_flight_and_nothing_of_it_is_left() -> None:
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    outcome = {}

    def search() -> None:
        outcome["began"] = time.monotonic()
        outcome["result"] = find_max_batch(RunConfig(model="mlp", backend="jax"), 2**30, budget_s=4.0)
        outcome["took"] = time.monotonic() - outcome["began"]

    thread = threading.Thread(target=search)
    thread.start()
    seen: dict[int, psutil.Process] = {}
    while thread.is_alive():  # every process the search starts, noted while it runs
        seen |= {c.pid: c for c in psutil.Process().children(recursive=True) if c.pid not in before}
        time.sleep(0.02)
    thread.join()
    result = outcome["result"]
    assert outcome["took"] < 4.0 + 2.0 and result.stopped and not result.finished
    assert seen and not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in seen.values())


@pytest.mark.slow
def test_a_probe_reports_its_own_peak_not_the_size_of_the_big_process_that_started_it() -> None:
    """Linux's ru_maxrss keeps a forked child's parent size across exec: the probe reads VmHWM, which starts afresh."""
    import numpy as np

    parent = np.ones(1_500_000_000, dtype=np.uint8)  # this process as big as the app with TensorFlow loaded
    probe = run_probe(RunConfig(model="mlp", backend="jax"), 16, ProbeLimits(4 * 2**30), timeout_s=120)
    assert probe.fits and probe.peak_bytes, probe
    assert probe.peak_bytes < parent.nbytes, probe
