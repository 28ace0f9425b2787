"""A run's traced step functions are freed with the run: no graph outlives it (the soak benchmark's leak)."""

import gc
import weakref

import pytest
from tensorflow.python.framework import ops
from tensorflow.python.framework.func_graph import FuncGraph

from core.config import RunConfig
from core.runner import run_training
from core.training.engine import custom_gradient_names, forget_custom_gradients
from core.training.hooks import RunHook


class GraphsOfTheRun(RunHook):
    """After the first call (traced by then), weak references to every FuncGraph that did not exist before the run."""

    def __init__(self) -> None:
        self.before = {id(o) for o in gc.get_objects() if isinstance(o, FuncGraph)}
        self.graphs: list[weakref.ref] = []
        self.names: list[str] = []

    def on_step_records(self, records) -> None:
        if not self.graphs:
            new = [o for o in gc.get_objects() if isinstance(o, FuncGraph) and id(o) not in self.before]
            self.graphs, self.names = [weakref.ref(g) for g in new], [g.name for g in new]


def _graphs_left_by(config: RunConfig) -> tuple[list[str], list[str], set[str]]:
    """Names of the graphs the run traced, of those still alive after it and a collection, and its gradients left registered."""
    registered_before = set(ops.gradient_registry.list())
    graphs = GraphsOfTheRun()
    result = run_training(config, hooks=[graphs])
    assert result.ok, result.message
    gc.collect()
    alive = [ref().name for ref in graphs.graphs if ref() is not None]
    return graphs.names, alive, set(ops.gradient_registry.list()) - registered_before


@pytest.mark.slow
def test_the_traced_train_steps_graphs_are_dead_after_the_run(two_cpus):
    traced, alive, registered = _graphs_left_by(RunConfig(model="mlp", steps=4, steps_per_call=2))
    assert "train_steps" in traced
    assert alive == [], f"graphs kept alive after the run: {alive}"
    assert registered == set(), "the run's custom gradients stayed in TensorFlow's registry"


@pytest.mark.slow
def test_mirrored_and_xla_runs_free_their_graphs_too(two_cpus):
    for config in (
        RunConfig(model="mlp", strategy="mirrored", devices=tuple(two_cpus), steps=4, steps_per_call=2),
        RunConfig(model="mlp", steps=3, xla=True, precision="bfloat16"),
    ):
        traced, alive, registered = _graphs_left_by(config)
        assert "train_steps" in traced and alive == [] and registered == set(), (config, alive, registered)


def test_custom_gradient_names_are_read_from_nested_functions_and_forgotten_exactly():
    import tensorflow as tf

    @tf.custom_gradient
    def doubled(x):
        return 2 * x, lambda dy: 2 * dy

    @tf.function
    def outer(x):
        def body(i, total):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = doubled(x)
            return i + 1, total + tape.gradient(y, x)

        return tf.while_loop(lambda i, _: i < 2, body, [0, tf.zeros_like(x)])[1]

    before = set(ops.gradient_registry.list())
    assert float(outer(tf.constant(1.0))) == 4.0
    added = set(ops.gradient_registry.list()) - before
    names = custom_gradient_names(outer.get_concrete_function(tf.constant(1.0)).graph.as_graph_def())
    assert added and names == added, "the names come from the while loop's body, a nested function"
    assert forget_custom_gradients([*names, "NoSuchGradient"]) == len(names)
    assert set(ops.gradient_registry.list()) == before
