"""worker_threads: the app's background worker (`gui.qt_threads`) measured against superqt's `create_worker`.

Each side runs in a fresh process (a QCoreApplication, offscreen), four ways:

- short tasks: N tasks that return at once, started together from the GUI thread;
  the time until every result has arrived, how many arrived in the GUI thread.
- behind long tasks: as many long tasks as superqt's pool has threads (one per core:
  a training run, a ceilings measurement), then one short task; how long its result takes.
- teardown: four tasks busy in Python for 0.5 s each, then the wait the window does
  when it closes (app: `wait_for_threads`; superqt: `WorkerBase.await_workers`); how
  long it blocks, whether every task ended, whether their results still arrive.
- deletion: in which thread each worker QObject was destroyed (a destructor outside
  the GUI thread can deadlock against the GUI thread's `connect`: see `gui.qt_threads`).

superqt is not a dependency: its side runs where it is importable (`pip install superqt`),
else its rows say so. Targets are the app's: every result in the GUI thread, a short
task never held back by long ones (< 1 s), teardown within its limit, no worker
destroyed outside the GUI thread.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks import harness

NAME = "worker_threads"
TARGET = "all results in the GUI thread; a short task < 1 s behind long ones; teardown ends every task; 0 destroyed off the GUI thread"
SHORT_TASKS, SHORT_TASKS_QUICK = 2000, 300
LONG_S = 10.0  # how long the long tasks run at most (they end once the short task's result is in)
BUSY_S = 0.5
TEARDOWN_LIMIT_S = 30.0
SHORT_BEHIND_LONG_LIMIT_S = 1.0


def run(quick: bool) -> list[harness.Result]:
    count = SHORT_TASKS_QUICK if quick else SHORT_TASKS
    app = harness.run_child(NAME, ["app", count], timeout_s=300)
    other = harness.run_child(NAME, ["superqt", count], timeout_s=300) if importlib.util.find_spec("superqt") else None

    def versus(key: str, fmt: Callable[[dict[str, Any]], str]) -> str:
        return f"app {fmt(app[key])}; superqt " + (fmt(other[key]) if other else "not installed (pip install superqt to compare)")

    short, behind, teardown, deletion = app["short"], app["behind"], app["teardown"], app["deletion"]
    return [
        harness.Result(
            f"{NAME} short tasks",
            short["seconds"],
            "s",
            f"{count:,} results, all in the GUI thread, none left running",
            short["delivered"] == short["in_gui_thread"] == short["lambdas_in_gui_thread"] == count and short["left_running"] == 0,
            versus(
                "short",
                lambda s: (
                    f"{s['seconds']:.2f} s, {s['delivered']:,} delivered, in the GUI thread {s['in_gui_thread']:,} "
                    f"to a @Slot method and {s['lambdas_in_gui_thread']:,} to a lambda"
                ),
            ),
            {"app": app, "superqt": other},
        ),
        harness.Result(
            f"{NAME} behind long tasks",
            behind["seconds"] * 1e3,
            "ms",
            f"< {SHORT_BEHIND_LONG_LIMIT_S * 1e3:.0f} ms with {behind['long_tasks']} long tasks running",
            behind["seconds"] < SHORT_BEHIND_LONG_LIMIT_S,
            versus("behind", lambda b: f"{b['seconds'] * 1e3:,.0f} ms behind {b['long_tasks']} long tasks"),
        ),
        harness.Result(
            f"{NAME} teardown",
            teardown["seconds"],
            "s",
            f"every task ended within {TEARDOWN_LIMIT_S:.0f} s, results delivered",
            teardown["ended"] and teardown["delivered"] == teardown["tasks"],
            versus("teardown", lambda t: f"{t['seconds']:.2f} s, ended {t['ended']}, {t['delivered']} of {t['tasks']} delivered"),
        ),
        harness.Result(
            f"{NAME} deletion",
            float(deletion["other"]),
            "workers",
            "0 destroyed outside the GUI thread",
            deletion["other"] == 0,
            versus("deletion", lambda d: f"{d['gui']:,} destroyed in the GUI thread, {d['other']:,} outside, {d['alive']:,} not yet"),
        ),
    ]


# --- the child: one side, in a fresh process -----------------------------------


def _child(argv: list[str]) -> dict[str, Any]:
    from PySide6.QtCore import QCoreApplication, QObject, Qt, QThreadPool, Slot

    kind, count = argv[0], int(argv[1])
    app = QCoreApplication([])
    main = threading.main_thread()
    deletions = {"gui": 0, "other": 0, "made": 0}
    lock = threading.Lock()

    def note_destroyed(*_: object) -> None:
        with lock:
            deletions["gui" if threading.current_thread() is main else "other"] += 1

    class Receiver(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.values: list[Any] = []
            self.in_gui_thread = 0
            self.arrived_at: float | None = None

        @Slot(object)
        def on_result(self, value: Any) -> None:
            self.values.append(value)
            self.in_gui_thread += threading.current_thread() is main
            self.arrived_at = time.perf_counter()

        def on_error(self, error: Any) -> None:  # undecorated, as most of the app's views' methods are
            print(f"task failed: {error}", flush=True)

        def lambda_for_results(self) -> Callable[[Any], None]:
            self.lambdas_in_gui_thread = 0

            def count(_: Any) -> None:
                self.lambdas_in_gui_thread += threading.current_thread() is main

            return lambda value: count(value)

    if kind == "app":
        from gui.qt_threads import Worker, running_threads, start_worker, wait_for_threads

        def start(receiver: Receiver, function: Callable[..., Any], *args: Any, also: Callable[[Any], None] | None = None) -> None:
            worker = Worker(function, *args)
            worker.returned.connect(receiver.on_result)
            worker.errored.connect(receiver.on_error)
            if also is not None:
                worker.returned.connect(also)
            worker.destroyed.connect(note_destroyed, Qt.ConnectionType.DirectConnection)
            deletions["made"] += 1
            start_worker(worker, "benchmark")

        def left_running() -> int:
            return len(running_threads())

        def close_wait(timeout_s: float) -> bool:
            return wait_for_threads(timeout_s)
    else:
        from superqt.utils import WorkerBase, create_worker

        def start(receiver: Receiver, function: Callable[..., Any], *args: Any, also: Callable[[Any], None] | None = None) -> None:
            returned = [receiver.on_result] + ([also] if also is not None else [])
            worker = create_worker(function, *args, _connect={"returned": returned, "errored": receiver.on_error})
            worker.signals.destroyed.connect(note_destroyed, Qt.ConnectionType.DirectConnection)
            deletions["made"] += 1

        def left_running() -> int:
            return QThreadPool.globalInstance().activeThreadCount()

        def close_wait(timeout_s: float) -> bool:
            try:
                WorkerBase.await_workers(int(timeout_s * 1000))
            except RuntimeError:
                return False
            return True

    def pump_until(done: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.perf_counter() + timeout_s
        while not done() and time.perf_counter() < deadline:
            app.processEvents()
            time.sleep(0.0005)

    def settle() -> None:
        import gc

        for _ in range(100):
            app.processEvents()
            gc.collect()
            time.sleep(0.01)
            if left_running() == 0:
                break

    result: dict[str, Any] = {}

    # short tasks
    receiver = Receiver()
    lambda_callback = receiver.lambda_for_results()
    began = time.perf_counter()
    for index in range(count):
        start(receiver, int, index, also=lambda_callback)
    pump_until(lambda: len(receiver.values) == count, 120)
    seconds = time.perf_counter() - began
    settle()
    result["short"] = {
        "seconds": seconds,
        "delivered": len(receiver.values),
        "in_gui_thread": receiver.in_gui_thread,
        "lambdas_in_gui_thread": receiver.lambdas_in_gui_thread,
        "left_running": left_running(),
    }

    # one short task behind long ones
    long_tasks = QThreadPool.globalInstance().maxThreadCount()
    release = threading.Event()
    long_receiver, receiver = Receiver(), Receiver()
    for _ in range(long_tasks):
        start(long_receiver, release.wait, LONG_S)
    pump_until(lambda: False, 0.2)  # the long tasks are running
    began = time.perf_counter()
    start(receiver, int, 1)
    pump_until(lambda: bool(receiver.values), LONG_S * 2)
    result["behind"] = {"seconds": (receiver.arrived_at or time.perf_counter()) - began, "long_tasks": long_tasks}
    release.set()
    pump_until(lambda: len(long_receiver.values) == long_tasks, 60)
    settle()

    # teardown while tasks run
    def busy(seconds: float) -> int:
        end, spins = time.perf_counter() + seconds, 0
        while time.perf_counter() < end:
            spins += 1
        return spins

    receiver = Receiver()
    for _ in range(4):
        start(receiver, busy, BUSY_S)
    pump_until(lambda: False, 0.1)
    began = time.perf_counter()
    ended = close_wait(TEARDOWN_LIMIT_S)
    seconds = time.perf_counter() - began
    pump_until(lambda: len(receiver.values) == 4, 10)
    result["teardown"] = {"seconds": seconds, "ended": ended and left_running() == 0, "delivered": len(receiver.values), "tasks": 4}

    settle()
    result["deletion"] = {
        "gui": deletions["gui"],
        "other": deletions["other"],
        "alive": deletions["made"] - deletions["gui"] - deletions["other"],
    }
    return result


if __name__ == "__main__":
    harness.child_main(_child)
