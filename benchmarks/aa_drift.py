"""aa_drift: the same target compared with itself under a load that switches on and off: is a difference ever claimed?

COMPARES runs of `main.py compare --model mlp --targets "CPU:0;CPU:0" --steps 400 --json`
(default rounds), each in a fresh process, while `harness.DriftingLoad` switches one
busy loop per core on and off at random (seeded, as `../shared/tools/drift.sh` does).
The two rows are the same job on the same device: any "beyond noise" is a false
claim. Figure: the share of compares that claimed a difference; target: at most 5%
(1 of 20). Before interleaved rounds, 3 of 4 such compares claimed one.
"""

from __future__ import annotations

from benchmarks import harness

NAME = "aa_drift"
COMPARES = 20
TARGET = "<= 5% of compares claim a difference"
COMMAND = ["compare", "--model", "mlp", "--targets", "CPU:0;CPU:0", "--steps", "400", "--json"]


def run(quick: bool) -> list[harness.Result]:
    compares = 4 if quick else COMPARES
    claims, speedups, rounds, busy = [], [], set(), 0
    with harness.DriftingLoad(seed=1):
        for _ in range(compares):
            rows, _ = harness.main_py_json(COMMAND)
            other = rows[1]
            claims.append(bool(other["beyond_noise"]))
            speedups.append(other["speedup"])
            rounds.update(row["rounds"] for row in rows)
            busy += any(row["contended"] for row in rows)
    share = sum(claims) / compares
    return [
        harness.Result(
            NAME,
            100 * share,
            "%",
            TARGET,
            share <= 0.05,
            f"{sum(claims)}/{compares} claimed a difference; speed-ups {min(speedups):.2f}–{max(speedups):.2f}x; "
            f"rounds {sorted(rounds)}; {busy}/{compares} compares had a row marked busy",
            {"claims": claims, "speedups": speedups},
        )
    ]
