"""FLOPs of one training step, counted from the model's own traced graph.

Every op of the traced forward pass is counted with TensorFlow's registered
per-op FLOP counts (MatMul, BatchMatMul, Conv2D/3D, depthwise conv, BiasAdd,
pooling, element-wise arithmetic; a multiply-add is 2 FLOPs), the ones TF
leaves out are added from their shapes (Einsum, used by Keras 3 attention;
transposed convolutions; the fused cuDNN LSTM/GRU Keras uses on a GPU), and
the graph's functions are followed: a loop's
body (a recurrent layer: LSTM, GRU, SimpleRNN, each direction of a
Bidirectional) counts once per iteration, its trip count read from the
loop's condition. So Dense, Conv 1D/2D/3D (depthwise, separable,
transposed), recurrent layers, MultiHeadAttention, Embedding (a lookup: no
arithmetic) and normalisation layers are counted from what they really do,
with no hand-kept list of layer formulas.

Convention: training FLOPs = 3 x forward FLOPs (`TRAINING_TO_FORWARD`).
Ops whose arithmetic cannot be counted (a loop with no static trip count,
XLA ops, any other matrix op TF has no count for) leave the count partial: `FlopCount`
names them, the run says so in a warning and in `flops_uncounted`, and "% of
peak" is then a lower bound.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from core.workloads.model_signature import dict_keys

TRAINING_TO_FORWARD = 3
"""Training FLOPs = 3 x forward: the backward pass costs about twice the forward
(gradients with respect to activations and to weights), the usual "model FLOPs"
convention (PaLM, arXiv:2204.02311, appendix B). The optimizer update is left
out: a few FLOPs per parameter, small beside batch x parameters."""

METHOD = "TensorFlow's per-op counts over the forward graph, loops x their trip count, x3 for forward + backward"

HEAVY_OP = re.compile(r"MatMul|Conv|Einsum|Cudnn|RNN|LSTM|GRU|Dot|Xla", re.IGNORECASE)
"""Op types that do a model's arithmetic: one of these with no count makes the count partial."""
LOOP_OPS = frozenset({"While", "StatelessWhile"})
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
BRANCH_OPS = frozenset({"If", "StatelessIf"})
TRANSPOSED_CONV_OPS = frozenset({"Conv2DBackpropInput", "Conv3DBackpropInput", "Conv3DBackpropInputV2"})
CUDNN_RNN_OPS = frozenset({"CudnnRNN", "CudnnRNNV2", "CudnnRNNV3"})
CUDNN_GATES = {b"lstm": 4, b"gru": 3, b"rnn_tanh": 1, b"rnn_relu": 1}
"""Matrix products per timestep of each cuDNN recurrent mode (Keras runs LSTM and GRU through CudnnRNNV3 on a GPU)."""


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one forward pass, and the ops (named by their layer) whose arithmetic is not in it."""

    flops: float
    uncounted: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        return bool(self.uncounted)

    def __add__(self, other: FlopCount) -> FlopCount:
        return FlopCount(self.flops + other.flops, tuple(dict.fromkeys((*self.uncounted, *other.uncounted))))

    def times(self, factor: float) -> FlopCount:
        return replace(self, flops=self.flops * factor)


def count_forward(model: Any, batch_size: int, input_shapes: Sequence[Sequence[int | None]] = ()) -> FlopCount:
    """FLOPs of one forward pass of `batch_size` examples, counted from the traced graph (see the module).

    `input_shapes` (per example, in `model.inputs` order) fill the model's open dimensions with the data's: a
    sequence model declared `(None,)` is counted at the length it trains on, not left uncounted.
    """
    import tensorflow as tf

    inputs = getattr(model, "inputs", None)
    if not inputs:
        raise ValueError("the model has no defined inputs: build it with keras.Input (Sequential or functional) first")
    given = list(input_shapes) if len(input_shapes) == len(inputs) else [()] * len(inputs)
    specs = [tf.TensorSpec((batch_size, *_filled(tuple(t.shape)[1:], shape)), t.dtype) for t, shape in zip(inputs, given, strict=True)]
    keys = dict_keys(model, "input", len(specs))

    def forward(*xs: Any) -> Any:
        fed = dict(zip(keys, xs, strict=True)) if keys else xs[0] if len(xs) == 1 else list(xs)
        return model(fed, training=False)

    traced = tf.function(forward)
    graph = traced.get_concrete_function(*specs).graph
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(logging.ERROR)  # TF's count functions log a deprecation notice about their own internals
    try:
        return _graph_count(graph, graph)
    finally:
        logger.setLevel(level)


def _filled(declared: tuple[int | None, ...], data: Sequence[int | None]) -> tuple[int | None, ...]:
    """The model's declared per-example shape with its open dimensions taken from the data's, where it gives them."""
    if len(data) != len(declared):
        return declared
    return tuple(size if size is not None else data[i] for i, size in enumerate(declared))


def forward_flops(model: Any, batch_size: int) -> float:
    """FLOPs of one forward pass of `batch_size` examples (what `count_forward` counted)."""
    return count_forward(model, batch_size).flops


def training_flops_per_step(model: Any, batch_size: int) -> tuple[float, str]:
    """(FLOPs of one training step on a global batch of `batch_size`, how they were counted)."""
    return TRAINING_TO_FORWARD * forward_flops(model, batch_size), METHOD


def _graph_count(graph: Any, outer: Any) -> FlopCount:
    """Every op of `graph`; `outer` is the traced function's graph, which holds the library of loop and call bodies."""
    total = FlopCount(0.0)
    for op in graph.get_operations():
        total = total + _op_count(op, graph, outer)
    return total


def _op_count(op: Any, graph: Any, outer: Any) -> FlopCount:
    if op.type in LOOP_OPS:
        return _loop_count(op, outer)
    if op.type in CALL_OPS:
        return _graph_count(_function_graph(outer, op.get_attr("f").name), outer)
    if op.type in BRANCH_OPS:
        branches = [_graph_count(_function_graph(outer, op.get_attr(key).name), outer) for key in ("then_branch", "else_branch")]
        return max(branches, key=lambda count: count.flops)
    if op.type == "Einsum":
        return FlopCount(_einsum_flops(op))
    if op.type in TRANSPOSED_CONV_OPS:
        return FlopCount(_transposed_conv_flops(op))
    if op.type in CUDNN_RNN_OPS:
        return _cudnn_rnn_count(op)
    flops = _registered_flops(graph, op)
    if flops is None and HEAVY_OP.search(op.type):
        return FlopCount(0.0, (f"{_layer_of(op)} ({op.type}: no FLOP count)",))
    return FlopCount(float(flops or 0))


def _registered_flops(graph: Any, op: Any) -> int | None:
    """TensorFlow's registered count for the op (what its v1 profiler sums), None for an op type with none."""
    from tensorflow.python.framework import ops as tf_ops

    try:
        return tf_ops.get_stats_for_node_def(graph, op.node_def, "flops").value
    except ValueError:  # a registered count that could not read the shapes
        return None


def _loop_count(op: Any, outer: Any) -> FlopCount:
    """A loop's body x its trip count; uncounted (named) when the trip count is not static."""
    body = _graph_count(_function_graph(outer, op.get_attr("body").name), outer)
    trips = _trip_count(op, _function_graph(outer, op.get_attr("cond").name))
    if trips is None:
        return FlopCount(0.0, (*body.uncounted, f"{_layer_of(op)} (a loop with no static trip count)"))
    return body.times(trips)


def _trip_count(op: Any, cond: Any) -> int | None:
    """Iterations of a `while i < N` loop with N a constant and i's start static (Keras' recurrent loops); else None."""
    import tensorflow as tf

    positions = {tensor.name: index for index, tensor in enumerate(cond.inputs)}
    found = []
    for compare in cond.get_operations():
        if compare.type != "Less" or compare.inputs[1].op.type != "Const" or compare.inputs[0].name not in positions:
            continue
        start = tf.get_static_value(op.inputs[positions[compare.inputs[0].name]])
        bound = tf.get_static_value(compare.inputs[1])
        if start is not None and bound is not None and start.ndim == 0:
            found.append(max(0, int(bound) - int(start)))
    return min(found) if found else None


def _function_graph(outer: Any, name: str) -> Any:
    return outer._get_function(name).graph


def _layer_of(op: Any) -> str:
    """The name scope of the op, the Keras layer that made it ("functional/lstm")."""
    scope = op.name.rsplit("/", 1)[0]
    return re.sub(r"/while(/.*)?$", "", scope)


def _transposed_conv_flops(op: Any) -> float:
    """2 x input positions x kernel x in channels x out channels: each input value is scattered once over the kernel.

    TF registers a count only for the 2-D op, over output positions (the zero
    padding included); this counts what a transposed convolution adds up.
    Inputs: (output size, filter [*kernel, out channels, in channels], input).
    """
    kernel = op.inputs[1].shape.as_list()
    values = op.inputs[2].shape.num_elements()
    if values is None or any(size is None for size in kernel):
        return 0.0
    return float(2 * values * math.prod(kernel[:-1]))


def _cudnn_rnn_count(op: Any) -> FlopCount:
    """A fused cuDNN recurrent layer: per timestep and direction, gates x 2 x batch x (inputs + units) x units.

    Inputs: x [time, batch, features] (or batch-major), h [layers x directions,
    batch, units]; layers after the first read the previous layer's outputs.
    """
    gates = CUDNN_GATES.get(op.get_attr("rnn_mode"))
    x, h = op.inputs[0].shape.as_list(), op.inputs[1].shape.as_list()
    if gates is None or None in x or None in h:
        return FlopCount(0.0, (f"{_layer_of(op)} ({op.type}: shapes or mode not static)",))
    time_major = op.get_attr("time_major") if op.type == "CudnnRNNV3" else True
    steps, batch, features = x if time_major else (x[1], x[0], x[2])
    directions = 2 if op.get_attr("direction") == b"bidirectional" else 1
    layers, units = h[0] // directions, h[2]
    widths = [features] + [directions * units] * (layers - 1)
    return FlopCount(float(sum(directions * steps * gates * 2 * batch * (width + units) * units for width in widths)))


def _einsum_flops(op: Any) -> float:
    """2 x output elements x size of the summed-over indices (a multiply-add is 2 FLOPs)."""
    equation = op.get_attr("equation").decode().replace(" ", "")
    in_part, _, out_part = equation.partition("->")
    sizes: dict[str, int] = {}
    ellipsis_size = 1
    for subscripts, tensor in zip(in_part.split(","), op.inputs, strict=True):
        dims = tensor.shape.as_list()
        if any(d is None for d in dims):
            return 0.0
        letters = subscripts.replace("...", "")
        if "..." in subscripts:
            ellipsis_size = max(ellipsis_size, math.prod(dims[: len(dims) - len(letters)]))
            dims = dims[len(dims) - len(letters) :]
        for letter, size in zip(letters, dims, strict=True):
            sizes[letter] = max(size, sizes.get(letter, 1))
    summed = math.prod(size for letter, size in sizes.items() if letter not in out_part)
    if "..." in in_part and "..." not in out_part:
        summed *= ellipsis_size
    output = op.outputs[0].shape.num_elements() or 0
    if len(op.inputs) == 1:
        return float(output * (summed - 1))
    return float(2 * output * summed)
