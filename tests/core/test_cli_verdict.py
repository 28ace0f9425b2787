"""Measured ceilings and the verdict from the CLI, as a user runs it: `peaks`, and `run` with its diagnosis.

The ceilings come from a peaks cache the test writes beside the history
(measuring takes a minute or more: tests/core/machine/test_peaks.py measures).
Each verdict criterion of issue 15 is one real `main.py run` in a subprocess.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli.machine_commands import format_peaks
from core.diagnosis.verdict import NOISY_ADVICE, TOO_NOISY
from core.formatting import format_si
from core.history.store import RunStore
from core.machine import peaks
from core.machine.peaks import PeaksReport
from tests.ceilings_cache import BANDWIDTH, BFLOAT16, FLOAT32, write_ceilings_cache

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PEAK_KEYS = {"name", "matmul_flops", "bandwidth_bytes_per_s", "estimate_flops", "measured_at"}


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory):
    """A data folder holding a peaks cache for this machine (its CPU model and TensorFlow version)."""
    data = tmp_path_factory.mktemp("verdict") / "data"
    write_ceilings_cache(data / peaks.CACHE_FILE)
    return dict(os.environ, DEVICE_LAB_DATA_DIR=str(data), DEVICE_LAB_LOG_DIR=str(data.parent / "logs"))


def cli(args, env, timeout=300):
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_peaks_json_gives_each_device_its_ceilings_and_the_text_states_the_method(cli_env):
    out = cli(["peaks", "--json"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    document = json.loads(out.stdout)
    (cpu,) = document["devices"]
    assert PEAK_KEYS <= set(cpu) and document["cached"] is True
    assert cpu["matmul_flops"] == {"float32": FLOAT32, "bfloat16": BFLOAT16} and cpu["bandwidth_bytes_per_s"] == BANDWIDTH
    assert cpu["estimate_flops"]["float32"] > 0 and "cores" in cpu["estimate_method"]
    text = format_peaks(PeaksReport.from_dict({**document, "cached": True}), document["cache_file"])  # what `main.py peaks` prints
    assert "float32 matmul" in text and format_si(FLOAT32, "FLOP/s") in text and "20.00 GB/s" in text
    assert "method: written by the test" in text and "estimate: " in text and "read from the cache" in text
    assert f"with TensorFlow {document['machine']['tensorflow']}" in text  # the framework that measured them


def test_a_small_mlp_batch_is_overhead_bound_and_the_history_keeps_the_verdict(cli_env):
    out = cli(["run", "--model", "mlp", "--batch-size", "8", "--steps", "200", "--json"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    # Under contention (another process used the CPU: the run's conditions, or a probe's) no bound is judged, rightly;
    # nor when the step times spread too widely (a short run beside another test worker), which the evidence says.
    noisy = (
        result["conditions"]["contended"]
        or "a run of its evidence was measured while" in result["bound_evidence"]
        or result["bound_evidence"].startswith("Too noisy to judge: the run's step times spread over")
    )
    expected = "unknown" if noisy else "overhead"
    assert result["bound"] == expected, result["bound_evidence"]
    if noisy:
        assert result["bound_evidence"].startswith(TOO_NOISY) and result["advice"] == NOISY_ADVICE
    else:
        assert "fixed cost" in result["bound_evidence"] and result["advice"].startswith("Raise")
    assert result["pct_of_measured_peak"] == pytest.approx(100 * result["achieved_flops"] / FLOAT32)
    assert "Diagnosing" in out.stderr and "probe run 1: batch 1 instead of 8" in out.stderr
    assert result["memory_estimate"]["total_bytes"] > 0
    with RunStore.open(Path(cli_env["DEVICE_LAB_DATA_DIR"]) / "history.sqlite3") as store:
        (stored,) = store.list_runs()
        assert (stored.status, stored.figures["bound"]) == ("completed", expected)
        assert store.load(stored.id, with_steps=False).advice == result["advice"]


@pytest.mark.heavy  # a diagnosed CNN at batch 256 with its probe runs
def test_a_large_cnn_batch_is_neither_overhead_nor_input_bound(cli_env):
    out = cli(["run", "--model", "cnn", "--batch-size", "256", "--steps", "40", "--json", "--no-save"], cli_env)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["bound"] in ("compute", "unknown"), result["bound_evidence"]
    assert result["achieved_flops"] > 0 and result["advice"]
