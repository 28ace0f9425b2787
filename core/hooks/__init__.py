"""Hooks a run can carry: TensorBoard event files and a profiler capture."""
