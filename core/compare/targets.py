"""Where the rows of a comparison run: targets parsed from text, and the targets of a scaling sweep."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from core.config import BACKENDS, MAX_WORKERS, ConfigError, RunConfig, check_host_cpus, is_whole_number, normalize_device_name

TARGET_FORMS = (
    "'CPU:0', 'GPU:1', 'one-device:GPU:0', 'mirrored' (all GPUs), 'mirrored:CPU:0,CPU:1', 'default', "
    "'multi-worker:2', 'tpu:local' or 'tpu:grpc://host:port', each optionally after a backend: 'jax:CPU:0', "
    "'torch:CPU:0', 'jax:mirrored:CPU:0,CPU:1' (JAX data parallel over that many XLA CPU devices); separate targets with ';'"
)
DEVICE_KINDS = ("CPU", "GPU", "TPU")


@dataclass(frozen=True)
class CompareTarget:
    """Where one row of a comparison runs: a strategy and its devices (plus workers or TPU address)."""

    label: str
    strategy: str
    devices: tuple[str, ...] = ()
    workers: int | None = None
    tpu_address: str = ""
    backend: str = ""  # "" keeps the job's backend

    def config_for(self, base: RunConfig) -> RunConfig:
        """`base` moved to this target (raises ConfigError when the combination is invalid)."""
        changes: dict[str, Any] = {"strategy": self.strategy, "devices": self.devices}
        if self.backend:
            changes["backend"] = self.backend
        if self.workers is not None:
            changes["workers"] = self.workers
        if self.tpu_address:
            changes["tpu_address"] = self.tpu_address
        return base.with_changes(**changes)


def parse_targets(text: str) -> list[CompareTarget]:
    """'CPU:0;mirrored:CPU:0,CPU:1' -> targets; ConfigError names the bad part and the allowed forms."""
    parts = [part.strip() for part in re.split(r"[;\n]", text or "") if part.strip()]
    if not parts:
        raise ConfigError("targets", text, "one or more of " + TARGET_FORMS)
    targets = []
    for part in parts:
        try:
            targets.append(parse_target(part))
        except ConfigError:
            _refuse_commas_between_targets(part)
            raise
    return targets


def _refuse_commas_between_targets(part: str) -> None:
    """'CPU:0,GPU:0', every comma-separated piece a target of its own: ConfigError suggesting 'CPU:0;GPU:0'. A target whose
    form lists devices with commas (mirrored, one-device) is left to its own refusal."""
    pieces = [piece.strip() for piece in part.split(",")]
    if len(pieces) < 2 or not all(pieces) or re.search(r"mirrored|one-device", part, re.IGNORECASE):
        return
    try:
        for piece in pieces:
            parse_target(piece)
    except ConfigError:
        return
    suggestion = ";".join(pieces)
    raise ConfigError(
        "targets", part, f"{suggestion!r}: targets are separated with ';' (commas list one target's devices: 'mirrored:CPU:0,CPU:1')"
    )


def parse_target(text: str) -> CompareTarget:
    """One target such as 'GPU:0', 'mirrored:CPU:0,CPU:1', 'multi-worker:2', 'tpu:local', or one of them after a backend ('jax:CPU:0')."""
    spec = text.strip()
    word, _, rest = spec.partition(":")
    if word.strip().lower() in BACKENDS:
        backend = word.strip().lower()
        target = _parse_place(rest.strip()) if rest.strip() else CompareTarget("default", "default")
        check_host_cpus(target.devices, backend, "targets", spec)
        return replace(target, label=f"{backend}:{target.label}", backend=backend)
    return _parse_place(spec)


def _parse_place(spec: str) -> CompareTarget:
    """A target without a backend: 'GPU:0', 'mirrored:CPU:0,CPU:1', 'multi-worker:2' or 'tpu:local'."""
    word, _, rest = spec.partition(":")
    word, rest = word.strip().lower(), rest.strip()
    if word == "default" and not rest:
        return CompareTarget("default", "default")
    if word == "mirrored":
        devices = _device_list(rest, spec) if rest else ()
        return CompareTarget("mirrored:" + ",".join(devices) if devices else "mirrored", "mirrored", devices)
    if word == "one-device" and rest:
        devices = _device_list(rest, spec)
        if len(devices) == 1:
            return CompareTarget(devices[0], "one-device", devices)
    if word == "multi-worker":
        if not rest:
            return CompareTarget("multi-worker", "multi-worker")
        if is_whole_number(rest) and 1 <= int(rest) <= MAX_WORKERS:
            return CompareTarget(f"multi-worker:{int(rest)}", "multi-worker", workers=int(rest))
    if word == "tpu" and rest and not is_whole_number(rest):
        return CompareTarget(f"tpu:{rest}", "tpu", tpu_address=rest)
    if word.upper() in DEVICE_KINDS and is_whole_number(rest):
        device = normalize_device_name(spec)
        return CompareTarget(device, "one-device", (device,))
    raise ConfigError("targets", spec, TARGET_FORMS)


def parse_target_option(text: str, option: str) -> CompareTarget:
    """`parse_target` for a command-line option: a bad target is a ConfigError naming `option` and the allowed forms."""
    try:
        return parse_target(text)
    except ConfigError as exc:
        raise ConfigError(option, text, TARGET_FORMS) from exc


def _device_list(text: str, spec: str) -> tuple[str, ...]:
    names = [name.strip() for name in text.split(",")]
    if not all(re.fullmatch(r"[A-Za-z]+:\d+", name) and name.split(":")[0].upper() in DEVICE_KINDS for name in names):
        raise ConfigError("targets", spec, "device lists such as 'mirrored:CPU:0,CPU:1' or 'mirrored:GPU:0,GPU:1'")
    return tuple(normalize_device_name(name) for name in names)


def sweep_targets(device_names: Sequence[str], counts: Sequence[int]) -> list[CompareTarget]:
    """One device alone (one-device strategy), then Mirrored over the first N for each N > 1."""
    targets = []
    for count in counts:
        devices = tuple(device_names[:count])
        if count == 1:
            targets.append(CompareTarget(devices[0], "one-device", devices))
        else:
            targets.append(CompareTarget(f"mirrored x{count}: " + ",".join(devices), "mirrored", devices))
    return targets
