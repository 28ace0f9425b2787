"""The plots widget the plotting tests draw into: shown at 1000x600."""

from __future__ import annotations

import pytest

from gui.plotting.plots import PlotsWidget


@pytest.fixture
def plots(qtbot) -> PlotsWidget:
    widget = PlotsWidget()
    qtbot.addWidget(widget)
    widget.resize(1000, 600)
    widget.show()
    return widget
