"""Device listing on this machine (real TensorFlow, CPU only) and, through fakes, GPUs and TPUs.

`FakeNvml` stands in for pynvml and `fake_tf` for the parts of `tf` the GPU code reads, so the
GPU paths run without a GPU. The TPU probe is only ever pointed at 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from core.formatting import format_bytes
from core.machine import gpu as gpu_info
from core.machine import tpu
from core.machine.cpu import _cpu_info_cached, cpu_info, read_proc_cpuinfo
from core.machine.inspect import device_table_rows, inspect_devices, list_devices, refresh_gpu_usage
from core.machine.tpu import detect_tpu_cheaply, probe_tpu
from core.machine.types import NA, DeviceInfo, NoteTopic, TpuProbe, memory_cells

ROOT = Path(__file__).resolve().parents[3]
GIB = 2**30


@pytest.fixture(autouse=True)
def _plain_machine(two_cpus: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Shared TF runtime (CPU split in two, see conftest); no TPU or CUDA hints from the environment."""
    for name in (*tpu.TPU_ENV_VARS, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


class FakeNvmlError(Exception):
    """What pynvml raises for a field the driver does not support."""


class FakeNvml:
    """Stands in for an initialised pynvml module; handles are the dicts passed in, in NVML index order."""

    NVML_TEMPERATURE_GPU = 0

    def __init__(self, *gpus: dict[str, Any]) -> None:
        self.gpus = list(gpus)

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        return self.gpus[index]

    def nvmlDeviceGetPciInfo(self, handle: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(busId=handle["bus"].encode())

    def nvmlDeviceGetName(self, handle: dict[str, Any]) -> bytes:
        return handle["name"].encode()

    def nvmlDeviceGetMemoryInfo(self, handle: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(total=handle["total"], used=handle["used"], free=handle["total"] - handle["used"])

    def nvmlDeviceGetUtilizationRates(self, handle: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(gpu=handle["util"], memory=0)

    def nvmlDeviceGetTemperature(self, handle: dict[str, Any], sensor: int) -> int:
        if "temp" not in handle:
            raise FakeNvmlError("Not Supported")
        return handle["temp"]

    def nvmlDeviceGetPowerUsage(self, handle: dict[str, Any]) -> int:
        return 250_000

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: dict[str, Any]) -> int:
        return 700_000

    def nvmlDeviceGetCudaComputeCapability(self, handle: dict[str, Any]) -> tuple[int, int]:
        return (9, 0)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040


def h100(bus: str, used_gib: int, **extra: Any) -> dict[str, Any]:
    return {"bus": bus, "name": "NVIDIA H100 80GB HBM3", "total": 80 * GIB, "used": used_gib * GIB, "util": 37, **extra}


def fake_tf(physical: int, visible: int | None = None, logical_per_gpu: int = 1) -> SimpleNamespace:
    """The parts of `tf` that `gpu_info.gpu_rows` reads, for a CUDA build with `physical` GPUs."""
    devices = [SimpleNamespace(name=f"/physical_device:GPU:{i}", device_type="GPU") for i in range(physical)]
    shown = devices[: physical if visible is None else visible]
    logical = [SimpleNamespace(name=f"/device:GPU:{k}", device_type="GPU") for k in range(len(shown) * logical_per_gpu)]
    configs = [SimpleNamespace(memory_limit=1024)] * logical_per_gpu if logical_per_gpu > 1 else None
    config = SimpleNamespace(
        list_logical_devices=lambda kind=None: logical if kind == "GPU" else [],
        list_physical_devices=lambda kind=None: devices if kind == "GPU" else [],
        get_visible_devices=lambda kind=None: shown if kind == "GPU" else [],
        get_logical_device_configuration=lambda device: configs,
        experimental=SimpleNamespace(
            get_device_details=lambda device: {"device_name": "NVIDIA H100 80GB HBM3", "compute_capability": (9, 0)},
            get_memory_info=lambda name: {"current": 3 * 2**20, "peak": 5 * 2**20},
        ),
    )
    build = {"is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}
    return SimpleNamespace(config=config, sysconfig=SimpleNamespace(get_build_info=lambda: build))


def use_nvml(monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml | None, problem: str = "") -> None:
    monkeypatch.setattr(gpu_info, "load_nvml", lambda: (nvml, problem))


def by_name(rows: list[DeviceInfo]) -> dict[str, DeviceInfo]:
    return {row.tf_name: row for row in rows}


# --- this machine -----------------------------------------------------------------------------


def test_cpus_listed_with_host_memory_and_notes_explain_missing_gpu_and_tpu(two_cpus: list[str]) -> None:
    report = inspect_devices(probe_tpu=True)
    cpus = [d for d in report.devices if d.kind == "CPU"]
    assert [d.tf_name for d in cpus] == two_cpus == ["CPU:0", "CPU:1"]
    # The host RAM counted once: the first logical CPU carries it, the second names the row it shares.
    first, second = cpus
    assert first.memory_total == psutil.virtual_memory().total and first.memory_shared_with == ""
    assert first.memory_used is not None and first.memory_free is not None
    assert first.memory_used + first.memory_free == first.memory_total
    assert (second.memory_total, second.memory_used, second.memory_free, second.memory_shared_with) == (None, None, None, "CPU:0")
    assert memory_cells(second) == ("shared with CPU:0", "", "") and memory_cells(first)[0] == format_bytes(first.memory_total)
    for position, cpu in enumerate(cpus, 1):
        assert cpu.available and cpu.reason == ""
        assert cpu.details["RAM shared by"] == "CPU:0, CPU:1"
        assert cpu.details["Logical device"] == f"{position} of 2 (split of one physical CPU)"
        assert cpu.details["Model"] == cpu.name
    for device in report.devices:
        assert device.details and all(isinstance(v, str) and v for v in device.details.values()), device.details
    assert {"AVX2", "AVX-512 (F)", "AVX-512 BF16", "AMX", "FMA", "RAM total"} <= set(cpus[0].details)
    assert not [d for d in report.devices if d.kind in ("GPU", "TPU")]
    gpu_note = next(n for n in report.notes if n.startswith("No GPU visible to TensorFlow"))
    assert "tensorflow[and-cuda]" in gpu_note
    tpu_note = next(n for n in report.notes if n.startswith("No TPU:"))
    assert "0x1ae0" in tpu_note and "Run panel" in tpu_note
    topics = {note.topic: note.text for note in report.note_records}
    assert topics == {NoteTopic.NO_GPU: gpu_note, NoteTopic.NO_TPU: tpu_note}
    assert [d.tf_name for d in list_devices()] == [d.tf_name for d in report.devices]


def test_cpu_info_is_read_once_per_process_and_readable() -> None:
    cpu_info()
    before = _cpu_info_cached.cache_info()
    info = cpu_info()
    after = _cpu_info_cached.cache_info()
    assert (after.hits, after.misses) == (before.hits + 1, before.misses)
    assert info["Model"] and info["Logical cores"] == str(psutil.cpu_count())
    assert info["AVX2"] in ("yes", "no", NA) and info["AMX"].startswith(("yes", "no", NA))
    info["Model"] = "changed"
    assert cpu_info()["Model"] != "changed"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="Linux only: elsewhere py-cpuinfo is the one reader")
def test_proc_cpuinfo_gives_what_py_cpuinfo_gives_without_its_subprocess() -> None:
    import cpuinfo

    from_proc, from_library = read_proc_cpuinfo(), cpuinfo.get_cpu_info()
    assert from_proc, "this Linux /proc/cpuinfo has a model name and flags"
    for field in ("brand_raw", "vendor_id_raw", "family", "hz_advertised"):
        assert from_proc.get(field) == from_library.get(field), field
    proc_flags, library_flags = set(from_proc["flags"]), set(from_library["flags"])
    assert proc_flags <= library_flags, "py-cpuinfo adds CPUID's own names (avx512vnni beside avx512_vnni)"
    read_by_this_app = {"avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "asimd", "neon"}
    assert proc_flags & read_by_this_app == library_flags & read_by_this_app


def test_a_proc_cpuinfo_without_a_model_name_leaves_the_cpu_to_py_cpuinfo(tmp_path: Path) -> None:
    arm = tmp_path / "cpuinfo"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\nCPU implementer\t: 0x41\n\n")
    assert read_proc_cpuinfo(arm) == {}
    x86 = tmp_path / "x86"
    x86.write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Xeon\ncpu MHz\t\t: 2200.000\nflags\t\t: fpu avx2 fma\n\nprocessor\t: 1\nmodel name\t: other\n"
    )
    read = read_proc_cpuinfo(x86)
    assert (read["brand_raw"], read["vendor_id_raw"], read["family"], read["hz_advertised"]) == (
        "Xeon",
        "GenuineIntel",
        6,
        [2_200_000_000, 0],
    )
    assert read["flags"] == ["avx2", "fma", "fpu"]


def test_without_a_tpu_hint_no_probe_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    assert detect_tpu_cheaply() == ""

    def no_probe(*args: Any) -> TpuProbe:
        raise AssertionError("the TPU probe started although nothing hints at a TPU")

    monkeypatch.setattr(tpu, "probe_tpu", no_probe)
    report = inspect_devices(probe_tpu=True)
    assert not [d for d in report.devices if d.kind == "TPU"]
    assert any(note.topic == NoteTopic.NO_TPU for note in report.note_records)


@pytest.mark.slow
def test_probe_of_silent_address_is_killed_at_the_time_limit(silent_tpu_address) -> None:
    address = silent_tpu_address
    start = time.perf_counter()
    result = probe_tpu(address, timeout_s=8)
    wall = time.perf_counter() - start
    assert not result.ok and result.devices == ()
    assert wall < 8 + 5 and result.elapsed_s <= wall
    assert "within 8 s" in result.message
    assert address in result.message or "importing TensorFlow" in result.message
    leftovers = [p for p in psutil.Process().children(recursive=True) if "tpu-probe" in " ".join(p.cmdline())]
    assert leftovers == []


def test_table_rows_are_json_ready() -> None:
    rows = device_table_rows(inspect_devices(probe_tpu=False))
    decoded = json.loads(json.dumps(rows))
    assert decoded[0]["kind"] == "CPU" and decoded[0]["tf_name"] == "CPU:0"
    assert decoded[0]["memory_total"] == psutil.virtual_memory().total
    expected = {
        "kind",
        "name",
        "tf_name",
        "memory_total",
        "memory_used",
        "memory_free",
        "memory_shared_with",
        "available",
        "reason",
        "details",
    }
    assert set(decoded[0]) == expected


def test_format_bytes() -> None:
    assert format_bytes(None) == NA
    assert format_bytes(512) == "512 B"
    assert format_bytes(int(15.6 * GIB)) == "15.6 GiB"
    assert format_bytes(3 * 2**40) == "3.0 TiB"


def test_importing_devices_does_not_import_tensorflow() -> None:
    script = "import sys, core.machine.inspect, core.machine.gpu, core.machine.tpu; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --- GPUs, through FakeNvml ----------------------------------------------------------------------


def test_gpu_seen_by_driver_but_not_tensorflow_is_unavailable_with_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    use_nvml(monkeypatch, FakeNvml(h100("00000000:41:00.0", used_gib=20, temp=61), h100("00000000:01:00.0", used_gib=1)))
    report = inspect_devices(probe_tpu=False)
    gpus = [d for d in report.devices if d.kind == "GPU"]
    assert len(gpus) == 2
    first = gpus[0]
    assert not first.available and first.tf_name == ""
    assert "tensorflow[and-cuda]" in first.reason
    assert (first.memory_total, first.memory_used, first.memory_free) == (80 * GIB, 20 * GIB, 60 * GIB)
    assert first.details["Memory total"] == "80.0 GiB" and first.details["Memory free"] == "60.0 GiB"
    assert first.details["PCI bus id"] == "0000:41:00.0"
    assert first.details["Temperature"] == "61 °C" and first.details["Power draw"] == "250 W"
    assert first.details["Driver version"] == "550.54.15" and first.details["CUDA (driver supports)"] == "12.4"
    assert gpus[1].details["Temperature"] == NA  # the driver raised for this field; the row is still listed
    note = next(n for n in report.notes if n.startswith("No GPU visible to TensorFlow"))
    assert "driver sees 2 GPU(s)" in note


def test_refresh_rereads_gpu_usage_and_leaves_other_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml(h100("00000000:41:00.0", used_gib=20))
    use_nvml(monkeypatch, nvml)
    devices = list_devices()
    nvml.gpus[0].update(used=50 * GIB, util=99)
    refreshed = refresh_gpu_usage(devices)
    gpu = next(d for d in refreshed if d.kind == "GPU")
    assert (gpu.memory_used, gpu.memory_free) == (50 * GIB, 30 * GIB)
    assert gpu.details["Utilisation"] == "99 %" and gpu.details["Memory used"] == "50.0 GiB"
    assert list(gpu.details) == list(next(d for d in devices if d.kind == "GPU").details)  # same order
    assert [d for d in refreshed if d.kind == "CPU"] == [d for d in devices if d.kind == "CPU"]


def test_refresh_matches_gpus_on_the_bus_id_field_not_the_details(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml(h100("00000000:01:00.0", used_gib=1), h100("00000000:41:00.0", used_gib=20))
    use_nvml(monkeypatch, nvml)
    monkeypatch.setattr(gpu_info, "cuda_bus_ids", lambda: {0: "0000:41:00.0", 1: "0000:01:00.0"})
    rows, _ = gpu_info.gpu_rows(fake_tf(physical=2))
    assert [r.bus_id for r in rows] == ["0000:41:00.0", "0000:01:00.0"]
    unlabelled = [replace(row, details={}) for row in rows]  # no "PCI bus id" label to go by
    refreshed = by_name(refresh_gpu_usage(unlabelled))
    assert refreshed["GPU:0"].memory_used == 20 * GIB and refreshed["GPU:1"].memory_used == 1 * GIB
    assert refresh_gpu_usage([replace(rows[0], bus_id="")]) == [replace(rows[0], bus_id="")]  # no bus id: unchanged


def test_tf_gpus_matched_to_driver_gpus_by_pci_bus_id(monkeypatch: pytest.MonkeyPatch) -> None:
    # NVML lists GPUs in PCI order; CUDA (and so TF) here numbers them the other way round.
    use_nvml(monkeypatch, FakeNvml(h100("00000000:01:00.0", used_gib=1), h100("00000000:41:00.0", used_gib=20)))
    monkeypatch.setattr(gpu_info, "cuda_bus_ids", lambda: {0: "0000:41:00.0", 1: "0000:01:00.0"})
    rows, notes = gpu_info.gpu_rows(fake_tf(physical=2))
    gpus = by_name(rows)
    assert set(gpus) == {"GPU:0", "GPU:1"} and notes == []
    assert gpus["GPU:0"].details["PCI bus id"] == "0000:41:00.0" and gpus["GPU:0"].memory_used == 20 * GIB
    assert gpus["GPU:1"].memory_used == 1 * GIB
    assert all(g.available and g.details["Compute capability"] == "9.0" for g in rows)
    assert gpus["GPU:0"].details["CUDA (TensorFlow build)"] == "12.5.1"


def test_gpu_hidden_by_set_visible_devices_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    use_nvml(monkeypatch, FakeNvml(h100("00000000:01:00.0", used_gib=1), h100("00000000:41:00.0", used_gib=2)))
    monkeypatch.setattr(gpu_info, "cuda_bus_ids", lambda: {0: "0000:01:00.0", 1: "0000:41:00.0"})
    rows, _ = gpu_info.gpu_rows(fake_tf(physical=2, visible=1))
    hidden = [row for row in rows if not row.available]
    assert len(hidden) == 1 and hidden[0].details["PCI bus id"] == "0000:41:00.0"
    assert "set_visible_devices" in hidden[0].reason


def test_split_gpu_rows_share_the_physical_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    use_nvml(monkeypatch, FakeNvml(h100("00000000:01:00.0", used_gib=4)))
    monkeypatch.setattr(gpu_info, "cuda_bus_ids", lambda: {})  # index order fallback
    rows, _ = gpu_info.gpu_rows(fake_tf(physical=1, logical_per_gpu=2))
    assert [r.tf_name for r in rows] == ["GPU:0", "GPU:1"]
    assert rows[1].details["Logical device"] == "2 of 2 (split of one physical GPU)"
    assert rows[0].details["Memory limit (TensorFlow)"] == "1.0 GiB"
    assert all(r.memory_total == 80 * GIB for r in rows)


def test_gpu_without_nvml_uses_tensorflow_allocator(monkeypatch: pytest.MonkeyPatch) -> None:
    use_nvml(monkeypatch, None, gpu_info.NO_DRIVER)
    monkeypatch.setattr(gpu_info, "cuda_bus_ids", lambda: {0: "0000:01:00.0"})
    rows, notes = gpu_info.gpu_rows(fake_tf(physical=1))
    (gpu,) = rows
    assert gpu.available and gpu.name == "NVIDIA H100 80GB HBM3" and notes == []
    assert (gpu.memory_total, gpu.memory_used, gpu.memory_free) == (None, 3 * 2**20, None)
    assert gpu.details["Memory total"] == "total unknown (NVML not available)"
    assert gpu.details["Driver version"] == NA and gpu.details["PCI bus id"] == "0000:01:00.0"
    assert refresh_gpu_usage(rows) == rows


def test_bus_ids_from_nvml_and_cuda_compare_equal() -> None:
    assert gpu_info.normalize_bus_id(b"00000000:0A:00.0") == gpu_info.normalize_bus_id("0000:0a:00.0") == "0000:0a:00.0"


# --- TPUs, through a fake /sys and /dev ------------------------------------------------------------


def fake_pci_device(root: Path, slot: str, vendor: str, device: str, pci_class: str) -> None:
    folder = root / slot
    folder.mkdir(parents=True)
    for name, value in {"vendor": vendor, "device": device, "class": pci_class, "subsystem_device": "0x0000"}.items():
        (folder / name).write_text(value + "\n")


def test_detect_tpu_cheaply_reads_pci_and_dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pci, dev = tmp_path / "pci", tmp_path / "dev"
    fake_pci_device(pci, "0000:00:04.0", "0x1ae0", "0x005e", "0x120000")  # TPU v4
    fake_pci_device(pci, "0000:00:05.0", "0x1ae0", "0x0042", "0x020000")  # gVNIC network card: not a hint
    fake_pci_device(pci, "0000:00:06.0", "0x10de", "0x2330", "0x030200")  # an NVIDIA GPU
    (dev / "accel").mkdir(parents=True)  # /dev/accel/ folder (Intel NPU): not a hint
    (dev / "accel0").touch()
    monkeypatch.setattr(tpu, "PCI_DEVICES", str(pci))
    monkeypatch.setattr(tpu, "DEV", str(dev))
    hint = detect_tpu_cheaply()
    assert "1 x TPU v4 on PCI" in hint and str(dev / "accel0") in hint
    assert "0x0042" not in hint and "accel," not in hint
    assert tpu.accelerator_type() == "TPU v4"

    monkeypatch.setattr(tpu, "PCI_DEVICES", str(tmp_path / "none"))
    monkeypatch.setattr(tpu, "DEV", str(tmp_path / "none"))
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.0.0.2:8470")
    assert detect_tpu_cheaply() == "COLAB_TPU_ADDR=10.0.0.2:8470"


def test_hinted_tpu_that_fails_the_probe_is_listed_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def failing_probe(address: str, timeout_s: float) -> TpuProbe:
        calls.append(address)
        return TpuProbe(False, "No TPU answered at 'local' within 30 s.", elapsed_s=30.0)

    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v3-8")
    monkeypatch.setattr(tpu, "probe_tpu", failing_probe)
    report = inspect_devices(probe_tpu=True)
    (row,) = [d for d in report.devices if d.kind == "TPU"]
    assert calls == ["local"]
    assert not row.available and row.name == "TPU v3-8" and "within 30 s" in row.reason
    (note,) = [n for n in report.note_records if n.topic is NoteTopic.TPU_UNUSED]
    assert "TPU_ACCELERATOR_TYPE=v3-8" in note.text

    report = inspect_devices(probe_tpu=False)
    assert calls == ["local"]  # no second probe
    assert "Not probed" in next(d for d in report.devices if d.kind == "TPU").reason


def test_probe_success_report_becomes_one_row_per_core(monkeypatch: pytest.MonkeyPatch, silent_tpu_address) -> None:
    names = [f"/job:worker/replica:0/task:0/device:TPU:{i}" for i in range(8)]
    fake_child = f"from core.child_process import reply; reply({{'ok': True, 'devices': {names!r}}})"
    monkeypatch.setattr(tpu, "_CHILD_SCRIPT", fake_child)  # stands in for a TPU that initialises
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v3-8")
    result = probe_tpu(silent_tpu_address, timeout_s=10)  # a port that accepts: the (fake) child decides
    assert result.ok and result.message == "TPU v3-8: 8 cores"
    assert [d.tf_name for d in result.devices] == [f"TPU:{i}" for i in range(8)]
    assert result.devices[0].memory_total == 16 * GIB and result.devices[0].details["Cores"] == "8"


def test_probe_address_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tpu.default_address() == "local"
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    assert tpu.default_address() == "my-tpu"
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.0.0.2:8470")
    assert tpu.default_address() == "grpc://10.0.0.2:8470"


def test_tpu_memory_per_core_from_type() -> None:
    assert tpu.memory_per_core("TPU v3-8") == 16 * GIB
    assert tpu.memory_per_core("TPU v5litepod-16") == 16 * GIB
    assert tpu.memory_per_core("TPU v5p-8") == 95 * GIB
    assert tpu.memory_per_core("TPU") is None
