"""Qt-free helpers for live views: step buffers, curve decimation, smoothing, rate limits."""
