"""startup: how soon does the window appear, and the device table fill, after the process starts?

The parent notes time.monotonic() (system-wide on Linux) just before starting a
fresh interpreter that runs the app's real entry point, main.main([]), offscreen.
The child notes when the main window is first exposed (Qt Expose event) and when
the device panel announces its filled table (devices_changed), then closes the
window. Side by side, alternating, a fresh interpreter only imports TensorFlow:
the device target is TF's own import time + 1 s (detection imports TF in a
worker thread, so that part cannot be faster). One untimed launch of each first
warms the OS file cache and writes the app's bytecode (__pycache__), as any
launch after the first has them: PYTHONDONTWRITEBYTECODE is unset for the
children. Figures: medians over launches.
"""

from __future__ import annotations

import sys
import time

from benchmarks import harness

NAME = "startup"
TARGET = "window <= 1 s; devices <= TF import + 1 s"
WINDOW_TARGET_S = 1.0
DEVICES_SLACK_S = 1.0


def run(quick: bool) -> list[harness.Result]:
    repeats = 2 if quick else 5
    harness.alternate({"app": lambda: _launch("app"), "tf": lambda: _launch("tf")}, 1)
    rounds = harness.alternate({"app": lambda: _launch("app"), "tf": lambda: _launch("tf")}, repeats)
    window = harness.median([r["window_exposed"] for r in rounds["app"]])
    devices = harness.median([r["devices_filled"] for r in rounds["app"]])
    tf_import = harness.median([r["tf_imported"] for r in rounds["tf"]])
    margins = [a["devices_filled"] - t["tf_imported"] for a, t in zip(rounds["app"], rounds["tf"], strict=True)]
    margin = harness.median(margins)
    return [
        harness.Result(
            f"{NAME} window exposed",
            window,
            "s",
            f"<= {WINDOW_TARGET_S:g} s",
            window <= WINDOW_TARGET_S,
            "launches " + harness.spread_text([r["window_exposed"] for r in rounds["app"]], ".2f"),
            rounds,
        ),
        harness.Result(
            f"{NAME} devices filled",
            devices,
            "s",
            f"<= TF import ({tf_import:.2f} s) + {DEVICES_SLACK_S:g} s",
            margin <= DEVICES_SLACK_S,
            f"{margin:+.2f} s after a bare TF import (paired median); launches "
            + harness.spread_text([r["devices_filled"] for r in rounds["app"]], ".2f")
            + "; TF imports "
            + harness.spread_text([r["tf_imported"] for r in rounds["tf"]], ".2f"),
        ),
    ]


def _launch(mode: str) -> dict:
    env = harness.child_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.monotonic()
    stamps = harness.run_child(NAME, [mode], timeout_s=300, env=env)
    return {name: stamp - started for name, stamp in stamps.items()}


def _app() -> dict:
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QApplication, QWidget

    import main

    stamps: dict[str, float] = {}
    app = QApplication([sys.argv[0]])

    class Watcher(QObject):
        def eventFilter(self, obj, event) -> bool:
            if event.type() == QEvent.Type.Expose and "window_exposed" not in stamps and obj.isExposed():
                stamps["window_exposed"] = time.monotonic()
            elif event.type() == QEvent.Type.Show and obj.objectName() == "mainWindow" and "shown" not in stamps:
                stamps["shown"] = time.monotonic()
                obj.findChild(QWidget, "devicePanel").devices_changed.connect(lambda _report: devices_filled(obj))
            return False

    def devices_filled(window) -> None:
        stamps.setdefault("devices_filled", time.monotonic())
        QTimer.singleShot(0, window.close)

    watcher = Watcher()
    app.installEventFilter(watcher)
    main.main([])
    return stamps


def _child(argv: list[str]) -> dict:
    if argv[0] == "tf":
        import tensorflow  # noqa: F401

        return {"tf_imported": time.monotonic()}
    return _app()


if __name__ == "__main__":
    harness.child_main(_child)
