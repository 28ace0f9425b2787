"""What another device would give: a model's step time and samples/s projected on an accelerator it need not run on.

`catalogue`: the accelerators (datasheet peaks per precision, memory, bandwidth, measured ceilings),
each with its source. `step_costs`: the step's FLOPs, bytes, kernels and memory, counted by XLA in a
child process on this machine's CPU. `model`: the step-time model per backend, its least-squares
fit and its range. `calibration`: the measured GPU points (benchmarks/records/), their cached step
costs and the constants fitted from them. `project`: one projection as a JSON-ready document, per
batch a low-high range, the regime and why, the memory fit, with its points and caveats.
`validation`: leave-one-out over the points (the `projection_error` benchmark). Qt-free; a
projection is never a measurement and is never stored in the history.
"""
