"""The elements a step's scatters go over, counted from real JAX lowerings: max pooling's gradient and an embedding's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent(
    """
    import json
    import jax, jax.numpy as jnp
    from core.projection.step_costs import count_scattered

    def pooled(x):  # 2x2 max pooling: its gradient is a select-and-scatter over x
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()

    ids = jnp.arange(35, dtype=jnp.int32).reshape(5, 7) % 100

    def embedded(table):  # an embedding lookup: its gradient scatters 5 x 7 rows of 4 into the table
        return jnp.take(table, ids, axis=0).sum()

    def both(x, table):
        return pooled(x) + embedded(table)

    def text(function, *args):
        return jax.jit(jax.grad(function, argnums=tuple(range(len(args))))).lower(*args).as_text(dialect="hlo")

    x, table = jnp.zeros((2, 8, 8, 3)), jnp.zeros((100, 4))
    print(json.dumps({
        "pooled": count_scattered(text(pooled, x)),
        "embedded": count_scattered(text(embedded, table)),
        "both": count_scattered(text(both, x, table)),
        "dense": count_scattered(text(lambda w: jnp.tanh(x.reshape(2, -1) @ w).sum(), jnp.zeros((192, 5)))),
    }))
    """
)


def test_max_poolings_and_embeddings_gradients_are_counted_element_by_element_and_a_dense_step_scatters_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu")
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counted = json.loads(done.stdout.strip().splitlines()[-1])
    assert counted == {"pooled": 2 * 8 * 8 * 3, "embedded": 5 * 7 * 4, "both": 2 * 8 * 8 * 3 + 5 * 7 * 4, "dense": 0}
