"""What a stored run recorded about its devices' peak while it ran: read back from its `environment`.

The run wrote these entries with `core.machine.peak_estimates.run_peak_environment`;
comparisons, verdicts and exports shown later read them here instead of the
hardware (which may have changed, or be another machine's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.machine.peak_estimates import CPU_NATIVE_BFLOAT16, PEAK_FLOPS, PEAK_FLOPS_HOW


def recorded_peak_flops(environment: Mapping[str, Any]) -> tuple[float | None, str]:
    """The datasheet/ISA peak FLOP/s a run recorded for its devices, and how it was found.

    Runs recorded before the app estimated peaks during the run have none: (None, why).
    """
    if PEAK_FLOPS_HOW not in environment:
        return None, "not recorded with this run (an older version of the app ran it)"
    peak = environment.get(PEAK_FLOPS)
    return (float(peak) if peak else None), str(environment[PEAK_FLOPS_HOW])


def recorded_native_bfloat16(environment: Mapping[str, Any]) -> bool | None:
    """Whether the run's CPU had native bfloat16 math (AVX-512 BF16 or AMX); None when the run did not record it."""
    value = environment.get(CPU_NATIVE_BFLOAT16)
    return None if value is None else bool(value)
