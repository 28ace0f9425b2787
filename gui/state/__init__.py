"""The GUI's state without Qt: what the run form describes, with change events, and how the settings keep it."""
