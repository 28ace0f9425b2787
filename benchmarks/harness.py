"""Shared benchmark helpers: result rows, the machine, fresh child processes, A/B alternation, call clocks.

A benchmark module defines NAME, TARGET and `run(quick) -> list[Result]`. Work that
must not share process state runs in a fresh interpreter: `run_child("module",
args)` starts `python -m benchmarks.module args`, whose `child_main(handler)`
prints one JSON line that `run_child` returns as a dict.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from core.training.hooks import RunHook

REPO = Path(__file__).resolve().parent.parent
RESULT_MARK = "BENCH-RESULT "

# The headless jobs engine_vs_fit and truth both time: (model, steps per call, steps in a
# full run); quick runs do a quarter of the steps.
ENGINE_CASES = (("mlp", 1, 2000), ("mlp", 16, 3200), ("cnn", 1, 100))
_scratch: list[Path] = []  # this process's scratch folder, made on first use and removed at exit


class BenchmarkError(RuntimeError):
    """A benchmark could not measure (a child crashed, the app lacks a piece); the message says why."""


@dataclass(frozen=True)
class Result:
    """One row of the table: what was measured against which target, and whether it met it."""

    name: str
    measured: float | None
    unit: str
    target: str
    passed: bool | None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    suspect: str = ""  # why the figure is implausible for what it measures: then it fails as SUSPECT, whatever the target says

    def __post_init__(self) -> None:
        if self.suspect:
            object.__setattr__(self, "passed", False)

    def measured_text(self) -> str:
        if self.measured is None:
            return "n/a"
        return f"{self.measured:,.3f} {self.unit}".strip() if abs(self.measured) < 100 else f"{self.measured:,.0f} {self.unit}".strip()

    def verdict(self) -> str:
        if self.suspect:
            return "SUSPECT"
        return {True: "PASS", False: "FAIL", None: "ERROR"}[self.passed]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def machine_info() -> dict[str, Any]:
    """CPU, cores, versions and date, without importing TensorFlow (this process stays light)."""
    import psutil

    return {
        "cpu": _cpu_model(),
        "cores_logical": psutil.cpu_count(logical=True),
        "cores_physical": psutil.cpu_count(logical=False),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "tensorflow": _version("tensorflow"),
        "keras": _version("keras"),
        "pyside6": _version("PySide6-Essentials") or _version("PySide6"),
        "pyqtgraph": _version("pyqtgraph"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_average": [round(v, 2) for v in os.getloadavg()],
    }


def _cpu_model() -> str:
    try:
        import cpuinfo

        return cpuinfo.get_cpu_info().get("brand_raw") or platform.processor() or "unknown"
    except Exception:
        return platform.processor() or "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child: quiet TF, offscreen Qt, its own empty history/settings/logs folders."""
    if not _scratch:
        _scratch.append(Path(tempfile.mkdtemp(prefix="device-lab-bench-")))
        atexit.register(shutil.rmtree, _scratch[0], ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(dir=_scratch[0]))
    env = dict(os.environ)
    env.update(
        TF_CPP_MIN_LOG_LEVEL="2",
        QT_QPA_PLATFORM="offscreen",
        PYTHONUNBUFFERED="1",
        DEVICE_LAB_DATA_DIR=str(scratch / "data"),
        DEVICE_LAB_SETTINGS_DIR=str(scratch / "settings"),
        DEVICE_LAB_LOG_DIR=str(scratch / "logs"),
    )
    env.update(extra)
    return env


def run_child(module: str, args: Sequence[str] = (), timeout_s: float = 600, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `python -m benchmarks.<module> args` in a fresh process and return the dict it printed."""
    command = [sys.executable, "-m", f"benchmarks.{module}", *map(str, args)]
    try:
        done = subprocess.run(command, cwd=REPO, env=env or child_env(), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise BenchmarkError(f"{module} {' '.join(map(str, args))}: no answer within {timeout_s:.0f} s") from None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK) :])
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
    raise BenchmarkError(f"{module} {' '.join(map(str, args))} exited {done.returncode} without a result:\n{tail}")


def child_main(handler: Callable[[list[str]], dict[str, Any]]) -> None:
    """Entry point of a child process: call `handler(argv)` and print its dict for `run_child`."""
    result = handler(sys.argv[1:])
    print(RESULT_MARK + json.dumps(result), flush=True)


def alternate(runners: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[Any]]:
    """Call each runner once per round, in the same order every round (ABAB...), `repeats` rounds."""
    results: dict[str, list[Any]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, runner in runners.items():
            results[name].append(runner())
    return results


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> tuple[float, list[float]]:
    """Median of the per-round ratios (robust to drift between rounds), and the ratios."""
    ratios = [a / b for a, b in zip(numerators, denominators, strict=True)]
    return median(ratios), ratios


def implausible_ratio(ratio: float | None, low: float, high: float, what: str) -> str:
    """Why `ratio` cannot be right for `what` (outside [low, high]), or "" when it is plausible.

    A benchmark that passes by measuring something else is the worst kind of
    figure: an overhead that makes the app faster than the bare run, or a
    speed-up with no cause, means the clock timed the wrong run.
    """
    if ratio is None or low <= ratio <= high:
        return ""
    return f"SUSPECT: {ratio:.3f}x is outside the plausible {low:g}-{high:g}x for {what}: the timing is not of the run it names"


def spread_text(values: Sequence[float], fmt: str = ".3f") -> str:
    return "[" + ", ".join(format(v, fmt) for v in values) + "]"


class CallClock(RunHook):
    """Outside timing of an engine run: perf_counter at the start and at the end of every call.

    Bound to the one run it timed: `config` is that run's (from its start) and
    `run` its result's identity (`run_identity`), so a figure is read from the
    clock of the run it names, never from "the last clock".
    """

    def __init__(self) -> None:
        self.begins: list[float] = []
        self.ends: list[float] = []
        self.steps: list[int] = []
        self.config: Any = None
        self.run: tuple[Any, ...] | None = None

    def on_run_start(self, context) -> None:
        self.config = context.config

    def on_run_end(self, result) -> None:
        self.run = run_identity(result)

    def on_call_begin(self, first_step: int, steps: int) -> None:
        self.begins.append(time.perf_counter())
        self.steps.append(steps)

    def on_step_records(self, records) -> None:
        self.ends.append(time.perf_counter())


def run_identity(result: Any) -> tuple[Any, ...]:
    """What singles out one run among a process's runs: its start time, steps and step times."""
    return (result.started_at, result.steps_done, tuple(result.step_times_s))


def clock_of(clocks: Sequence[CallClock], result: Any) -> CallClock:
    """The one clock that timed the run `result` came from; BenchmarkError unless exactly one did."""
    found = [clock for clock in clocks if clock.run == run_identity(result)]
    if len(found) != 1:
        raise BenchmarkError(f"{len(found)} of {len(clocks)} clocks timed the run started at {result.started_at}: expected exactly one")
    return found[0]


def cycle_rate(begins: Sequence[float], steps: Sequence[int], batch_size: int, skip_fraction: float = 0.1) -> float:
    """Samples/s over whole call cycles (start of a call to start of the next), early calls skipped.

    Skips the first call (tracing) and `skip_fraction` of the calls (caches and
    thread pools warming); the last call has no next start and is left out.
    """
    first = max(1, int(len(begins) * skip_fraction))
    last = len(begins) - 1
    if last <= first:
        raise BenchmarkError(f"only {len(begins)} calls: too few to time a steady state")
    return batch_size * sum(steps[first:last]) / (begins[last] - begins[first])


class GcPauses:
    """Records the time of every full (generation 2) garbage collection while installed: they stop all threads."""

    def __init__(self) -> None:
        self.pauses_ms: list[float] = []
        self._started = 0.0

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc_info) -> None:
        gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses_ms.append((time.perf_counter() - self._started) * 1e3)

    def summary(self) -> str:
        if not self.pauses_ms:
            return "no full GC"
        return f"{len(self.pauses_ms)} full GC pauses, longest {max(self.pauses_ms):.0f} ms"


class AppWindow:
    """The app's real main window, started by gui.app.run_app offscreen in this (child) process.

    `run_in_app(script)` calls `script(AppWindow)` from inside the app's event
    loop; the script drives the window through its widgets' objectNames and the
    documented `window.run_controller` signals, then the window is closed.
    """

    def __init__(self, window: Any):
        self.window = window

    def find(self, name: str) -> Any:
        from PySide6.QtWidgets import QWidget

        widget = self.window.findChild(QWidget, name)
        if widget is None:
            raise BenchmarkError(f"the window has no widget named {name!r}")
        return widget

    def wait(self, predicate: Callable[[], bool], timeout_s: float, what: str, poll_ms: int = 20) -> None:
        """Let the event loop run until `predicate()` holds; BenchmarkError after `timeout_s`."""
        from PySide6.QtCore import QEventLoop, QTimer

        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise BenchmarkError(f"gave up waiting {timeout_s:.0f} s for {what}")
            loop = QEventLoop()
            QTimer.singleShot(poll_ms, loop.quit)
            loop.exec()

    def wait_until_ready(self, timeout_s: float = 120) -> None:
        """Wait for the device table and for every start-up worker (detection, parameter counts) to end."""
        self.wait(lambda: self.find("deviceTable").rowCount() > 0, timeout_s, "the device table")
        self.wait_for_workers(timeout_s)

    def wait_for_workers(self, timeout_s: float = 120) -> None:
        """Wait until no worker thread of the app (gui.qt_threads) runs."""
        from gui.qt_threads import running_threads

        self.wait(lambda: not running_threads(), timeout_s, "the app's worker threads to end")

    def steady_steps_plotted(self) -> int:
        """Steady-state (after warm-up) steps of the current run that have reached the plots."""
        key = self.window.run_controller.current_key
        plots = self.window.plots
        return plots.series(key).steady_count if key in plots.run_keys() else 0

    def set_run(self, model: str, steps: int, batch_size: int = 64, steps_per_call: int = 1, dataset: str = "synthetic") -> None:
        """Fill the run form: model, data set, default strategy, batch, steps and steps per call."""
        for name, value in (("modelCombo", model), ("datasetCombo", dataset), ("strategyCombo", "default")):
            combo = self.find(name)
            index = combo.findData(value)
            if index < 0:
                raise BenchmarkError(f"{name} has no entry {value!r}")
            combo.setCurrentIndex(index)
        self.find("stepsUnitCombo").setCurrentText("steps")
        for name, value in (("batchSizeEdit", batch_size), ("stepsEdit", steps), ("stepsPerCallEdit", steps_per_call)):
            self.find(name).setText(str(value))

    def start(self) -> None:
        """Press Start (once it is enabled)."""
        button = self.find("startButton")
        self.wait(button.isEnabled, 120, "the Start button to be enabled")
        button.click()

    def run(self, timeout_s: float = 300) -> Any:
        """Press Start and wait for the run to finish; returns its FinishedRun (result, history id)."""
        controller = self.window.run_controller
        finished: list[Any] = []
        controller.run_finished.connect(finished.append)
        try:
            self.start()
            try:
                self.wait(lambda: bool(finished) or controller.is_running(), 30, "the run to start")
            except BenchmarkError:
                raise BenchmarkError(f"Start did not start a run; the window says: {self.status_text()!r}") from None
            # Poll slowly: the harness's own wake-ups must not cost the training thread time.
            self.wait(lambda: bool(finished) and not controller.is_running(), timeout_s, "the run to finish", poll_ms=200)
        finally:
            controller.run_finished.disconnect(finished.append)
        return finished[0]

    def status_text(self) -> str:
        """What the window tells the user right now: status bar, form hint and result line."""
        texts = [self.window.statusBar().currentMessage(), self.find("formHint").text(), self.find("resultLabel").text()]
        return " | ".join(t for t in texts if t)


def run_in_app(script: Callable[[AppWindow], dict[str, Any]]) -> dict[str, Any]:
    """Start the app as `python main.py` would, run `script` inside its event loop, close it; returns the dict."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from gui.app import run_app

    app = QApplication.instance() or QApplication([sys.argv[0]])
    outcome: dict[str, Any] = {}

    def drive() -> None:
        window = next(w for w in app.topLevelWidgets() if w.objectName() == "mainWindow")
        try:
            outcome["result"] = script(AppWindow(window))
        except BaseException as exc:  # re-raised once the app has closed cleanly
            outcome["error"] = exc
        finally:
            window.close()

    QTimer.singleShot(0, drive)
    run_app([sys.argv[0]])
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def engine_rate(model: str, steps: int, batch_size: int, **settings: object) -> float:
    """Steady-state samples/s of the app's engine on synthetic data, timed from outside (a `CallClock`)."""
    from core.config import RunConfig
    from core.runner import run_training

    clock = CallClock()
    config = RunConfig(model=model, dataset="synthetic", steps=steps, batch_size=batch_size, **settings)
    result = run_training(config, hooks=[clock])
    if not result.ok:
        raise BenchmarkError(f"engine run {result.status}: {result.message}")
    return cycle_rate(clock.begins, clock.steps, batch_size)


def fit_rate(model: str, steps: int, batch_size: int, **compile_options: object) -> float:
    """Steady-state samples/s of a bare Keras `model.fit` (verbose=0) of the same model and synthetic data.

    `compile_options` go to `compile()` beside the optimizer and loss (none: Keras's defaults).
    """
    import keras
    import tensorflow as tf

    from core.config import RunConfig
    from core.workloads import data
    from core.workloads.models import get_model_spec

    defaults = RunConfig()
    spec = get_model_spec(model)
    x, y, num_classes = data.load_arrays("synthetic", spec, defaults.seed)
    tf.random.set_seed(defaults.seed)
    net = spec.build(x.shape[1:], num_classes, seed=defaults.seed)
    net.compile(
        optimizer=keras.optimizers.Adam(learning_rate=defaults.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        **compile_options,
    )

    class Clock(keras.callbacks.Callback):
        # Only a batch *begin* hook: fit keeps dispatching its end-of-batch callbacks asynchronously, as bare fit does.
        def __init__(self) -> None:
            super().__init__()
            self.begins: list[float] = []

        def on_train_batch_begin(self, batch, logs=None) -> None:
            self.begins.append(time.perf_counter())

    clock = Clock()
    dataset = data.make_dataset(x, y, batch_size, defaults.seed, synthetic=True)
    net.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=[clock])
    per_call = int(compile_options.get("steps_per_execution", 1))
    return cycle_rate(clock.begins, [per_call] * len(clock.begins), batch_size)


class DriftingLoad:
    """A load that switches on and off at random, as `../shared/tools/drift.sh` makes it: one busy loop per core, on for 1-6 s,
    off for 1-6 s (a build, a second job), the pattern fixed by `seed`. A context manager; the loops are this process's
    children, so a measured app (another child) counts them as other processes' work."""

    def __init__(self, seed: int, cores: int | None = None) -> None:
        import multiprocessing

        self._context = multiprocessing.get_context("spawn")
        self._seed, self._cores = seed, cores or os.cpu_count() or 1
        self._on = self._context.Event()
        self._stop = self._context.Event()
        self._loops: list[Any] = []
        self._driver: Any = None

    def __enter__(self) -> DriftingLoad:
        import threading

        self._loops = [self._context.Process(target=_busy_while, args=(self._on, self._stop), daemon=True) for _ in range(self._cores)]
        for loop in self._loops:
            loop.start()
        self._driver = threading.Thread(target=self._drive, name="drifting load", daemon=True)
        self._driver.start()
        return self

    def _drive(self) -> None:
        import random

        rng = random.Random(self._seed)
        while not self._stop.is_set():
            self._on.set()
            if self._stop.wait(rng.uniform(1, 6)):
                break
            self._on.clear()
            self._stop.wait(rng.uniform(1, 6))

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._on.clear()
        if self._driver is not None:
            self._driver.join()
        for loop in self._loops:
            loop.join(5)
            if loop.is_alive():
                loop.terminate()


def _busy_while(on: Any, stop: Any) -> None:
    """One core's busy loop: spins while `on` is set, sleeps while it is clear, ends at `stop`."""
    while not stop.is_set():
        if on.wait(0.2):
            end = time.perf_counter() + 0.01
            while time.perf_counter() < end:
                pass


def main_py_json(args: Sequence[str], timeout_s: float = 600) -> tuple[Any, float]:
    """`python main.py ARGS` (with --json) in a fresh process with its own history; (its JSON document, wall seconds)."""
    began = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "main.py", *args], cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise BenchmarkError(f"main.py {' '.join(args)}: no answer within {timeout_s:.0f} s") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise BenchmarkError(f"main.py {' '.join(args)} exited {done.returncode}:\n{tail}")
    return json.loads(done.stdout), time.perf_counter() - began
