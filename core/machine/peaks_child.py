"""The child process that measures the ceilings (`python -m core.machine.peaks_child`); `core.machine.peaks` runs it.

Each figure is sent as soon as it is known, one message of the one protocol
(`core.child_process.send`), so a parent that kills the child at its time limit
keeps what was measured by then.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from core.child_process import listen_to_parent, send
from core.machine.peaks import (
    CALIBRATION_SIZE,
    LONG_CALL_S,
    MATMUL_SIZE,
    MAX_CALL_S,
    MAX_CHAIN,
    NOT_MEASURED,
    PRECISIONS,
    STREAM_BYTES_PER_ELEMENT,
    STREAM_ELEMENTS,
    TARGET_CALL_S,
)


def _report(**fields: Any) -> None:
    send(fields)


def _timed(call: Callable[[], Any], repeats: int) -> float:
    """Median seconds of `repeats` calls; each call returns a scalar tensor, read back so the work is done."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call().numpy()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _matmul_function(tf: Any, n: int, chain: int, dtype: Any) -> Callable[[], Any]:
    """A traced call of `chain` chained n x n products; entries scaled by 1/sqrt(n) keep the values near 1 in every precision."""
    a = tf.cast(tf.random.normal((n, n), seed=1), dtype)
    b = tf.cast(tf.random.normal((n, n), seed=2) / math.sqrt(n), dtype)

    @tf.function
    def products(x, y):
        for _ in range(chain):
            x = tf.matmul(x, y)
        return tf.reduce_sum(tf.cast(x[0, :8], tf.float32))

    traced = products.get_concrete_function(a, b)  # tracing is never timed
    return lambda: traced(a, b)


def _measure_matmul(tf: Any, kind: str, dtype: Any) -> tuple[float, str]:
    """(FLOP/s, how): calibrate at 1024, then chain full-size products to about TARGET_CALL_S per call.

    A call predicted to take LONG_CALL_S or more gets no warm-up call of its
    own: the calibration warmed the process up, what is left of a first call
    (graph set-up, ms) is under a few percent of it, and the median of 3
    drops the slowest call anyway.
    """
    small = _matmul_function(tf, CALIBRATION_SIZE, 1, dtype)
    small().numpy()
    rate = 2 * CALIBRATION_SIZE**3 / _timed(small, 2)
    n = MATMUL_SIZE.get(kind, 4096)
    while n > CALIBRATION_SIZE and 2 * n**3 / rate > MAX_CALL_S:
        n //= 2
    chain = max(1, min(MAX_CHAIN, math.ceil(TARGET_CALL_S * rate / (2 * n**3))))
    call = _matmul_function(tf, n, chain, dtype)
    long_call = 2 * n**3 * chain / rate >= LONG_CALL_S
    if not long_call:
        call().numpy()  # warm-up: kernel selection, first allocations
    repeats = 3 if long_call else 5
    seconds = _timed(call, repeats)
    warm = "after the calibration call" if long_call else "after a warm-up call"
    return 2 * n**3 * chain / seconds, f"{dtype.name} matmul: {chain} chained {n}x{n} products per call, median of {repeats} calls {warm}"


def _measure_bandwidth(tf: Any) -> tuple[float, str]:
    """Bytes/s of `v += d` in place over STREAM_ELEMENTS floats, from the time difference of a long and a short chain.

    The difference cancels what every call pays once (launch, read-back, the final read of v).
    """
    v = tf.Variable(tf.zeros([STREAM_ELEMENTS], tf.float32))
    d = tf.fill([STREAM_ELEMENTS], 1e-3)

    def chain_of(count: int) -> Callable[[], Any]:
        @tf.function
        def adds(delta):
            for _ in range(count):
                v.assign_add(delta)
            return v[0]

        return lambda: adds(d)

    one_add = chain_of(1)
    one_add().numpy()
    count = max(2, min(MAX_CHAIN, math.ceil(TARGET_CALL_S / max(_timed(one_add, 3), 1e-6))))
    many_adds = chain_of(count)
    many_adds().numpy()
    t_many, t_one = _timed(many_adds, 5), _timed(one_add, 5)
    per_add = (t_many - t_one) / (count - 1) if t_many > t_one else t_many / count
    mib = STREAM_ELEMENTS * 4 // 2**20
    how = (
        f"bandwidth: in-place v += d on two {mib} MiB float32 arrays, {STREAM_BYTES_PER_ELEMENT} bytes read + written per element, "
        f"from the difference of a 1-add and a {count}-add call (medians of 5)"
    )
    return STREAM_BYTES_PER_ELEMENT * STREAM_ELEMENTS / per_add, how


def _measure_device(tf: Any, kind: str, short: str, name: str) -> None:
    method = "Measured in a child process with tf.function, each call ended by reading a scalar back"
    _report(what="device", device=short, kind=kind, name=name, method=method, stage=f"starting on {short}")
    for precision, reason in NOT_MEASURED.get(kind, {}).items():
        _report(what="matmul", device=short, precision=precision, error=reason)
    with tf.device(short):
        for precision in PRECISIONS.get(kind, ("float32",)):
            _report(what="stage", stage=f"measuring {short} {precision} matmul")
            try:
                value, how = _measure_matmul(tf, kind, getattr(tf, precision))
                _report(what="matmul", device=short, precision=precision, value=value, how=how)
            except Exception as exc:  # one precision a device lacks must not end the others
                _report(what="matmul", device=short, precision=precision, error=f"failed: {type(exc).__name__}: {str(exc)[:200]}")
        _report(what="stage", stage=f"measuring {short} memory bandwidth")
        try:
            value, how = _measure_bandwidth(tf)
            _report(what="bandwidth", device=short, value=value, how=how)
        except Exception as exc:
            _report(what="bandwidth", device=short, error=f"failed: {type(exc).__name__}: {str(exc)[:200]}")


def _child_main() -> None:
    """Measure each local device TensorFlow lists, reporting every figure as soon as it is known."""
    listen_to_parent()  # the app gone: end at once
    _report(what="stage", stage="importing TensorFlow")
    import tensorflow as tf

    from core.machine.cpu import cpu_info

    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)  # take only what the measurement needs
    for device in tf.config.list_physical_devices():
        kind = device.device_type
        if kind not in PRECISIONS:
            continue
        short = device.name.split("physical_device:")[-1]
        if kind == "CPU":
            name = cpu_info().get("Model", "CPU")
        else:
            name = str(tf.config.experimental.get_device_details(device).get("device_name", "") or short)
        _measure_device(tf, kind, short, name)
    _report(what="done", stage="done")


if __name__ == "__main__":
    _child_main()
