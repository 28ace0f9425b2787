"""Why a run is as fast as it is: measured device ceilings, a verdict with its evidence, and the probes that feed it.

`verdict` is pure (measurements in, verdict out); `evidence` turns runs of one
job into measurements; `probes` runs the short extra runs and timings a single
run needs; `ceilings` keeps the measured ceilings beside the history (and the
ones this process knows); `run_verdict` gives every completed run its verdict
(the CLI's `run` and the window); `readout` says verdicts and ceilings in words.
"""
