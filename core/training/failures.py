"""Why a run failed, in words: the exceptions a run raises on purpose and `explain_failure` for any of them.

The run, compare and sweep commands and the window all turn an exception into
the same paragraph (what happened and the likely fix) through `explain_failure`.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence

from core.config import RunConfig
from core.errors import ExplainedError
from core.results import StepRecord
from core.workloads import model_data


class NonFiniteLoss(ExplainedError, RuntimeError):
    """The loss became NaN or infinite."""


def divergence_message(records: Sequence[StepRecord], config: RunConfig, notes: Sequence[str] = ()) -> str:
    """What to say when a step's loss is NaN or infinite (and what to change), or "" when every loss is finite.

    `notes` are the run's notes: where one says the data holds ids past an embedding table (`ids_past_tables`), that is
    the cause (on JAX such an id reads NaN), not a learning rate too high.
    """
    bad = next((record for record in records if not math.isfinite(record.loss)), None)
    if bad is None:
        return ""
    past = [note.removeprefix(model_data.IDS_PAST_TABLE) for note in notes if note.startswith(model_data.IDS_PAST_TABLE)]
    if past:
        return (
            f"The loss became {bad.loss} at step {bad.step} because the data holds ids past an embedding table: {'; '.join(past)}. "
            "An id past a table reads NaN on JAX (zeros on a GPU under TensorFlow), whatever the learning rate."
        )
    return f"The loss became {bad.loss} at step {bad.step}: training diverged. Lower the learning rate (now {config.learning_rate:g})" + (
        " or use bfloat16 instead of float16." if config.precision == "float16" else "."
    )


def explain_failure(exc: BaseException) -> str:
    """One readable paragraph: what happened and the likely fix."""
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
    if isinstance(exc, ExplainedError):
        return str(exc)
    tf = sys.modules.get("tensorflow")  # a TensorFlow error comes from a loaded TensorFlow: a JAX or PyTorch job's app may have none
    if tf is None or not hasattr(tf, "errors"):
        return f"{type(exc).__name__}: {first_line}"
    if isinstance(exc, tf.errors.ResourceExhaustedError):
        return f"Out of memory on the device: {first_line}. Lower the batch size, pick a smaller model, or use mixed precision."
    if isinstance(exc, tf.errors.InvalidArgumentError):
        node, detail = tensorflow_error_detail(str(exc))
        where = f" at {node}" if node else ""
        if _OUT_OF_RANGE.search(detail):
            return (
                f"TensorFlow rejected the computation{where}: {detail}. An integer input holds ids past what the layer it "
                "feeds takes: give data whose ids fit, or --vocab N with the range that layer takes."
            )
        return f"TensorFlow rejected the computation{where}: {detail or first_line}. Check the data fits the model's inputs."
    if isinstance(exc, tf.errors.UnavailableError):
        return f"A device or worker became unreachable: {first_line}."
    return f"{type(exc).__name__}: {first_line}"


_NODE = re.compile(r"Detected at node (\S+)")
_OUT_OF_RANGE = re.compile(r"= -?\d+ is not in \[")


def tensorflow_error_detail(text: str) -> tuple[str, str]:
    """(the node, what went wrong) of a TensorFlow error whose first line says only "Graph execution error:".

    Its text names the node ("Detected at node ..."), then the Python frames that built it, then the op's own
    message ("indices[0,0] = 42 is not in [0, 2)"); ("", the first line) when it has no such shape.
    """
    lines = [line.strip() for line in text.splitlines()]
    node_match = _NODE.search(text)
    node = node_match.group(1) if node_match else ""
    skipped = ("Graph execution error", "Detected at node", "File ", "[[")
    details = [line for line in lines if line and not line.startswith(skipped)]
    first = next((line for line in lines if line), "")
    return node, (details[-1] if node and details else first).rstrip(".:")
