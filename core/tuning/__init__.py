"""Settings that make a model fast: sweeps, the largest batch that fits, autotune."""
