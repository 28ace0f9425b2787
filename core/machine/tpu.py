"""TPU rows: a cheap look for TPU hardware, then (only if there is a hint) a time-boxed probe.

TF's TPU initialisation against an address where nothing listens hangs for minutes, and a
TPU initialised in this process stays claimed by it. So the probe runs TPUClusterResolver +
initialize_tpu_system in a child Python process (`sys.executable -c`, run by
`core.child_process.Child`), which says each stage and replies with the outcome, and is
killed with its process group when time runs out.
"""

from __future__ import annotations

import glob
import os
import re
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from core.child_process import STOPPED, TIMEOUT, Child
from core.machine.types import NA, DeviceInfo, Note, NoteTopic, TpuProbe, short_name, try_read

GOOGLE_PCI_VENDOR = "0x1ae0"
PCI_DEVICES = "/sys/bus/pci/devices"
IOMMU_GROUPS = "/sys/kernel/iommu_groups"
DEV = "/dev"
TPU_ENV_VARS = ("TPU_NAME", "COLAB_TPU_ADDR", "TPU_ACCELERATOR_TYPE")
PROBE_TIMEOUT_S = 30.0
STOP_POLL_S = 0.2
QUICK_CHECK_S = 2.0  # a grpc:// address that neither accepts nor refuses a connection by then gets the full probe

# Google PCI device id -> TPU generation (v2 and v3 share 0x0027; the subsystem id tells them apart).
_TPU_PCI_IDS = {"0x005e": "v4", "0x0062": "v5p", "0x0063": "v5e", "0x006f": "v6e"}
_V2_V3_SUBSYSTEMS = {"0x004e": "v2", "0x004f": "v3"}
# HBM per TensorFlow TPU core (v2/v3 chips hold two cores, later chips one), from Cloud TPU specs.
_HBM_PER_CORE_GIB = {"v2": 8, "v3": 16, "v4": 32, "v5e": 16, "v5p": 95, "v6e": 32}

NO_TPU_NOTE = (
    "No TPU: no TPU hardware found (no PCI device with vendor 0x1ae0, no /dev/accel*, TPU_NAME not set). "
    "On a Cloud TPU VM or a Colab TPU runtime it shows up here by itself; to use a remote TPU, "
    "connect with an address in the Run panel ('local', a TPU name, or grpc://host:8470)."
)
NO_TPU_RUNTIME_FIX = (
    "This TensorFlow has no TPU runtime: on a Cloud TPU VM install the TPU build "
    "(`pip install tensorflow-tpu -f https://storage.googleapis.com/libtpu-tf-releases/index.html`)."
)
_CHILD_SCRIPT = r"""
import sys
from core.child_process import listen_to_parent, reply, stage

listen_to_parent()
stage("importing TensorFlow")
import tensorflow as tf

address = sys.argv[1]
try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
    if address != "local":
        stage("connecting to " + address)
        tf.config.experimental_connect_to_cluster(resolver)
    stage("initialising the TPU system")
    topology = tf.tpu.experimental.initialize_tpu_system(resolver)
    names = [d.name for d in tf.config.list_logical_devices("TPU")]
    reply(dict(ok=True, devices=names, tasks=topology.num_tasks))
except Exception as error:
    reply(dict(ok=False, error=f"{type(error).__name__}: {error}"))
"""


def _read(path: str) -> str:
    return (try_read(lambda: Path(path).read_text()) or "").strip().lower()


def _pci_tpu_chips() -> list[str]:
    """One label per Google PCI accelerator: "TPU v4", or "Google PCI device 0x..." when unknown."""
    chips = []
    for device in sorted(glob.glob(os.path.join(PCI_DEVICES, "*"))):
        if _read(os.path.join(device, "vendor")) != GOOGLE_PCI_VENDOR:
            continue
        device_id = _read(os.path.join(device, "device"))
        generation = _TPU_PCI_IDS.get(device_id) or (
            _V2_V3_SUBSYSTEMS.get(_read(os.path.join(device, "subsystem_device"))) if device_id == "0x0027" else None
        )
        if generation:
            chips.append(f"TPU {generation}")
        elif not _read(os.path.join(device, "class")).startswith(("0x01", "0x02")):  # skip gVNIC NICs, disks
            chips.append(f"Google PCI device {device_id}")
    return chips


def _google_vfio_groups() -> list[str]:
    """VFIO groups (/dev/vfio/N) holding a Google device, or whose owner cannot be read."""
    groups = []
    for path in sorted(glob.glob(os.path.join(DEV, "vfio", "[0-9]*"))):
        vendors = {_read(v) for v in glob.glob(os.path.join(IOMMU_GROUPS, os.path.basename(path), "devices", "*", "vendor"))}
        if not vendors or GOOGLE_PCI_VENDOR in vendors:
            groups.append(path)
    return groups


def detect_tpu_cheaply() -> str:
    """What hints at a TPU on this machine; empty when nothing does. Reads a few files (milliseconds).

    /dev/accel0.. is how TPU v4+ chips appear; /dev/accel/ (a folder: Intel NPU, Habana)
    and VFIO groups of other vendors' devices are not hints.
    """
    hints = [f"{count} x {label} on PCI" for label, count in Counter(_pci_tpu_chips()).items()]
    accel = sorted(glob.glob(os.path.join(DEV, "accel[0-9]*")))
    if accel:
        hints.append("device files " + ", ".join(accel))
    vfio = _google_vfio_groups()
    if vfio:
        hints.append("VFIO groups " + ", ".join(vfio))
    hints += [f"{name}={os.environ[name]}" for name in TPU_ENV_VARS if os.environ.get(name)]
    return "; ".join(hints)


def accelerator_type() -> str:
    """The best name this machine gives for its TPU: "TPU v4-8" from the environment, else the chip, else "TPU"."""
    env_type = os.environ.get("TPU_ACCELERATOR_TYPE", "").strip()
    if env_type:
        return f"TPU {env_type}"
    chips = [chip for chip in _pci_tpu_chips() if chip.startswith("TPU ")]
    return chips[0] if chips else "TPU"


def default_address() -> str:
    """Where the environment says the TPU is: COLAB_TPU_ADDR, else TPU_NAME, else "local"."""
    if os.environ.get("COLAB_TPU_ADDR"):
        return "grpc://" + os.environ["COLAB_TPU_ADDR"]
    return os.environ.get("TPU_NAME") or "local"


def memory_per_core(tpu_type: str) -> int | None:
    """Spec HBM per TF core in bytes for "TPU v3-8" / "TPU v5litepod-16" / "TPU v4"; None when unknown."""
    match = re.search(r"v(\d+)(litepod|[a-z])?\b", tpu_type.lower())
    if not match:
        return None
    suffix = "e" if match.group(2) == "litepod" else match.group(2) or ""
    gib = _HBM_PER_CORE_GIB.get(f"v{match.group(1)}{suffix}")
    return gib * 2**30 if gib else None


def _core_rows(names: list[str], tpu_type: str, address: str) -> tuple[DeviceInfo, ...]:
    memory = memory_per_core(tpu_type)
    memory_text = f"{memory / 2**30:.0f} GiB (spec)" if memory else NA
    return tuple(
        DeviceInfo(
            "TPU",
            tpu_type,
            short_name(name),
            memory,
            None,
            None,
            {"Type": tpu_type, "Cores": str(len(names)), "Memory per core": memory_text, "Address": address, "TF device": name},
        )
        for name in names
    )


def _failure_message(address: str, error: str) -> str:
    first_line = error.strip().splitlines()[0] if error.strip() else "the probe ended without a result"
    if len(first_line) > 200:  # TF errors append the failing op's attributes; keep the first sentence
        first_line = first_line.split(". ")[0][:200] + "."
    message = f"TPU at {address!r} could not be initialised: {first_line}"
    if "TPUs not found" in error or "No OpKernel was registered" in error:
        return f"{message} {NO_TPU_RUNTIME_FIX}"
    return f"{message} Check the address ('local' on a Cloud TPU VM, a TPU name, or grpc://host:8470)."


def _timeout_message(address: str, timeout_s: float, stage: str) -> str:
    if stage in ("", "importing TensorFlow"):
        return f"The TPU probe did not finish importing TensorFlow within {timeout_s:g} s; try again with a longer timeout."
    return (
        f"No TPU answered at {address!r} within {timeout_s:g} s (stopped while {stage}). Check the address "
        "('local' on a Cloud TPU VM, grpc://host:8470 for a TPU node) and that the TPU is running and reachable from here."
    )


def refused_at_once(address: str, timeout_s: float = QUICK_CHECK_S) -> str:
    """Why a 'grpc://host:port' address cannot be a TPU, known without TensorFlow; '' when it may be (or is no such address).

    A TCP connection that is refused, or a host name that does not resolve, fails
    in milliseconds, while TF's TPU initialisation would wait out the whole time limit.
    """
    match = re.fullmatch(r"grpc://\[?([^\]/]+?)\]?:(\d+)/?", address.strip())
    if not match:
        return ""
    host, port = match.group(1), int(match.group(2))
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return ""
    except ConnectionRefusedError:
        return f"Nothing listens at {host}:{port} (the connection was refused at once). Check the address and port (a TPU node uses 8470)."
    except socket.gaierror as error:
        return f"The host {host!r} of {address!r} is not known ({error.strerror}). Check the address."
    except OSError:  # no answer yet (a firewall, a slow network): the probe's own time limit decides
        return ""


def probe_tpu(address: str = "local", timeout_s: float = PROBE_TIMEOUT_S, stop_event: threading.Event | None = None) -> TpuProbe:
    """Connect to and initialise a TPU in a child process, killed after `timeout_s`.

    `address` is "local" (Cloud TPU VM), a TPU name, or "grpc://host:port". TF's TPU
    initialisation against an address where nothing listens hangs for minutes, so it
    never runs in this process; a grpc:// address that refuses connections fails
    at once (`refused_at_once`). Setting `stop_event` kills the child within
    STOP_POLL_S (a run stopped while its TPU is probed).
    """
    address = address.strip() or "local"
    start = time.monotonic()
    refused = refused_at_once(address, min(QUICK_CHECK_S, timeout_s))
    if refused:
        return TpuProbe(False, f"TPU at {address!r} could not be reached: {refused}", elapsed_s=time.monotonic() - start)
    try:
        child = Child(
            [sys.executable, "-c", _CHILD_SCRIPT, address],
            "the TPU probe",
            hide_gpus=True,  # the child must not claim GPUs
            limit_s=timeout_s,
            stop_event=stop_event,
            poll_s=STOP_POLL_S,
        )
    except OSError as exc:
        return TpuProbe(False, f"Could not start the TPU probe process ({exc}).")
    end = child.wait()
    elapsed = time.monotonic() - start
    last = child.result if isinstance(child.result, dict) else {}
    if end.how == STOPPED:
        return TpuProbe(False, f"The TPU probe of {address!r} was stopped after {elapsed:.1f} s.", elapsed_s=elapsed)
    if end.how == TIMEOUT:
        return TpuProbe(False, _timeout_message(address, timeout_s, end.doing), elapsed_s=elapsed)
    if last.get("ok") and last.get("devices"):
        tpu_type = accelerator_type()
        devices = _core_rows(last["devices"], tpu_type, address)
        return TpuProbe(True, f"{tpu_type}: {len(devices)} cores", devices, elapsed)
    if last.get("ok"):
        error = "initialised, but TensorFlow lists no TPU cores"
    else:
        error = last.get("error") or child.describe_end()
    return TpuProbe(False, _failure_message(address, error), elapsed_s=elapsed)


def tpu_rows(tf: Any, probe: bool) -> tuple[list[DeviceInfo], list[Note]]:
    """TF's TPU devices if it has some already; else probe when hardware is hinted at and `probe` is set (never without TF: `tf` None)."""
    existing = [d.name for d in try_read(lambda: tf.config.list_logical_devices("TPU")) or []] if tf is not None else []
    if existing:
        return list(_core_rows(existing, accelerator_type(), "connected")), []
    hint = detect_tpu_cheaply()
    if not hint:
        return [], [Note(NoteTopic.NO_TPU, NO_TPU_NOTE)]
    if tf is None:
        reason = "TensorFlow is not installed, so it cannot train on this TPU: pip install tensorflow (the TPU build on a Cloud TPU VM)."
    elif not probe:
        reason = f"Not probed yet: connect with address {default_address()!r} in the Run panel to check whether TensorFlow can use it."
    else:
        result = probe_tpu(default_address(), PROBE_TIMEOUT_S)
        if result.ok:
            return list(result.devices), []
        reason = result.message
    unusable = DeviceInfo("TPU", accelerator_type(), "", None, None, None, {"Seen": hint}, available=False, reason=reason)
    return [unusable], [Note(NoteTopic.TPU_UNUSED, f"TPU hardware seen ({hint}) but TensorFlow is not using it: {reason}")]
