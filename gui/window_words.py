"""Core's messages in the window's words: where one names a command-line flag, the window names its own control.

`core` speaks to the command line and to the window alike, and some of its
messages tell the user a flag to give (`--budget-s`, `--backends`,
`--memory-limit`, `--rounds N`, ...). Every view that shows such a message
(the Sweep tab's searches, the run form's hints and results, the Compare
notes) passes it through `window_words`: the window names the field to change,
or, where it has no such control, says what it does instead.
"""

from __future__ import annotations

import re

from core.tuning.backend_stage import BACKENDS_OFF_NOTE

DEVICE_SETTINGS = ("Devices", "Device settings…")  # the menu and its entry with the logical CPU split (gui.menus)
LOGICAL_CPUS = "Logical CPUs"  # that dialog's field (gui.dialogs.settings)
LOGICAL_CPUS_PATH = f"{DEVICE_SETTINGS[0]} ▸ {DEVICE_SETTINGS[1]} ▸ {LOGICAL_CPUS}"
TIME_BUDGET = "Time budget (s)"  # the Sweep tab's autotune field (the CLI's --budget-s)
MEMORY_BUDGET = "Memory budget"  # the Sweep tab's largest-batch and autotune field (the CLI's --memory-limit)

PHRASES = (  # (what core says, what the window says): the window has no control for these, or a better sentence
    (BACKENDS_OFF_NOTE, "backend not tuned: the search keeps the run form's Backend (the Compare tab runs the backends side by side)"),
    ("; --objective samples adopts the most samples/s regardless", ""),
    (" (--objective samples)", ""),
    ("(Rounds in the window, --rounds on the command line)", "(Rounds, in the Compare tab)"),
    (
        "add --data synthetic (or an .npz), or --backend tensorflow",
        "choose Synthetic (or an .npz) as the Data set, or TensorFlow as the Backend",
    ),
    (
        "(Settings > Logical CPUs, or --logical-cpus 2 on the CLI; takes effect after restart)",
        f"({LOGICAL_CPUS_PATH}: 2 or more; takes effect after a restart)",
    ),
    (
        "Split the CPU with --logical-cpus 2 (in the window: Settings > Logical CPUs; takes effect after a restart)",
        f"Split the CPU into logical devices ({LOGICAL_CPUS_PATH}: 2 or more; takes effect after a restart)",
    ),
    ("pick the devices with --devices", "tick the devices in the run form's Devices list"),
    ("--vocab N", "a Vocabulary (the run form's field)"),
    ("(--trust on the command line)", "(the window asks when the file is opened)"),
    (
        '--custom-objects FILE.py with --trust, or "Open with custom layers…" in the window\'s trust dialog',
        '"Open with custom layers…" in the trust dialog, when the file is opened again',
    ),
)
FLAGS = (  # (a flag as core writes it, the window's control), as a field name ("--target: got ...") or in a sentence
    (r"--budget-s\b", TIME_BUDGET),
    (r"--memory-limit\b", MEMORY_BUDGET),
    (r"--rounds (\d+)", r"Rounds at \1"),
    (r"--target(?![\w-])", "Strategy"),
)


def window_words(text: str) -> str:
    """`text` with each flag the window has a control for named as that control, and each flag it has none for said otherwise."""
    for said, instead in PHRASES:
        text = text.replace(said, instead)
    for flag, control in FLAGS:
        text = re.sub(flag, control, text)
    return text
