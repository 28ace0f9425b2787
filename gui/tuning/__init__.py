"""The Sweep tab and the tuning widgets: settings swept side by side, the best applied to the run form."""
