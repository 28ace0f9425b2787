"""Valid but questionable runs that only the data and the step count reveal, in words the user can act on.

`RunConfig.warnings` says what the settings alone imply (float16 on a CPU);
these need the data set's size or the run's number of steps, known once the
engine has loaded the data.
"""

from __future__ import annotations

import os

from core.config import RunConfig
from core.formatting import format_value
from core.workloads.data import DATASETS


def batch_warning(config: RunConfig, examples: int | None) -> str | None:
    """A batch larger than a real data set repeats its examples inside every batch; synthetic data is exempt.

    Synthetic data only measures the device, so repeats there change nothing;
    `examples` None (a user's build_dataset()) is a size not known in advance.
    """
    if config.dataset == "synthetic" or examples is None or config.batch_size <= examples:
        return None
    batch, size = format_value(config.batch_size, "count"), format_value(examples, "count")
    repeats = config.batch_size / examples
    return (
        f"The batch ({batch} examples) is larger than the {_data_title(config.dataset)} data set ({size} examples): "
        f"each batch holds every example about {repeats:.{1 if repeats < 10 else 0}f} times, so the loss says little "
        f"about learning. The speed figures stay valid; to train on the data, use a batch of at most {size}."
    )


def call_size(steps_per_call: int, total_steps: int) -> tuple[int, str | None]:
    """The steps per call to use, and why when it differs from `steps_per_call` or leaves no steady state.

    The first call is warm-up (tracing, compilation). A call as long as the
    whole run would make every step warm-up and leave no step-time figures at
    all, so such a call is halved to the run's length: the first half warms
    up, the second is measured. The result says so, and the run records the
    call size it really used.
    """
    if total_steps < 2:
        return steps_per_call, (
            "A 1-step run is all warm-up (tracing and compilation), so it has no steady-state figures "
            "(median, p95, samples/s): run 2 or more steps."
        )
    if steps_per_call < total_steps:
        return steps_per_call, None
    used = total_steps // 2
    return used, (
        f"Steps per call lowered from {steps_per_call} to {used}: with {steps_per_call} steps per call the first call "
        f"would cover all {total_steps} steps, all of them warm-up, and the run would have no steady-state figures. "
        f"To measure {steps_per_call} steps per call, run {2 * steps_per_call} or more steps."
    )


def _data_title(dataset: str) -> str:
    return DATASETS[dataset].title if dataset in DATASETS else os.path.basename(dataset)
