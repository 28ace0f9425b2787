"""Device Lab's performance benchmarks: run them with `python benchmarks/run.py` (see benchmarks/RESULTS.md)."""
