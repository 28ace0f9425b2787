"""FLOPs of one training step of a backend job, as XLA counts the train step Keras compiles (JAX only).

Keras's JAX trainer jit-compiles `model.train_step(state, data)` (forward,
loss, backward, optimizer update). The same function is lowered here for one
batch's shapes, on abstract values (nothing computed, nothing allocated, no
second compilation), and XLA's own cost analysis of that step gives its FLOPs.
Under data parallelism the lowered step is the whole global batch's, before it
is split among the devices: the same global figure the TensorFlow counter gives.

What XLA counts is what the step computes, not the TensorFlow counter's
3 x forward convention: no gradient for the input data (nothing needs it),
convolutions over their valid positions only (no arithmetic on the padding),
the optimizer update included. For the sample MLP and CNN at batch 64 it is
0.92 and 0.91 times the TensorFlow count. XLA counts a loop's body once, so
each scan's other trips (a recurrent layer's timesteps) are added from the
step's jaxpr (`core.backends.loop_flops`); a loop with no trip count before it
runs leaves the count partial, and says so. PyTorch has no such counter here:
its runs say so and carry no count.

The step is lowered for the host's CPU whatever device the run trains on: XLA's
cost analysis of a lowered step is the CPU client's (the GPU's PJRT plugin has
none: `Lowered.cost_analysis()` returns nothing there, as seen on an H200 with
JAX 0.11, jax-ml/jax#22713), and the count is of the HLO before any device's
fusion, the same on every platform.
"""

from __future__ import annotations

from typing import Any

from core.backends.loop_flops import skipped_trips, xla_flops

METHOD = (
    "XLA's cost analysis of the JAX train step (forward, backward without the input's gradient, loss, optimizer update), "
    "each loop's body x its trip count"
)
WHILE_LOOPS = (
    "{count} while loop(s) whose trips are not counted (a lax.while_loop: no trip count before it runs): "
    "XLA's cost analysis counts each loop body once, not per trip"
)
NOT_JAX = "not counted: only a JAX run's train step is counted (XLA's cost analysis); the {backend} backend has no FLOP counter here"


def step_flops(model: Any, x: Any, y: Any, batch_size: int) -> dict[str, Any]:
    """{"flops_per_step": FLOPs of one train step on a global batch of `batch_size` or None, "method": how, or why not,
    "uncounted": what the count leaves out (while loops with no known trip count, whose bodies XLA counts once: then the count
    is a lower bound)}.

    `model` is compiled (its optimizer built or not); `x` and `y` are the job's
    arrays, read for their shapes and dtypes only. Never raises: counting is
    instrumentation, never the reason a run fails.
    """
    import keras

    backend = keras.config.backend()
    if backend != "jax":
        return {"flops_per_step": None, "method": NOT_JAX.format(backend=backend)}
    try:
        flops, loops = _jax_step_flops(model, x, y, batch_size)
    except Exception as exc:  # a model Keras trains but XLA cannot lower alone: the run goes on without a count
        return {"flops_per_step": None, "method": f"not counted: {type(exc).__name__}: {exc}"}
    if loops:
        uncounted = WHILE_LOOPS.format(count=loops)
        return {"flops_per_step": flops, "method": f"{METHOD}; partial: {uncounted}", "uncounted": [uncounted]}
    return {"flops_per_step": flops, "method": METHOD}


def traced_train_step(model: Any, x: Any, y: Any, batch_size: int, build: bool = True, donate: bool = False) -> Any:
    """Keras's JAX `model.train_step` traced for one batch of `batch_size` on abstract values (nothing computed or allocated).

    `build` does first what fit does first (the loss and metrics built, the optimizer's slots made), so the state is
    complete; `donate` gives the state to the step, as Keras's trainer does (its memory then aliases the outputs).
    """
    import jax

    def batch_of(array: Any) -> Any:
        return jax.ShapeDtypeStruct((batch_size, *array.shape[1:]), jax.dtypes.canonicalize_dtype(array.dtype))

    data = jax.tree.map(batch_of, (x, y))
    if build:
        model._symbolic_build(data_batch=data)
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True, optimizer_variables=True, metrics_variables=True)
    abstract_state = jax.tree.map(lambda value: jax.ShapeDtypeStruct(value.shape, value.dtype), state)
    return jax.jit(model.train_step, donate_argnums=0 if donate else ()).trace(abstract_state, data)


def _jax_step_flops(model: Any, x: Any, y: Any, batch_size: int) -> tuple[float, int]:
    """XLA's FLOPs of `model.train_step` lowered for one batch (the state and the batch as abstract values), each scan's
    body x its trip count, and the number of while loops whose trips stay uncounted (each body counted once)."""
    import jax

    traced = traced_train_step(model, x, y, batch_size)  # builds the model's state where the run keeps it
    with jax.default_device(jax.devices("cpu")[0]):  # the CPU client counts; a GPU's plugin does not (module docstring)
        lowered = traced.lower()
        flops = xla_flops(lowered)
        if flops <= 0:
            raise ValueError("XLA's cost analysis of the train step holds no FLOP count")
        trips = skipped_trips(traced.jaxpr)
    unseen = max(lowered.as_text().count("stablehlo.while") - trips.whiles, 0)  # loops a lowering rule added
    return flops + trips.flops, trips.uncounted + unseen
