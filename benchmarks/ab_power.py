"""ab_power: a real difference under a load that switches on and off: is it found?

SWEEPS runs of `main.py sweep --model mlp --steps-per-call 1,16 --steps 320 --json`
(default rounds), each in a fresh process, under `harness.DriftingLoad`. 16 steps
per call is about 3x as fast as 1 on the MLP (quiet machine). Figure: the share of
sweeps that name 16 the best, beyond noise; target: at least 95%.
"""

from __future__ import annotations

from benchmarks import harness

NAME = "ab_power"
SWEEPS = 20
TARGET = ">= 95% of sweeps find 16 steps per call faster beyond noise"
COMMAND = ["sweep", "--model", "mlp", "--steps-per-call", "1,16", "--steps", "320", "--json"]


def run(quick: bool) -> list[harness.Result]:
    sweeps = 4 if quick else SWEEPS
    found, ratios = [], []
    with harness.DriftingLoad(seed=2):
        for _ in range(sweeps):
            document, _ = harness.main_py_json(COMMAND)
            rows = document["rows"]
            best = document["best"]
            found.append(best is not None and rows[best]["settings"]["steps_per_call"] == 16 and document["best_beyond_noise"])
            rates = [row["samples_per_s"] or 0 for row in rows]
            ratios.append(rates[1] / rates[0] if rates[0] else 0.0)
    share = sum(found) / sweeps
    return [
        harness.Result(
            NAME,
            100 * share,
            "%",
            TARGET,
            share >= 0.95,
            f"{sum(found)}/{sweeps} found 16 faster beyond noise; 16 over 1: {min(ratios):.2f}–{max(ratios):.2f}x",
            {"found": found, "ratios": ratios},
        )
    ]
