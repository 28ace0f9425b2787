"""The kernels the ceilings are timed with, one set per engine: TensorFlow, JAX or PyTorch.

Each engine lists its local devices and builds two compiled calls on one of them:
a chain of square matrix products in a precision, and a chain of in-place
streaming adds. A call returns a scalar that the caller reads back as a float,
so the work is done when the clock stops. TensorFlow is the app's engine and
measures where it is installed; on a machine with JAX or PyTorch only (GPU
servers often have no TensorFlow) the same figures come from that engine, and
`method` says which.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from core.machine.peaks import STREAM_ELEMENTS


class Kernels(Protocol):
    """One engine's devices and timed calls."""

    method: str

    def devices(self) -> Iterator[tuple[Any, str, str, str]]:
        """(the engine's device, kind "CPU"/"GPU"/"TPU", short name "GPU:0", model name) for each local device."""
        ...

    def matmul_chain(self, device: Any, n: int, chain: int, precision: str) -> Callable[[], Any]:
        """A compiled call of `chain` chained n x n products in `precision`, returning a scalar."""
        ...

    def add_chain(self, device: Any, count: int) -> Callable[[], Any]:
        """A compiled call of `count` adds v += d over STREAM_ELEMENTS float32s, returning a scalar of v."""
        ...


def _cpu_name() -> str:
    from core.machine.cpu import cpu_info

    return cpu_info().get("Model", "CPU")


class TensorFlowKernels:
    method = "Measured in a child process with tf.function, each call ended by reading a scalar back"

    def __init__(self) -> None:
        import tensorflow as tf

        self.tf = tf
        for gpu in tf.config.list_physical_devices("GPU"):
            tf.config.experimental.set_memory_growth(gpu, True)  # take only what the measurement needs

    def devices(self) -> Iterator[tuple[Any, str, str, str]]:
        tf = self.tf
        for device in tf.config.list_physical_devices():
            short = device.name.split("physical_device:")[-1]
            kind = device.device_type
            if kind == "CPU":
                name = _cpu_name()
            else:
                name = str(try_details(tf, device).get("device_name", "") or short)
            yield short, kind, short, name

    def matmul_chain(self, device: Any, n: int, chain: int, precision: str) -> Callable[[], Any]:
        tf = self.tf
        dtype = getattr(tf, precision)
        with tf.device(device):
            a = tf.cast(tf.random.normal((n, n), seed=1), dtype)
            b = tf.cast(tf.random.normal((n, n), seed=2) / math.sqrt(n), dtype)  # entries near 1 in every precision

            @tf.function
            def products(x, y):
                for _ in range(chain):
                    x = tf.matmul(x, y)
                return tf.reduce_sum(tf.cast(x[0, :8], tf.float32))

            traced = products.get_concrete_function(a, b)  # tracing is never timed
        return lambda: traced(a, b)

    def add_chain(self, device: Any, count: int) -> Callable[[], Any]:
        tf = self.tf
        with tf.device(device):
            v = tf.Variable(tf.zeros([STREAM_ELEMENTS], tf.float32))
            d = tf.fill([STREAM_ELEMENTS], 1e-3)

            @tf.function
            def adds(delta):
                for _ in range(count):
                    v.assign_add(delta)
                return v[0]

        return lambda: adds(d)


def try_details(tf: Any, device: Any) -> dict[str, Any]:
    try:
        return dict(tf.config.experimental.get_device_details(device))
    except Exception:
        return {}


class JaxKernels:
    method = "Measured in a child process with jax.jit, each call ended by reading a scalar back"

    def __init__(self) -> None:
        import jax

        self.jax = jax

    def devices(self) -> Iterator[tuple[Any, str, str, str]]:
        kinds = {"cpu": "CPU", "gpu": "GPU", "tpu": "TPU"}
        for device in self.jax.local_devices():
            kind = kinds.get(device.platform, device.platform.upper())
            index = sum(1 for other in self.jax.local_devices() if other.platform == device.platform and other.id < device.id)
            name = _cpu_name() if kind == "CPU" else str(getattr(device, "device_kind", "") or device)
            yield device, kind, f"{kind}:{index}", name

    def matmul_chain(self, device: Any, n: int, chain: int, precision: str) -> Callable[[], Any]:
        jax = self.jax
        jnp = jax.numpy
        dtype = getattr(jnp, precision)
        keys = jax.random.split(jax.random.PRNGKey(1))
        a = jax.device_put(jax.random.normal(keys[0], (n, n)).astype(dtype), device)
        b = jax.device_put((jax.random.normal(keys[1], (n, n)) / math.sqrt(n)).astype(dtype), device)

        @jax.jit
        def products(x, y):
            for _ in range(chain):
                x = x @ y
            return jnp.sum(x[0, :8].astype(jnp.float32))

        compiled = products.lower(a, b).compile()  # compiling is never timed
        return lambda: compiled(a, b)

    def add_chain(self, device: Any, count: int) -> Callable[[], Any]:
        jax = self.jax
        jnp = jax.numpy
        state = {"v": jax.device_put(jnp.zeros([STREAM_ELEMENTS], jnp.float32), device)}
        d = jax.device_put(jnp.full([STREAM_ELEMENTS], 1e-3, jnp.float32), device)

        def adds(v, delta):
            v = jax.lax.fori_loop(0, count, lambda _, acc: acc + delta, v)  # a loop XLA cannot fold into one multiply
            return v, v[0]

        compiled = jax.jit(adds, donate_argnums=0).lower(state["v"], d).compile()

        def call() -> Any:
            state["v"], first = compiled(state["v"], d)
            return first

        return call


class TorchKernels:
    method = "Measured in a child process with PyTorch (eager kernels), each call ended by reading a scalar back"

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def devices(self) -> Iterator[tuple[Any, str, str, str]]:
        torch = self.torch
        yield torch.device("cpu"), "CPU", "CPU:0", _cpu_name()
        for index in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
            yield torch.device("cuda", index), "GPU", f"GPU:{index}", torch.cuda.get_device_name(index)

    def matmul_chain(self, device: Any, n: int, chain: int, precision: str) -> Callable[[], Any]:
        torch = self.torch
        dtype = getattr(torch, precision)
        generator = torch.Generator().manual_seed(1)
        a = torch.randn((n, n), generator=generator).to(device=device, dtype=dtype)
        b = (torch.randn((n, n), generator=generator) / math.sqrt(n)).to(device=device, dtype=dtype)

        @torch.no_grad()
        def products() -> Any:
            x = a
            for _ in range(chain):
                x = x @ b
            return x[0, :8].float().sum()

        return products

    def add_chain(self, device: Any, count: int) -> Callable[[], Any]:
        torch = self.torch
        v = torch.zeros(STREAM_ELEMENTS, dtype=torch.float32, device=device)
        d = torch.full((STREAM_ELEMENTS,), 1e-3, dtype=torch.float32, device=device)

        @torch.no_grad()
        def adds() -> Any:
            for _ in range(count):
                v.add_(d)
            return v[0]

        return adds


def kernels_for(engine: str) -> Kernels:
    """The kernels of `engine` ("tensorflow", "jax" or "torch"), its module imported."""
    kernels: dict[str, Callable[[], Kernels]] = {"tensorflow": TensorFlowKernels, "jax": JaxKernels, "torch": TorchKernels}
    return kernels[engine]()
