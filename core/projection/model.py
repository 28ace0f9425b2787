"""The step-time model a projection uses: per backend, what a step costs on a device, its fit and its range.

JAX (and TensorFlow, whose compiled step runs the same way; no TensorFlow job has run on a GPU
here, so it borrows the JAX constants and says so) runs a step as one compiled call, and the app's
clock waits for each step's result before the next begins: the host's per-call work and the
device's add up:

    step = host_s / steps_per_call + epoch_s / batches_per_epoch
           + kernels x kernel_s + max(flops / (efficiency x ceiling), byte_share x bytes / bandwidth)
           + scattered x scatter_s

PyTorch through Keras runs eagerly: the host dispatches each layer's operations one by one while
the device works through them behind it, so the two overlap and the longer one is the step:

    step = max(host_s + per_layer_s x layers + epoch_s / batches_per_epoch,
               ops x kernel_s + max(flops / (efficiency x ceiling), byte_share x bytes / bandwidth))

`epoch_s` is what Keras's `fit` does once an epoch (the end-of-epoch state sync and metrics, which
wait for every call in flight, and a new epoch's iterator), shared by the epoch's batches: a
backend job's epoch is its data's whole batches (`core.backends.job_data.batches_per_epoch`), so
a batch near the data's size pays it every step (the H200's MLP on the digits: 1.1 ms a step at
batch 64, 28 batches an epoch; 3.6 ms at 4,096, one an epoch, for a device share of about 0.2 ms).
Keras's JAX fit on this CPU: 0.3-0.5 ms an epoch for the MLP, 0.5 for the CNN (a scratch fit of one
batch an epoch against 64, RESULTS.md). The TensorFlow engine's loop runs an endless data set: no epochs.

`scattered` is the elements the step's scatters go over (`core.projection.step_costs`: the
gradient of max pooling, of an embedding lookup). XLA's GPU emitter runs a select-and-scatter as
a kernel of its own, one thread per source element searching its window and adding into the
output with an atomic operation (`IrEmitterUnnested`'s select-and-scatter and scatter emitters,
`EmitAtomicOperationForNestedComputation`), far from the fused kernels' rate: `scatter_s` is
their cost per element, fitted (about 22 ps on the H200 points: the CNN's two max poolings took
about 3.5 ms of its 10 ms step at batch 4,096, where its FLOPs and bytes account for 3 ms).
PyTorch, and TensorFlow without XLA, run their own pooling and embedding gradient kernels: no such
term (`core.projection.project.scatters_in_xla`).

`ceiling` is the device's matmul FLOP/s at the run's precision (measured, or its datasheet peak
scaled: `catalogue.ceiling`); `efficiency` is the share of it a training step reaches, fitted;
`byte_share` the share of XLA's pre-fusion byte count that reaches memory once the compiler fuses
the step's elementwise operations, the largest the points allow (they bound it from above only:
`fit`). For PyTorch these and `epoch_s` are the JAX fit's: its points are all host-bound and ran
16 batches an epoch or more, so they cannot tell them.
The regime is the term that weighs most: the host's fixed cost or the kernels' launches
(fixed-cost-bound), the FLOPs (compute-bound) or the bytes (memory-bound).

Fits are least squares on log(projected / measured) step times (`scipy.optimize.least_squares`),
so every point weighs the same whatever its speed. The range is the fit's 90% prediction
interval from its residuals (Student's t with n - k degrees of freedom for k fitted constants,
the residuals' standard error, x sqrt(1 + 1/n)), capped so that high / low is at most 2
(`MAX_RANGE`), the cap said.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

KERNEL_S = 3.0e-6
KERNEL_SOURCE = (
    "fixed, not fitted: 3.0 µs per asynchronous kernel launch, the empty-kernel launch throughput of about 334,000 calls/s "
    'measured by M. Boyer, University of Virginia, "CUDA Kernel Overhead" (the points cannot separate it from the efficiency: '
    "one of them is device-bound), per kernel the CPU compiler counts: about 1.7-2x the GPU compiler's count for the sample "
    "models, so about 5-6 µs per GPU kernel, its launch and a small kernel's own run"
)
LEVEL = 0.90
MAX_RANGE = 2.0
"""The widest range a projection shows: high / low."""
FIXED, COMPUTE, MEMORY = "fixed-cost-bound", "compute-bound", "memory-bound"
EAGER_BACKENDS = ("torch",)


@dataclass(frozen=True)
class Costs:
    """What one step of a model costs at one batch: the inputs of the step-time model."""

    batch: int
    flops: float
    bytes: float
    kernels: int
    ops: int
    layers: int
    batches_per_epoch: int | None
    """Steps an epoch of the job's loop shares its once-an-epoch work among; None: the loop has no epochs (TensorFlow's)."""
    scattered: int
    """Elements the step's scatters go over (`core.projection.step_costs.count_scattered`)."""


@dataclass(frozen=True)
class Target:
    """The device a step runs on, as the model sees it: matmul FLOP/s at the run's precision and memory bandwidth."""

    ceiling_flops: float
    bandwidth_bytes_s: float


@dataclass(frozen=True)
class Constants:
    """A backend's constants (`host_s`, `efficiency`, `byte_share`, `epoch_s`, `scatter_s`; `per_layer_s` for eager backends) and the fit's residuals."""

    backend: str
    host_s: float
    efficiency: float
    per_layer_s: float
    residuals: tuple[float, ...]
    points: tuple[str, ...]
    notes: tuple[str, ...] = ()
    byte_share: float = 1.0
    epoch_s: float = 0.0
    scatter_s: float = 0.0

    @property
    def fitted(self) -> int:
        """How many constants were fitted from the points: host, efficiency, byte share, epoch and (where a point scattered) scatter;
        eager backends host and per layer."""
        if self.backend in EAGER_BACKENDS:
            return 2
        return 5 if self.scatter_s else 4

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "host_s": self.host_s,
            "efficiency": self.efficiency,
            "byte_share": self.byte_share,
            "epoch_s": self.epoch_s,
            "scatter_s": self.scatter_s,
            "per_layer_s": self.per_layer_s if self.backend in EAGER_BACKENDS else None,
            "kernel_s": KERNEL_S,
            "residuals": list(self.residuals),
            "points": list(self.points),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class StepParts:
    """A projected step, term by term (seconds; `host_s` holds `epoch_s`, the step's share of the epoch's work), the regime and why."""

    step_s: float
    host_s: float
    epoch_s: float
    launch_s: float
    compute_s: float
    memory_s: float
    scatter_s: float
    regime: str
    why: str

    @property
    def device_s(self) -> float:
        return self.launch_s + max(self.compute_s, self.memory_s) + self.scatter_s


def step_parts(backend: str, costs: Costs, target: Target, constants: Constants, steps_per_call: int = 1) -> StepParts:
    """The projected step of `costs` on `target` with a backend's `constants` (see the module docstring)."""
    eager = backend in EAGER_BACKENDS
    step, host, epoch, launch, compute, memory, scatter = _terms(eager, costs, target, constants, steps_per_call)
    regime, why = _regime(eager, costs, host, (launch, compute, memory, scatter), constants, target, steps_per_call)
    return StepParts(step, host, epoch, launch, compute, memory, scatter, regime, why)


def step_time(backend: str, costs: Costs, target: Target, constants: Constants, steps_per_call: int = 1) -> float:
    """`step_parts(...).step_s` without the regime's words: what a fit evaluates a few hundred thousand times."""
    return _terms(backend in EAGER_BACKENDS, costs, target, constants, steps_per_call)[0]


def _terms(
    eager: bool, costs: Costs, target: Target, constants: Constants, steps_per_call: int
) -> tuple[float, float, float, float, float, float, float]:
    """(step, host, epoch, launch, compute, memory, scatter) seconds: the module docstring's formulas."""
    epoch = constants.epoch_s / costs.batches_per_epoch if costs.batches_per_epoch else 0.0
    host = (constants.host_s + constants.per_layer_s * costs.layers if eager else constants.host_s / max(1, steps_per_call)) + epoch
    launch = (costs.ops if eager else costs.kernels) * KERNEL_S
    compute = costs.flops / (constants.efficiency * target.ceiling_flops)
    memory = constants.byte_share * costs.bytes / target.bandwidth_bytes_s
    scatter = costs.scattered * constants.scatter_s
    device = launch + max(compute, memory) + scatter
    return (max(host, device) if eager else host + device), host, epoch, launch, compute, memory, scatter


def _regime(
    eager: bool,
    costs: Costs,
    host: float,
    terms: tuple[float, float, float, float],
    constants: Constants,
    target: Target,
    per_call: int,
) -> tuple[str, str]:
    launch, compute, memory, scatter = terms
    device = launch + max(compute, memory) + scatter
    launches = f"{costs.ops if eager else costs.kernels:,} {'operations' if eager else 'kernels'} x {KERNEL_S * 1e6:g} µs = {_ms(launch)}"
    work = (
        f"{_si(costs.flops, 'FLOP')} at {constants.efficiency:.2%} of {target.ceiling_flops / 1e12:,.0f} TFLOP/s = {_ms(compute)}; "
        f"{constants.byte_share:.0%} of {_si(costs.bytes, 'B')} at {target.bandwidth_bytes_s / 1e12:,.2f} TB/s = {_ms(memory)}"
    )
    if scatter:
        work += f"; {costs.scattered:,} elements scattered x {constants.scatter_s * 1e12:.3g} ps = {_ms(scatter)}"
    epoch = _epoch_text(costs, constants)
    if eager:
        host_text = (
            f"the host's {_ms(host)} per step ({_ms(constants.host_s)} + {costs.layers} layers x {_ms(constants.per_layer_s)}{epoch})"
        )
        if host >= device:
            return FIXED, f"{host_text} outlasts the device's {_ms(device)}, which works behind it ({launches}; {work})"
        device_text = f"the device's {_ms(device)} outlasts {host_text}, which it works behind"
    else:
        per_call_text = f"{_ms(constants.host_s)} per call" + (f" / {per_call} steps" if per_call > 1 else "")
        host_text = f"the host's {_ms(host)} per step ({per_call_text}{epoch})"
        if host >= max(terms):
            return FIXED, f"{host_text} weighs most, before the device's {_ms(device)} it waits for ({launches}; {work})"
        device_text = f"the device's {_ms(device)} follows {host_text}"
    if launch >= max(compute, memory, scatter):
        return FIXED, f"the kernel launches ({launches}) outlast their work ({work}); {device_text}"
    if scatter >= max(compute, memory):
        return MEMORY, f"the scatters' atomic writes outlast the FLOPs and the bytes on the device ({work}; {launches}); {device_text}"
    if compute >= memory:
        return COMPUTE, f"the FLOPs outlast the bytes on the device ({work}; {launches}); {device_text}"
    return MEMORY, f"the bytes outlast the FLOPs on the device ({work}; {launches}); {device_text}"


def _epoch_text(costs: Costs, constants: Constants) -> str:
    """ " + 2.5 ms per epoch / 16 steps": the step's share of the epoch's work, as the host's terms name it ("" without epochs)."""
    if not costs.batches_per_epoch or not constants.epoch_s:
        return ""
    steps = "1 step" if costs.batches_per_epoch == 1 else f"{costs.batches_per_epoch:,} steps"
    return f" + {_ms(constants.epoch_s)} per epoch / {steps}"


def _ms(seconds: float) -> str:
    return _three(seconds * 1e3) + " ms" if seconds >= 1e-4 else _three(seconds * 1e6) + " µs"


def _si(value: float, unit: str) -> str:
    """1.49e9, "FLOP" -> "1.49 GFLOP" (decimal prefixes, three significant digits)."""
    for prefix, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{_three(value / size)} {prefix}{unit}"
    return f"{_three(value)} {unit}"


def _three(value: float) -> str:
    """Three significant digits, never in exponent form."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


@dataclass(frozen=True)
class Observation:
    """A measured step: its costs, the device it ran on, its steps per call and its measured step time."""

    name: str
    costs: Costs
    target: Target
    steps_per_call: int
    step_s: float


def fit(
    backend: str,
    observations: Sequence[Observation],
    efficiency: float | None = None,
    byte_share: float | None = None,
    epoch_s: float | None = None,
) -> Constants:
    """The backend's constants fitted to `observations` (least squares on log step times).

    Compiled backends fit (host_s, efficiency, byte_share, epoch_s) and `scatter_s` where an
    observation scattered (no point can tell it otherwise: it stays 0); eager ones (host_s,
    per_layer_s) with `efficiency`, `byte_share` and `epoch_s` given (the compiled backend's: their
    points are host-bound and never ran an epoch of few batches).
    The points bound the byte share from above only (below some share the memory term never
    decides a step), so the fit takes the largest share whose fit is no worse than the best by
    more than one point's average share of the squared error (`_largest_byte_share`): the most
    memory time the points allow, not an arbitrary floor. When no observation's device term
    outweighs its host's, the device constants rest on small terms: the fit says so in `notes`.
    """
    from scipy.optimize import least_squares

    eager = backend in EAGER_BACKENDS
    scatters = not eager and any(observation.costs.scattered for observation in observations)
    names = tuple(observation.name for observation in observations)
    needed = 2 if eager else 5 if scatters else 4
    if len(observations) < needed:
        raise ValueError(f"fitting the {backend} constants needs {needed} points or more, got {len(observations)}")
    measured = [math.log(observation.step_s) for observation in observations]
    shortest = min(observation.step_s for observation in observations)

    def constants_of(params: Sequence[float]) -> Constants:
        host, second = math.exp(params[0]), math.exp(params[1])
        if eager:
            return Constants(backend, host, efficiency or 1.0, second, (), names, byte_share=byte_share or 1.0, epoch_s=epoch_s or 0.0)
        scatter = math.exp(params[4]) if scatters else 0.0
        return Constants(
            backend, host, second, 0.0, (), names, byte_share=math.exp(params[2]), epoch_s=math.exp(params[3]), scatter_s=scatter
        )

    def residuals(params: Sequence[float]) -> list[float]:
        constants = constants_of(params)
        return [
            math.log(step_time(backend, o.costs, o.target, constants, o.steps_per_call)) - log_step
            for o, log_step in zip(observations, measured, strict=True)
        ]

    if eager:
        starts = [[math.log(shortest), math.log(value)] for value in (1e-5, 1e-4, 1e-3)]
        bounds = ([math.log(1e-7), math.log(1e-9)], [0.0, 0.0])
    else:
        scatter_starts = (1e-12, 1e-10) if scatters else (None,)
        starts = [
            [math.log(shortest / 2), math.log(value), math.log(0.3), math.log(epoch)] + ([math.log(scatter)] if scatter else [])
            for value in (1e-3, 1e-2, 1e-1)
            for epoch in (1e-4, 1e-3)
            for scatter in scatter_starts
        ]
        low, high = [math.log(1e-7), math.log(1e-5), math.log(1e-3), math.log(1e-7)], [0.0] * 4
        bounds = (low + [math.log(1e-15)], high + [math.log(1e-6)]) if scatters else (low, high)
    best = min((least_squares(residuals, start, bounds=bounds) for start in starts), key=lambda result: result.cost)
    params = best.x if eager else _largest_byte_share(residuals, best, starts, bounds)
    constants = constants_of(params)
    notes: tuple[str, ...] = ()
    if not eager and params[2] > best.x[2] + 1e-9:
        notes += (
            f"the points bound the byte share from above only: {constants.byte_share:.0%}, the largest whose fit is within one "
            "point's share of the best fit's squared error, is taken (the most memory time they allow)",
        )
    if not eager and not any(_device_outweighs_host(backend, o, constants) for o in observations):
        notes += (
            "no point's device term outweighs its host's: the efficiency and byte share rest on small terms, "
            "so a device-bound projection leans on them more than the points can confirm",
        )
    return Constants(
        backend,
        constants.host_s,
        constants.efficiency,
        constants.per_layer_s,
        tuple(residuals(params)),
        names,
        notes,
        constants.byte_share,
        constants.epoch_s,
        constants.scatter_s,
    )


BYTE_SHARES = (1.0, 0.7, 0.5, 0.35, 0.25, 0.18, 0.13, 0.09, 0.06, 0.04, 0.03, 0.02, 0.014, 0.01)
"""The byte shares `_largest_byte_share` tries, largest first (steps of about 1.4x)."""


def _largest_byte_share(residuals: Callable[[Sequence[float]], list[float]], best: Any, starts: list[list[float]], bounds: Any) -> Any:
    """(log host, log efficiency, log share, log epoch[, log scatter]) at the largest of BYTE_SHARES whose fit costs at most the best's x (1 + 1/n)."""
    from scipy.optimize import least_squares

    free = [i for i in range(len(best.x)) if i != 2]  # the byte share, params[2], is held at each share tried
    allowed = best.cost * (1 + 1 / len(best.fun))
    for share in BYTE_SHARES:
        if math.log(share) <= best.x[2]:
            break
        fixed = math.log(share)

        def with_share(others: Sequence[float], at: float = fixed) -> list[float]:
            return residuals([*others[:2], at, *others[2:]])

        trial = min(
            (
                least_squares(with_share, [start[i] for i in free], bounds=([bounds[0][i] for i in free], [bounds[1][i] for i in free]))
                for start in starts
            ),
            key=lambda result: result.cost,
        )
        if trial.cost <= allowed:
            return [*trial.x[:2], fixed, *trial.x[2:]]
    return list(best.x)


def _device_outweighs_host(backend: str, observation: Observation, constants: Constants) -> bool:
    parts = step_parts(backend, observation.costs, observation.target, constants, observation.steps_per_call)
    return parts.device_s > parts.host_s


@dataclass(frozen=True)
class Spread:
    """The range a projection carries: log half-width, and what it rests on."""

    half_width: float
    interval_half_width: float | None
    capped: bool
    points: int
    degrees_of_freedom: int

    @property
    def factor(self) -> float:
        """high / mid = mid / low."""
        return math.exp(self.half_width)

    def text(self) -> str:
        if self.interval_half_width is None:
            return f"{self.points} points, {self.points - self.degrees_of_freedom} fitted constants: no residual left to size a range; the widest allowed ({MAX_RANGE:g}x) is shown"
        interval = f"{LEVEL:.0%} prediction interval from {self.points} points' residuals: x/÷ {math.exp(self.interval_half_width):.2f}"
        if self.capped:
            return f"{interval}, wider than {MAX_RANGE:g}x (high/low): capped at {MAX_RANGE:g}x, the true uncertainty is wider"
        return interval

    def to_dict(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "high_over_low": self.factor**2,
            "level": LEVEL,
            "interval_factor": None if self.interval_half_width is None else math.exp(self.interval_half_width),
            "capped": self.capped,
            "points": self.points,
            "degrees_of_freedom": self.degrees_of_freedom,
            "how": self.text(),
        }


def spread(residuals: Sequence[float], fitted: int = 2) -> Spread:
    """The prediction interval (`LEVEL`) of log residuals from a fit of `fitted` constants, capped at `MAX_RANGE`."""
    from scipy.special import stdtrit

    cap = math.log(MAX_RANGE) / 2
    n = len(residuals)
    df = n - fitted
    if df <= 0:
        return Spread(cap, None, True, n, max(0, df))
    standard_error = math.sqrt(sum(r * r for r in residuals) / df)
    half = float(stdtrit(df, 0.5 + LEVEL / 2)) * standard_error * math.sqrt(1 + 1 / n)
    return Spread(min(half, cap), half, half > cap, n, df)


def geometric_mean_error(ratios: Sequence[float]) -> float:
    """exp(mean |log ratio|) - 1: the typical factor a projection is off by, as a fraction (0.2: 20%)."""
    return math.exp(sum(abs(math.log(r)) for r in ratios) / len(ratios)) - 1
