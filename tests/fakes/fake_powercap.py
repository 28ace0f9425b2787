"""FakePowercap: a stand-in for Linux's powercap (RAPL) sysfs tree, which this VM does not have.

It writes `intel-rapl:0` (a package) and `intel-rapl:0:0` (its DRAM) under a folder, with
`name`, `max_energy_range_uj` and `energy_uj`, as the kernel lays them out. `advance(joules)`
moves the package counter by hand (wrapping at the range, as RAPL does); `run_at(watts)`
moves it from a thread at a steady power until `stop()`. Point DEVICE_LAB_POWERCAP_ROOT
(or `powercap_counters(root)`) at `root`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

RANGE_UJ = 262_143_328_850  # a real package zone's max_energy_range_uj


class FakePowercap:
    def __init__(self, root: Path, start_joules: float = 1000.0, range_uj: int = RANGE_UJ) -> None:
        self.root, self.range_uj = root, range_uj
        self.package = root / "intel-rapl:0"
        self.dram = root / "intel-rapl:0:0"
        for zone, name in ((self.package, "package-0"), (self.dram, "dram")):
            zone.mkdir(parents=True)
            (zone / "name").write_text(name + "\n")
            (zone / "max_energy_range_uj").write_text(f"{range_uj}\n")
            (zone / "energy_uj").write_text("0\n")
        self._microjoules = int(start_joules * 1e6)
        self._write()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def advance(self, joules: float) -> None:
        with self._lock:
            self._microjoules = (self._microjoules + int(joules * 1e6)) % self.range_uj
            self._write()

    def run_at(self, watts: float, every_s: float = 0.001) -> None:
        def tick() -> None:
            last = time.perf_counter()
            while not self._stop.wait(every_s):
                now = time.perf_counter()
                self.advance(watts * (now - last))
                last = now

        self._thread = threading.Thread(target=tick, name="fake-powercap", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _write(self) -> None:
        temporary = self.package / "energy_uj.new"
        temporary.write_text(f"{self._microjoules}\n")
        temporary.replace(self.package / "energy_uj")  # whole, as sysfs reads are


def energy_record(joules_per_sample: float | None, counter: str = "powercap intel-rapl:0 (package-0)", covers: str = "the CPU packages"):
    """The `RunResult.energy` a run measured at `joules_per_sample` (30 W) carries, as `core.hooks.energy` writes it; None for None."""
    if joules_per_sample is None:
        return None
    return {
        "joules_per_sample": joules_per_sample,
        "samples_per_joule": 1 / joules_per_sample,
        "watts": 30.0,
        "counters": [counter],
        "covers": covers,
    }
