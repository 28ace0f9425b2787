"""The FLOPs (and bytes) XLA's cost analysis leaves out of a JAX step's loops: every trip of a loop after the one it counts.

XLA's cost analysis counts a `while` body once, whatever its trip count, so a
recurrent layer (LSTM, GRU, each direction of a Bidirectional, ConvLSTM2D:
Keras's JAX backend runs them as `lax.scan`) read 30-55x low. The trip
counts are read from the step's jaxpr, where every `scan` states its length,
not from the compiled HLO (XLA marks a loop's `known_trip_count` only when it
compiles, a second compilation of the step): each scan adds its body's FLOPs,
counted by XLA's cost analysis of the body lowered alone (the same convention
as the rest of the step), once per trip XLA skipped; its bytes accessed likewise
(what `core.projection.step_costs` adds to the step's bytes). JAX lowers a scan of
`length` with `unroll` u to a while loop of length // u trips, each running
the body u times, and the remainder unrolled after it, so XLA counts u + the
remainder runs and the loop's other (length // u - 1) x u are added. A scan
inside a scan's body is counted within that body, so nested loops multiply.
A conditional counts as its costliest branch (as XLA's cost analysis counts
it). A `lax.while_loop` has no trip count before it runs: it stays counted
once and is named, so the count says it is partial, as is a loop whose body
XLA cannot lower alone, or one that a lowering rule adds out of the jaxpr's
sight (the lowered text holds more while loops than the jaxpr explains).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoopTrips:
    """The FLOPs (and bytes accessed) of the loop trips XLA's count of a jaxpr skips, the loops whose trips stay uncounted, and
    the while loops its lowering holds (scans that stay loops, while loops)."""

    flops: float = 0.0
    uncounted: int = 0
    whiles: int = 0
    bytes: float = 0.0

    def __add__(self, other: LoopTrips) -> LoopTrips:
        return LoopTrips(self.flops + other.flops, self.uncounted + other.uncounted, self.whiles + other.whiles, self.bytes + other.bytes)


def xla_cost_analysis(lowered: Any) -> dict[str, Any]:
    """XLA's cost analysis of a lowered function ("flops", "bytes accessed", ...), each while body counted once."""
    analysis = lowered.cost_analysis()
    if isinstance(analysis, (list, tuple)):  # older JAX: one analysis per computation
        analysis = analysis[0] if analysis else {}
    return dict(analysis or {})


def xla_flops(lowered: Any) -> float:
    """XLA's cost analysis of a lowered function: its FLOPs, each while body counted once."""
    return float(xla_cost_analysis(lowered).get("flops", 0.0))


def skipped_trips(jaxpr: Any) -> LoopTrips:
    """What XLA's count of the function traced as `jaxpr` (a Jaxpr or ClosedJaxpr) leaves out of its loops (see the module)."""
    total = LoopTrips()
    for eqn in _eqns(jaxpr):
        name = eqn.primitive.name
        if name == "scan":
            total += _scan(eqn.params["jaxpr"], int(eqn.params["length"]), int(eqn.params["unroll"]))
        elif name == "cond":
            branches = [skipped_trips(branch) for branch in eqn.params["branches"]]
            costliest = max(branches, key=lambda branch: branch.flops)
            total += LoopTrips(costliest.flops, sum(b.uncounted for b in branches), sum(b.whiles for b in branches), costliest.bytes)
        else:
            if name == "while":
                total += LoopTrips(uncounted=1, whiles=1)
            for inner in _inner_jaxprs(eqn.params):
                total += skipped_trips(inner)
    return total


def _scan(body: Any, length: int, unroll: int) -> LoopTrips:
    """A scan's skipped trips: its body's FLOPs and bytes x the runs XLA does not count, and each of its `length` runs' own
    skipped trips."""
    inner = skipped_trips(body)
    own = LoopTrips(inner.flops * length, inner.uncounted, inner.whiles, inner.bytes * length)
    trips, remainder = divmod(length, unroll) if unroll > 0 else (0, length)
    if trips == 0 or (unroll != 1 and trips == 1 and remainder == 0):  # fully unrolled: no loop, every run counted
        return own
    skipped = (trips - 1) * unroll
    if skipped == 0:
        return own + LoopTrips(whiles=1)
    try:
        body_flops, body_bytes = _lowered_alone(body)
    except Exception:  # a body XLA cannot lower on its own: this loop's other trips stay uncounted
        return own + LoopTrips(uncounted=1, whiles=1)
    return own + LoopTrips(skipped * body_flops, whiles=1, bytes=skipped * body_bytes)


def _lowered_alone(body: Any) -> tuple[float, float]:
    """XLA's (FLOPs, bytes accessed) of one run of a scan's body (a ClosedJaxpr), lowered on its own for its input shapes."""
    import jax
    from jax.extend.core import jaxpr_as_fun

    shapes = [jax.ShapeDtypeStruct(aval.shape, aval.dtype) for aval in body.in_avals]
    analysis = xla_cost_analysis(jax.jit(jaxpr_as_fun(body)).lower(*shapes))
    return float(analysis.get("flops", 0.0)), float(analysis.get("bytes accessed", 0.0))


def _eqns(jaxpr: Any) -> list[Any]:
    return list(getattr(jaxpr, "jaxpr", jaxpr).eqns)


def _inner_jaxprs(params: dict[str, Any]) -> list[Any]:
    """The jaxprs an equation calls (a jit, a custom derivative's function, a checkpoint, a while loop's body and condition)."""
    values = [item for value in params.values() for item in (value if isinstance(value, (tuple, list)) else (value,))]
    return [value for value in values if hasattr(getattr(value, "jaxpr", value), "eqns")]
