"""The run's hooks: every standard hook a job's run carries, built from its config in one place, and all of them ended.

As Keras's `fit` makes its own `CallbackList` (its History, its progress bar)
and adds the caller's hooks to it, `RunHooks` is a run's own list of hooks:
the caller's listener and hooks, then the standard hooks, each built here from
the config and the job's options:

- conditions (`core.hooks.conditions`): what else the machine did; not for a
  multi-worker run, whose workers record their own
- TensorBoard event files and a profiler capture, as `config.hooks` asks
  (`core.hooks.profiler.logging_hooks`: one run folder for both)
- device use (`core.hooks.device_use`): the run's GPUs sampled where NVML sees
  them; not for a multi-worker run, nor in interleaved rounds (the GPU serves
  the other jobs' turns too)
- energy (`core.hooks.energy`): the joules of the steady window
- FLOPs per step (`core.training.flops`), unless the caller brought its own
  counter (a comparison: one for all its targets) or the verdict counts them
- the verdict (`core.diagnosis.run_verdict`) when the job is diagnosed: last, so
  it judges the result every other hook has completed

The job service builds them before the run starts (a profile that does not fit
the run is a ConfigError then), hands them to its listener
(`JobListener.on_run_hooks`: a view follows the GPU use, a report reads the
profile after the run) and closes them in a `finally`: a hook the run did not
end (it failed before its first step, or something raised past its engine) is
ended with the failed result. Front ends pass only listeners of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

from core.config import RunConfig
from core.hooks.conditions import ConditionsHook
from core.hooks.device_use import DeviceUseHook, device_use_hook_for
from core.hooks.energy import EnergyHook
from core.hooks.flops import FlopsCounter
from core.hooks.profiler import ProfilerCapture, logging_hooks
from core.hooks.tensorboard import TensorBoardWriter
from core.jobs.rounds import RoundGate
from core.results import RunResult
from core.training.hooks import RunHook, end_run


class RunHooks:
    """One run's hooks, in the order they are called: its conditions, the caller's own hooks (its listener first), then the
    standard ones.

    Iterating gives them all (pass them to `core.runner.run_training`); the
    standard ones are also named (`tensorboard`, `profiler`, `device_use`, …;
    None where the run has none). `diagnose` adds the verdict, which tells
    `announce` what it does. `close(result)` ends every hook the run did not
    end. Raises ConfigError when `config.hooks` asks for a profile that does not
    fit the run.
    """

    def __init__(
        self,
        config: RunConfig,
        stop_event: threading.Event,
        own: Sequence[RunHook] = (),
        diagnose: bool = False,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        gates = [hook for hook in own if isinstance(hook, RoundGate)]
        in_workers = config.strategy == "multi-worker"
        self.tensorboard: TensorBoardWriter | None
        self.profiler: ProfilerCapture | None
        self.tensorboard, self.profiler = logging_hooks(config)
        self.conditions = None if in_workers else ConditionsHook()
        self.device_use: DeviceUseHook | None = None if gates else device_use_hook_for(config)
        self.energy = EnergyHook(in_rounds=bool(gates))
        for gate in gates:
            gate.watchers.append(self.energy)  # in rounds each turn's end and start bound the energy window
        counted = diagnose or any(isinstance(hook, FlopsCounter) for hook in own)
        self.flops = None if counted else FlopsCounter()
        self.verdict = None
        if diagnose:
            from core.diagnosis.run_verdict import VerdictHook  # the diagnosis loads when a job needs it

            self.verdict = VerdictHook(config, stop_event, announce)
        self._end = _EndSeen()
        standard = (self.tensorboard, self.profiler, self.device_use, self.energy, self.flops, self.verdict)
        self._hooks: list[RunHook] = [
            *([self.conditions] if self.conditions is not None else []),
            *own,
            *(hook for hook in standard if hook is not None),
            self._end,
        ]

    def __iter__(self) -> Iterator[RunHook]:
        return iter(self._hooks)

    def close(self, result: RunResult) -> None:
        """End, with `result`, every hook the run did not end: all of them when it failed before its first step."""
        if not self._end.seen:
            end_run(self._hooks, result)


class _EndSeen(RunHook):
    """The last of a run's hooks: whether the run ended them (an engine ends every hook it is given, in order: `end_run`)."""

    def __init__(self) -> None:
        self.seen = False

    def on_run_end(self, result: RunResult) -> None:
        self.seen = True
