"""The compiled training function, and freeing what tracing it left in TensorFlow's global state.

Why a run's traced functions outlived it (~3.5 MB per MLP run, never given
back): Keras's optimizer sums gradients across replicas with
`ReplicaContext.all_reduce`, under every strategy, and in graph mode
`all_reduce` is a `tf.custom_gradient`. Each traced call registers its
gradient function under a fresh name ("CustomGradient-N") in TensorFlow's
process-wide gradient registry, and nothing ever removes it
(tensorflow/tensorflow#97697, #27492). That function's closure holds tensors
of the traced graph, so the `train_steps` FuncGraph, its while-loop body and
condition, and their function definitions in the eager context all stayed
alive. `release` reads the names the traced graph uses (each op's
`_gradient_op_type`, nested functions included) and drops exactly those
entries: the gradients were taken while tracing, so nothing looks them up again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

GRADIENT_OP_TYPE = "_gradient_op_type"

logger = logging.getLogger(__name__)


class TrainSteps:
    """`train_steps(iterator, n)` runs n steps and returns their losses; `release` frees its traces."""

    def __init__(self, function: Callable[..., Any]):
        import tensorflow as tf

        self._function = tf.function(function)
        self._traced = False

    def __call__(self, iterator: Any, n: int) -> Any:
        import tensorflow as tf

        losses = self._function(iterator, tf.constant(n, tf.int32))
        self._traced = True
        return losses

    def release(self, iterator: Any) -> int:
        """Drop the gradient functions its tracing registered; returns how many. Call once the run is over.

        Only after a call succeeded: then the signature is traced, and looking
        it up again is a cache hit. A trace that failed is not retried (it
        could register more), so what it registered stays.
        """
        import tensorflow as tf

        if not self._traced:
            return 0
        try:
            graph = self._function.get_concrete_function(iterator, tf.constant(1, tf.int32)).graph
            return forget_custom_gradients(custom_gradient_names(graph.as_graph_def()))
        except Exception:  # freeing memory must never turn a finished run into a failed one
            logger.warning("Could not free the traced training function's gradient registrations.", exc_info=True)
            return 0


def custom_gradient_names(graph_def: Any) -> set[str]:
    """The custom-gradient names a GraphDef's ops use, in its library's functions too."""
    nodes = [*graph_def.node, *(node for function in graph_def.library.function for node in function.node_def)]
    return {node.attr[GRADIENT_OP_TYPE].s.decode() for node in nodes if GRADIENT_OP_TYPE in node.attr}


def forget_custom_gradients(names: Iterable[str]) -> int:
    """Remove these names from TensorFlow's gradient registry; returns how many were there.

    The registry has no public way to unregister, so this reaches into its dict
    and does nothing if a later TensorFlow stores it differently.
    """
    from tensorflow.python.framework import ops

    entries = getattr(getattr(ops, "gradient_registry", None), "_registry", None)
    if not isinstance(entries, dict):
        return 0
    return sum(entries.pop(name, None) is not None for name in names)
