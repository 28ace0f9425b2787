"""What one training step costs, counted by XLA on this machine's CPU: FLOPs, bytes, kernels, memory (no GPU needed).

`python -m core.projection.step_costs CONFIG_JSON BATCHES` (run by `measure_step_costs` as a
`core.child_process.Child`, time-limited, no GPU, KERAS_BACKEND=jax and TensorFlow refused as in a
backend job: `core.backends.child_job.prepare_environment`) builds and compiles the job's model as
`core.backends.fit_job` does (its precision policy, data, losses, optimizer) and lowers Keras's
JAX train step (`model.train_step`, the state donated as Keras's trainer donates it) on abstract
values for each batch (nothing computed, nothing allocated, as `core.backends.step_flops` does):

- flops, bytes: XLA's cost analysis of the lowered step ("flops", "bytes accessed"), each loop's skipped trips
  added (`core.backends.loop_flops`): the platform-independent HLO before fusion, so bytes count
  every op's operands and results;
- kernels: the compiled step's top-level instructions that launch work (fusions, custom calls,
  dots, convolutions, ...; parameters, constants, tuples, bitcasts and copies of the donated state
  left out): on a GPU each is at least one kernel launch. The CPU compiler fuses as the GPU one
  roughly does, not exactly: a proxy, the same for the calibration points and the projected model
  (XLA's GPU compiler, run for an H100 on a CPU without a GPU, emits 0.49-0.59 as many kernels for
  the sample models' steps: benchmarks/RESULTS.md, 2026-11-29); a loop (a recurrent layer's time
  steps) counts one, and `loop_kernels` the kernels its trips launch where XLA runs them trip by
  trip (on a GPU, Keras runs an LSTM that cuDNN takes, and on TensorFlow and PyTorch such a GRU,
  as cuDNN's kernels instead: the projection keeps the loop at one and says the difference,
  `core.projection.project.loop_caveats`);
- ops: the lowered step's instructions before fusion (what an eager backend dispatches one by one);
- scattered: the elements the step's scatters go over, before fusion (a select-and-scatter's operand, the
  gradient of max pooling; a scatter's updates, the gradient of an embedding lookup): XLA's GPU
  emitter adds them into the output with atomic operations, far slower per element than its fused kernels;
- memory: the compiled step's arguments (the state and the batch) + outputs not aliased to them +
  temporaries (activations, gradients, workspace), `compiled.memory_analysis()`; CPU's buffer
  assignment, which a GPU's differs from by its own fusion and library workspaces.

The model's layers (top level, inputs left out) and parameters come with them, the examples of
the job's data (whose whole batches make a backend job's epoch), and the memory estimate the app
shows before a run (weights, gradients, optimizer state).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from core.backends.available import is_installed
from core.backends.loop_flops import skipped_trips, xla_cost_analysis
from core.backends.step_flops import traced_train_step
from core.child_process import STOPPED, TIMEOUT, Child, reply, stage
from core.config import RunConfig, names_a_file
from core.errors import ExplainedError

DEFAULT_TIMEOUT_S = 300.0
WHAT = "counting the step's costs with XLA"
METHOD = (
    "XLA's cost analysis of Keras's JAX train step lowered for each batch on this machine's CPU (flops, bytes accessed); "
    "kernels: the compiled step's top-level instructions that launch work; scattered: the elements its scatters go over; "
    "memory: the compiled step's buffers"
)
FREE_OPS = frozenset(
    {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "copy", "copy-start", "copy-done", "after-all", "opt-barrier"}
)
"""Instructions that launch no kernel of their own (a copy of the donated state is the CPU compiler's, not the step's)."""
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\(")
_SHAPED = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*\w+\[([\d,]*)\]")
_SCATTER_OPERANDS = re.compile(r"\s(select-and-scatter|scatter)\(([^)]*)\)")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_WHILE_BODY = re.compile(r"\bbody=%?([\w.\-]+)")
_CALLED = re.compile(r"\bto_apply=%?([\w.\-]+)")
_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
_MAX_LOOP_DEPTH = 16


class CostsUnavailable(ExplainedError, RuntimeError):
    """The step's costs could not be counted (the model cannot be lowered, the child crashed or ran out of time)."""


JAX_MISSING = (
    "counting the step's costs needs JAX (XLA's cost analysis of the train step, on this machine's CPU; no GPU), and JAX is "
    "not installed here: pip install jax (Device Lab's install brings it: pip install -e . in the checkout), then project again"
)


def require_jax() -> None:
    """CostsUnavailable (JAX_MISSING) where JAX, whose XLA counts the step, is not installed here; checked before any child starts."""
    if not is_installed("jax"):
        raise CostsUnavailable(JAX_MISSING)


@dataclass(frozen=True)
class BatchCosts:
    """One train step's costs at one global batch."""

    batch: int
    flops: float
    bytes: float
    kernels: int
    ops: int
    memory_bytes: int
    temp_bytes: int
    argument_bytes: int
    scattered: int
    loop_kernels: int = 0
    """Kernels its loops' trips launch where XLA runs them trip by trip (a recurrent layer's time steps: `count_kernels`),
    beyond `kernels` (which counts each loop as one)."""
    unknown_trip_loops: int = 0
    """Loops whose trip count XLA does not know (a `lax.while_loop`): counted one trip."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchCosts:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class StepCosts:
    """The model's step costs at each batch counted, its layers and parameters, its data's examples, and how they were counted."""

    model: str
    layers: int
    params: int
    batches: tuple[BatchCosts, ...]
    examples: int
    memory_estimate: dict[str, Any] = field(default_factory=dict)
    method: str = METHOD
    versions: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def at(self, batch: int) -> BatchCosts:
        return next(costs for costs in self.batches if costs.batch == batch)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "layers": self.layers,
            "params": self.params,
            "batches": [costs.to_dict() for costs in self.batches],
            "examples": self.examples,
            "memory_estimate": self.memory_estimate,
            "method": self.method,
            "versions": self.versions,
            "notes": list(self.notes),
        }


def measure_step_costs(config: RunConfig, batches: list[int], timeout_s: float = DEFAULT_TIMEOUT_S) -> StepCosts:
    """The step costs of `config`'s model (its precision, optimizer, data) at each of `batches`, counted in a child process.

    The child runs on JAX whatever `config.backend` says (XLA's cost analysis is JAX's) and sees no
    GPU; a batch XLA cannot lower is left out with a note. Raises CostsUnavailable (JAX_MISSING first where JAX is not installed).
    """
    require_jax()
    args = [json.dumps(_counted_config(config).to_dict()), ",".join(str(batch) for batch in batches)]
    child = Child.start("core.projection.step_costs", args, what=WHAT, hide_gpus=True, limit_s=timeout_s, env={"JAX_PLATFORMS": "cpu"})
    end = child.wait()
    answer = child.result
    if end.how == TIMEOUT:
        raise CostsUnavailable(f"{WHAT} did not finish within {timeout_s:g} s (while {end.doing or 'starting'})")
    if end.how == STOPPED or not isinstance(answer, dict):
        raise CostsUnavailable(child.describe_end())
    if answer.get("error"):
        raise CostsUnavailable(f"{WHAT} failed: {answer['error']}")
    counted = tuple(BatchCosts.from_dict(item) for item in answer["batches"])
    if not counted:
        raise CostsUnavailable(f"{WHAT} counted no batch: {'; '.join(answer.get('notes', []))}")
    return StepCosts(
        model=answer["model"],
        layers=int(answer["layers"]),
        params=int(answer["params"]),
        batches=counted,
        examples=int(answer["examples"]),
        memory_estimate=answer.get("memory_estimate", {}),
        versions=answer.get("versions", {}),
        notes=tuple(answer.get("notes", [])),
    )


REUSED_KEPT = 16
"""How many jobs' counts `counted_step_costs` keeps in a process, the least recently used dropped first."""
_REUSED: OrderedDict[tuple[Any, ...], StepCosts] = OrderedDict()


def counted_step_costs(config: RunConfig, batches: list[int]) -> StepCosts:
    """`measure_step_costs`, reused within this process for the same job and batches: the window projecting one job on
    device after device counts its step once (seconds each time: a child process, JAX, XLA compiling every batch).

    The costs depend on the job, not on the device projected on. A sample model is reused as it is; a `.keras`/`.h5` file
    and `.npz` data while their content (sha256) is the same; a `.py` model, custom objects or a SavedModel folder are
    counted every time, since what they import or hold may have changed without their own bytes changing.
    """
    key = _reuse_key(config, batches)
    if key is None:
        return measure_step_costs(config, batches)
    if key not in _REUSED:
        _REUSED[key] = measure_step_costs(config, batches)
        while len(_REUSED) > REUSED_KEPT:
            _REUSED.popitem(last=False)
    _REUSED.move_to_end(key)
    return _REUSED[key]


def _reuse_key(config: RunConfig, batches: list[int]) -> tuple[Any, ...] | None:
    """The job as the child counts it, the batches and the content of its files; None where it may not be reused."""
    from core.workloads.model_file import file_sha256

    files = []
    if names_a_file(config.model):
        if config.custom_objects or not config.model.lower().endswith((".keras", ".h5", ".hdf5")):
            return None
        files.append(config.model)
    if config.dataset.lower().endswith(".npz"):
        files.append(config.dataset)
    try:
        contents = tuple((path, file_sha256(path)) for path in files)
    except OSError:
        return None  # the count says what is wrong with the file
    return (_counted_config(config), tuple(batches), contents)


def _counted_config(config: RunConfig) -> RunConfig:
    """The job the child counts: on JAX, one device, one step per call, whatever `config` trains with."""
    return config.with_changes(backend="jax", strategy="default", devices=(), steps_per_call=1)


@dataclass(frozen=True)
class Launches:
    """The kernels a compiled step launches: its ENTRY's (each loop one), those its loops' trips launch when XLA runs them trip by
    trip, and the loops whose trip count XLA does not know."""

    kernels: int
    loop_kernels: int = 0
    unknown_trip_loops: int = 0


def count_kernels(compiled_text: str) -> Launches:
    """The instructions of the compiled module's ENTRY computation that launch work (see FREE_OPS, a `while` loop or a `call`
    one), and the kernels its loops' trips launch: each body's, once per trip, nested loops multiplied, loops inside a call too.

    XLA's GPU runtime runs a loop whose trip count it knows (`known_trip_count` in the while's backend
    config: a scan's) as its body's kernels that many times; one whose count it does not know (a
    `lax.while_loop`) checks its condition on the host before each trip; its body is counted once and
    the loop in `unknown_trip_loops` (XLA's `WhileThunk::ExecuteOnStream`, xla/backends/gpu/runtime/while_thunk.cc).
    """
    computations = _computations(compiled_text)
    entry = next((name for name, (is_entry, _) in computations.items() if is_entry), "")
    kernels, looped, unknown = _launches(entry, computations, depth=0)
    return Launches(kernels, looped, unknown)


def _launches(name: str, computations: dict[str, tuple[bool, list[str]]], depth: int) -> tuple[int, int, int]:
    """(kernels, each loop one; kernels its loops' trips launch; loops of unknown trip count) of one computation."""
    kernels = looped = unknown = 0
    for line in computations.get(name, (False, []))[1]:
        match = _INSTRUCTION.match(line)
        if match is None or match.group(1) in FREE_OPS:
            continue
        kernels += 1
        if depth >= _MAX_LOOP_DEPTH:
            continue
        if match.group(1) == "call":  # the CPU compiler outlines small work, a loop among it, into a call (counted one, as before)
            called = _CALLED.search(line)
            _, inner_looped, inner_unknown = _launches(called.group(1), computations, depth + 1) if called else (0, 0, 0)
            looped, unknown = looped + inner_looped, unknown + inner_unknown
            continue
        body = _WHILE_BODY.search(line) if match.group(1) == "while" else None
        if body is None:
            continue
        trips = _TRIP_COUNT.search(line)
        count = int(trips.group(1)) if trips else 1
        inner_kernels, inner_looped, inner_unknown = _launches(body.group(1), computations, depth + 1)
        looped += count * (inner_kernels + inner_looped)
        unknown += count * inner_unknown + (0 if trips else 1)
    return kernels, looped, unknown


def _computations(text: str) -> dict[str, tuple[bool, list[str]]]:
    """Each computation of an HLO module's text: its name -> (is it ENTRY, its instruction lines)."""
    computations: dict[str, tuple[bool, list[str]]] = {}
    lines: list[str] | None = None
    for line in text.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            lines = []
            computations[header.group(2)] = (bool(header.group(1)), lines)
        elif line.startswith("}"):
            lines = None
        elif lines is not None:
            lines.append(line)
    return computations


def count_ops(hlo_text: str) -> int:
    """Every instruction of an HLO module's text that computes something (FREE_OPS left out), all computations."""
    return sum(1 for op in _ops(hlo_text) if op not in FREE_OPS)


def count_scattered(hlo_text: str) -> int:
    """Elements an HLO module's scatters go over: each select-and-scatter's operand (its result's shape), each scatter's updates.

    A scatter's operands are its N inputs, its indices and its N updates (N > 1: a variadic scatter).
    """
    shapes: dict[str, int] = {}
    scattered = 0
    for line in hlo_text.splitlines():
        shaped = _SHAPED.match(line)
        if shaped:
            shapes[shaped.group(1)] = math.prod(int(size) for size in shaped.group(2).split(",") if size)
        scatter = _SCATTER_OPERANDS.search(line)
        if scatter is None:
            continue
        if scatter.group(1) == "select-and-scatter":
            scattered += shapes[shaped.group(1)] if shaped else 0
        else:
            operands = [name.strip().lstrip("%") for name in scatter.group(2).split(",")]
            inputs = (len(operands) - 1) // 2
            scattered += sum(shapes.get(name, 0) for name in operands[inputs + 1 :])
    return scattered


def _ops(text: str) -> list[str]:
    return [match.group(1) for match in map(_INSTRUCTION.match, text.splitlines()) if match]


def compiled_job_model(config: RunConfig) -> tuple[Any, Any, Any]:
    """(job data, model, optimizer): `config`'s model built and compiled as `core.backends.fit_job` does (its precision policy,
    data, losses, optimizer), one step per call; KERAS_BACKEND=jax already set."""
    import keras

    from core.backends.job_data import job_data
    from core.backends.job_setup import PRECISION_POLICIES, make_optimizer

    keras.config.set_dtype_policy(PRECISION_POLICIES[config.precision])
    data = job_data(config)
    model = data.workload.build_model(seed=config.seed)
    optimizer = make_optimizer(config, data.workload.make_optimizer(config.learning_rate, config.optimizer))
    model.compile(optimizer=optimizer, loss=data.loss, loss_weights=data.loss_weights, steps_per_execution=1, jit_compile="auto")
    return data, model, optimizer


def step_costs_here(config: RunConfig, batches: list[int]) -> dict[str, Any]:
    """In the child (KERAS_BACKEND=jax already set): the reply `measure_step_costs` reads."""
    import jax
    import keras

    from core.workloads.memory_estimate import estimate_for_model

    stage("building the model")
    data, model, optimizer = compiled_job_model(config)
    counted: list[dict[str, Any]] = []
    notes: list[str] = []
    built = False
    for batch in batches:
        stage(f"lowering and compiling the train step at batch {batch}")
        try:
            counted.append(_batch_costs(model, data.x, data.y, batch, build=not built))
            built = True
        except Exception as exc:  # one batch XLA cannot lower (too large an index space...) leaves the others counted
            notes.append(
                f"batch {batch} not counted: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
            )
    layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
    return {
        "model": model.name,
        "layers": len(layers),
        "params": int(model.count_params()),
        "batches": counted,
        "examples": data.examples,
        "memory_estimate": estimate_for_model(model, optimizer, config.precision).to_dict() if built else {},
        "versions": {"jax": jax.__version__, "keras": keras.__version__},
        "notes": notes,
    }


def _batch_costs(model: Any, x: Any, y: Any, batch: int, build: bool) -> dict[str, Any]:
    traced = traced_train_step(model, x, y, batch, build=build, donate=True)
    lowered = traced.lower()
    analysis = xla_cost_analysis(lowered)
    flops, moved = float(analysis.get("flops", 0.0)), float(analysis.get("bytes accessed", 0.0))
    trips = skipped_trips(traced.jaxpr)  # every trip of a recurrent layer's loop, as the run's own count
    flops, moved = flops + trips.flops, moved + trips.bytes
    if flops <= 0 or moved <= 0:
        raise ValueError("XLA's cost analysis of the train step holds no FLOP or byte count")
    hlo = lowered.as_text(dialect="hlo")
    compiled = lowered.compile()
    memory = compiled.memory_analysis()
    if memory is None:
        raise ValueError("XLA's compiled train step holds no memory analysis")
    arguments, outputs = int(memory.argument_size_in_bytes), int(memory.output_size_in_bytes)
    launches = count_kernels(compiled.as_text() or "")
    temp, alias = int(memory.temp_size_in_bytes), int(memory.alias_size_in_bytes)
    return {
        "batch": batch,
        "flops": flops,
        "bytes": moved,
        "kernels": launches.kernels,
        "loop_kernels": launches.loop_kernels,
        "unknown_trip_loops": launches.unknown_trip_loops,
        "ops": count_ops(hlo),
        "scattered": count_scattered(hlo),
        "memory_bytes": arguments + max(0, outputs - alias) + temp,
        "temp_bytes": temp,
        "argument_bytes": arguments,
    }


def main(argv: list[str] | None = None) -> int:
    from core import child_process
    from core.backends.child_job import explain, prepare_environment

    argv = sys.argv[1:] if argv is None else argv
    config = RunConfig.from_dict(json.loads(argv[0]))
    batches = [int(item) for item in argv[1].split(",") if item]
    prepare_environment(config)
    child_process.end_with_parent()  # XLA compiling holds the GIL: the kernel ends this child with the app
    child_process.listen_to_parent()
    try:
        answer = step_costs_here(config, batches)
    except Exception as exc:  # every failure becomes the reply's readable error
        answer = {"error": explain(exc)}
    reply(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
