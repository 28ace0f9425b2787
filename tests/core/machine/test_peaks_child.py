"""The ceilings child's matmul timing on a device whose every call pays a fixed overhead, as a GPU's does.

No GPU here: `FakeGpuKernels` is a named fake of one (a virtual clock, a rate of 400 TFLOP/s and
0.6 ms per call for the launch and the scalar read back, about what an H200 showed on 2026-11-28),
so the timing logic is checked on the arithmetic it has to get right, not on this machine's load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from core.machine import peaks_child

RATE = 400e12
CALL_OVERHEAD_S = 0.6e-3


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class FakeGpuKernels:
    """A fake GPU: a chain of n x n products takes chain x 2n^3 / RATE + CALL_OVERHEAD_S on the virtual clock."""

    method = "a fake GPU (virtual clock)"

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    def matmul_chain(self, device: Any, n: int, chain: int, precision: str) -> Callable[[], float]:
        def call() -> float:
            self.clock.now += chain * 2 * n**3 / RATE + CALL_OVERHEAD_S
            return 0.0

        return call


def test_the_chain_is_sized_from_the_full_size_product_so_the_call_overhead_is_a_small_share(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = VirtualClock()
    monkeypatch.setattr(peaks_child.time, "perf_counter", clock.perf_counter)
    flops, how = peaks_child._measure_matmul(FakeGpuKernels(clock), None, "GPU", "bfloat16")  # type: ignore[arg-type]
    # sized from the 1024 product (all overhead) the chain was one 8192 product: 1.1 TFLOP in 2.7 + 0.6 ms, 82% of the rate
    assert flops > 0.97 * RATE, how
    assert "8192x8192" in how and not how.startswith("bfloat16 matmul: 1 chained")
