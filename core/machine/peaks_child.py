"""The child process that measures the ceilings (`python -m core.machine.peaks_child ENGINE`); `core.machine.peaks` runs it.

ENGINE is the one that computes (`core.machine.peaks_kernels`): TensorFlow where
it is installed, else JAX, else PyTorch, on each device that engine lists.

Each figure is sent as soon as it is known, one message of the one protocol
(`core.child_process.send`), so a parent that kills the child at its time limit
keeps what was measured by then.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from core.child_process import listen_to_parent, send
from core.config import backend_title
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
from core.machine.peaks_kernels import Kernels, kernels_for


def _report(**fields: Any) -> None:
    send(fields)


def _timed(call: Callable[[], Any], repeats: int) -> float:
    """Median seconds of `repeats` calls; each call returns a scalar, read back as a float so the work is done."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        float(call())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _measure_matmul(kernels: Kernels, device: Any, kind: str, precision: str) -> tuple[float, str]:
    """(FLOP/s, how): calibrate at 1024 to choose the size, time one full-size product, then chain them to about TARGET_CALL_S.

    The chain is sized from the full-size product's own rate, not the 1024 one's: on a GPU a
    1024 product takes microseconds and its call is all overhead (launch, the scalar read back),
    so a chain sized from it was one product long, and the H200's bfloat16 ceiling read 48% of
    its datasheet (2026-11-28) where a long chain reads the units' rate. A call predicted to
    take LONG_CALL_S or more gets no warm-up call of its own (nor a timing of one product alone):
    the calibration warmed the process up, what is left of a first call (graph set-up, ms) is
    under a few percent of it, and the median of 3 drops the slowest call anyway.
    """
    small = kernels.matmul_chain(device, CALIBRATION_SIZE, 1, precision)
    float(small())
    rate = 2 * CALIBRATION_SIZE**3 / _timed(small, 2)
    n = MATMUL_SIZE.get(kind, 4096)
    while n > CALIBRATION_SIZE and 2 * n**3 / rate > MAX_CALL_S:
        n //= 2
    single = kernels.matmul_chain(device, n, 1, precision)
    if 2 * n**3 / rate < LONG_CALL_S:
        float(single())  # warm-up: kernel selection, first allocations
        rate = 2 * n**3 / _timed(single, 2)
    chain = max(1, min(MAX_CHAIN, math.ceil(TARGET_CALL_S * rate / (2 * n**3))))
    call = single if chain == 1 else kernels.matmul_chain(device, n, chain, precision)
    long_call = 2 * n**3 * chain / rate >= LONG_CALL_S
    if not long_call and chain > 1:
        float(call())  # warm-up of the chained call
    repeats = 3 if long_call else 5
    seconds = _timed(call, repeats)
    warm = "after the calibration call" if long_call else "after a warm-up call"
    return 2 * n**3 * chain / seconds, f"{precision} matmul: {chain} chained {n}x{n} products per call, median of {repeats} calls {warm}"


def _measure_bandwidth(kernels: Kernels, device: Any) -> tuple[float, str]:
    """Bytes/s of `v += d` over STREAM_ELEMENTS floats, from the time difference of a long and a short chain.

    The difference cancels what every call pays once (launch, read-back, the final read of v).
    """
    one_add = kernels.add_chain(device, 1)
    float(one_add())
    count = max(2, min(MAX_CHAIN, math.ceil(TARGET_CALL_S / max(_timed(one_add, 3), 1e-6))))
    many_adds = kernels.add_chain(device, count)
    float(many_adds())
    t_many, t_one = _timed(many_adds, 5), _timed(one_add, 5)
    per_add = (t_many - t_one) / (count - 1) if t_many > t_one else t_many / count
    mib = STREAM_ELEMENTS * 4 // 2**20
    how = (
        f"bandwidth: v += d on two {mib} MiB float32 arrays, {STREAM_BYTES_PER_ELEMENT} bytes read + written per element, "
        f"from the difference of a 1-add and a {count}-add call (medians of 5)"
    )
    return STREAM_BYTES_PER_ELEMENT * STREAM_ELEMENTS / per_add, how


def _measure_device(kernels: Kernels, device: Any, kind: str, short: str, name: str) -> None:
    _report(what="device", device=short, kind=kind, name=name, method=kernels.method, stage=f"starting on {short}")
    for precision, reason in NOT_MEASURED.get(kind, {}).items():
        _report(what="matmul", device=short, precision=precision, error=reason)
    for precision in PRECISIONS.get(kind, ("float32",)):
        _report(what="stage", stage=f"measuring {short} {precision} matmul")
        try:
            value, how = _measure_matmul(kernels, device, kind, precision)
            _report(what="matmul", device=short, precision=precision, value=value, how=how)
        except Exception as exc:  # one precision a device lacks must not end the others
            _report(what="matmul", device=short, precision=precision, error=f"failed: {type(exc).__name__}: {str(exc)[:200]}")
    _report(what="stage", stage=f"measuring {short} memory bandwidth")
    try:
        value, how = _measure_bandwidth(kernels, device)
        _report(what="bandwidth", device=short, value=value, how=how)
    except Exception as exc:
        _report(what="bandwidth", device=short, error=f"failed: {type(exc).__name__}: {str(exc)[:200]}")


def _child_main(engine: str) -> None:
    """Measure each local device `engine` lists, reporting every figure as soon as it is known."""
    listen_to_parent()  # the app gone: end at once
    _report(what="stage", stage=f"importing {backend_title(engine)}")
    kernels = kernels_for(engine)
    for device, kind, short, name in kernels.devices():
        if kind in PRECISIONS:
            _measure_device(kernels, device, kind, short, name)
    _report(what="done", stage="done")


if __name__ == "__main__":
    _child_main(sys.argv[1] if len(sys.argv) > 1 else "tensorflow")
