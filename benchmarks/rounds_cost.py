"""rounds_cost: what interleaved rounds cost: a default compare's wall time against one round (the old one-after-another order).

`main.py compare --model mlp --targets "CPU:0;CPU:0" --steps 400 --json` with the
default rounds and with `--rounds 1` (each target set up, warmed up, then all its
steps in one turn: the cost of the compare before rounds), alternated in fresh
processes, PAIRS pairs, on the machine as it is (run it quiet). Figure: the median
ratio of their wall times; target: at most 2x.
"""

from __future__ import annotations

from benchmarks import harness
from benchmarks.aa_drift import COMMAND

NAME = "rounds_cost"
PAIRS = 4
TARGET = "default compare <= 2x the wall time of one round"


def run(quick: bool) -> list[harness.Result]:
    pairs = 2 if quick else PAIRS
    timed = harness.alternate(
        {
            "rounds": lambda: harness.main_py_json(COMMAND)[1],
            "one": lambda: harness.main_py_json([*COMMAND, "--rounds", "1"])[1],
        },
        pairs,
    )
    ratio, ratios = harness.paired_ratio(timed["rounds"], timed["one"])
    return [
        harness.Result(
            NAME,
            ratio,
            "x",
            TARGET,
            ratio <= 2.0,
            f"default {harness.spread_text(timed['rounds'], '.1f')} s, one round {harness.spread_text(timed['one'], '.1f')} s; "
            f"per pair {', '.join(f'{r:.2f}' for r in ratios)}",
            timed,
        )
    ]
