"""The standard hooks a run carries besides its training: its conditions, TensorBoard event files, a profiler capture, GPU use."""
