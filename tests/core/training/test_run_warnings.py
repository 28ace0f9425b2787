"""Valid but questionable runs train, and their result says what is questionable (real runs, tiny models)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunConfig
from core.logs import NATIVE_LOG_NAME
from core.machine.conditions import Conditions, contention_warning
from core.results import RunResult, RunStatus
from core.runner import run_training
from core.training.metrics import call_size, noise_warning
from core.workloads.data import DATASETS
from tests.step_hooks import StepsTo

ROOT = Path(__file__).resolve().parents[3]
DIGITS_EXAMPLES = 1797
ONEDNN_HALF_LINE = "oneDNN supports DT_HALF only on platforms with AVX-512"


def setup_warnings(result: RunResult) -> tuple[str, ...]:
    """The run's warnings but those its measured conditions add (contention, noise: the suite's other worker may be busy)."""
    measured = {contention_warning(Conditions.from_dict(result.conditions)), noise_warning(result.step_time_spread)}
    return tuple(w for w in result.warnings if w not in measured)


@pytest.fixture
def cli_env(tmp_path):
    return dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))


def cli(args, env, timeout=240):
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_batch_larger_than_the_data_set_trains_and_warns(two_cpus):
    result = run_training(RunConfig(model="mlp", dataset="digits", batch_size=2 * DIGITS_EXAMPLES, steps=3))
    assert result.status == RunStatus.COMPLETED, result.message
    [warning] = setup_warnings(result)
    assert "larger than" in warning and DATASETS["digits"].title in warning and f"{DIGITS_EXAMPLES:,} examples" in warning
    assert "about 2.0 times" in warning and "at most 1,797" in warning


@pytest.mark.slow
def test_synthetic_data_and_a_batch_that_fits_give_no_batch_warning(two_cpus):
    fits = run_training(RunConfig(model="mlp", dataset="digits", batch_size=DIGITS_EXAMPLES, steps=2))
    synthetic = run_training(RunConfig(model="mlp", batch_size=8192, steps=2))
    assert fits.status == synthetic.status == RunStatus.COMPLETED
    assert setup_warnings(fits) == () and setup_warnings(synthetic) == ()


def test_a_call_as_long_as_the_run_is_halved_so_steady_steps_remain(two_cpus):
    calls = []
    result = run_training(RunConfig(model="mlp", steps=20, steps_per_call=50), hooks=[StepsTo(lambda records: calls.append(len(records)))])
    assert result.status == RunStatus.COMPLETED, result.message
    assert calls == [10, 10]
    assert result.config["steps_per_call"] == 10, "the result records the call size it really used"
    assert result.warmup_steps == 10 and result.step_time_median_ms > 0 and result.samples_per_s > 0
    [warning] = setup_warnings(result)
    assert warning.startswith("Steps per call lowered from 50 to 10") and "run 100 or more steps" in warning


@pytest.mark.slow
def test_a_call_shorter_than_the_run_is_kept_and_a_one_step_run_says_it_has_no_figures(two_cpus):
    assert call_size(15, 20) == (15, None)
    kept = run_training(RunConfig(model="mlp", steps=20, steps_per_call=15))
    assert kept.config["steps_per_call"] == 15 and setup_warnings(kept) == ()
    one = run_training(RunConfig(model="mlp", steps=1))
    assert one.status == RunStatus.COMPLETED and one.step_time_median_ms is None
    assert any(w.startswith("A 1-step run is all warm-up") for w in one.warnings)


@pytest.mark.slow
def test_float16_on_the_cpu_warns_in_the_result(two_cpus):
    result = run_training(RunConfig(model="mlp", steps=3, precision="float16"))
    assert result.status == RunStatus.COMPLETED, result.message
    assert any("roughly 50x slower" in w for w in result.warnings)


@pytest.mark.slow
def test_float16_cli_run_warns_and_keeps_tensorflow_notices_off_the_terminal(cli_env, tmp_path):
    # oneDNN forced on: it prints its ERROR-level DT_HALF notice at the first call on CPUs without AVX-512.
    env = dict(cli_env, TF_ENABLE_ONEDNN_OPTS="1")
    out = cli(["run", "--no-verdict", "--model", "mlp", "--steps", "3", "--precision", "float16", "--no-save", "--json"], env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert any("roughly 50x slower" in w for w in json.loads(out.stdout)["warnings"])
    assert ONEDNN_HALF_LINE not in out.stderr
    assert "I0000" not in out.stderr and "E0000" not in out.stderr, out.stderr
    if "avx512f" not in Path("/proc/cpuinfo").read_text():  # where TensorFlow prints the notice at all
        assert ONEDNN_HALF_LINE in (tmp_path / "logs" / NATIVE_LOG_NAME).read_text(), "the notice goes to the log"


@pytest.mark.slow
def test_mirrored_over_one_device_is_refused_before_training(cli_env):
    out = cli(["run", "--model", "mlp", "--strategy", "mirrored", "--steps", "3", "--no-save"], cli_env)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Mirrored needs two or more devices" in out.stderr
    assert "--logical-cpus 2" in out.stderr and "second GPU" in out.stderr
    assert "step 1/" not in out.stderr, "refused before any step"


@pytest.mark.slow
def test_mirrored_without_devices_uses_every_logical_cpu(two_cpus):
    result = run_training(RunConfig(model="mlp", strategy="mirrored", steps=2))
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.replicas == 2 and setup_warnings(result) == ()
