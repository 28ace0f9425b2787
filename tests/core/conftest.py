"""Core tests share one TensorFlow runtime with the CPU split into two logical devices."""

import pytest

LOGICAL_CPUS = 2


@pytest.fixture(scope="session")
def two_cpus() -> list[str]:
    """Short names of the two logical CPU devices (configured once, before TF initialises)."""
    from core.machine.runtime import RuntimeSettings, configure_runtime
    from core.machine.types import short_name

    configure_runtime(RuntimeSettings(logical_cpus=LOGICAL_CPUS))
    import tensorflow as tf

    names = [short_name(d.name) for d in tf.config.list_logical_devices("CPU")]
    assert len(names) >= LOGICAL_CPUS, f"expected {LOGICAL_CPUS} logical CPUs, TF has {names}"
    return names[:LOGICAL_CPUS]


@pytest.fixture(autouse=True)
def _runtime_before_a_slow_test(request) -> None:
    """Every slow core test (they start TensorFlow) finds the runtime split before its body can initialise it.

    Without it, the first slow test of a worker that trains in this process (a TensorFlow run beside a JAX
    job) left TensorFlow with one CPU, and a later test file that needs two failed on the same worker.
    """
    if request.node.get_closest_marker("slow"):
        request.getfixturevalue("two_cpus")
