"""The GUI-wide style: status colours (the same in light and dark themes) and the invalid-field style.

Every view says how something ended or what to correct with these, so a failed
run reads the same in the run form, the tables and the dialogs.
"""

from __future__ import annotations

FAILED_COLOR = "#b00020"  # a failed run, probe or measurement
ERROR_COLOR = "#c62828"  # input to correct, and problems said beside it
WARNING_COLOR = "#8a6d00"  # a stopped or interrupted run, a warning
SUCCESS_COLOR = "#1b5e20"  # a completed run, a check that passed
INVALID_FIELD_STYLE = (
    f"QLineEdit {{ border: 1px solid {ERROR_COLOR}; background: #fff3f3; color: #1a1a1a; }}"  # readable in dark themes too
)
