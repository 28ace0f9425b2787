"""The window's panels: devices, charts, compare, history, log."""
