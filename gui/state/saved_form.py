"""The run form's state as the settings keep it, and as the previous version kept it.

`saved_values(state)` is what Device Lab saves: the user's choices by field name (JSON-ready), never what the app
knows. `read_saved(data)` checks each saved value (its kind, its choices, its range) and returns the values to set
and the problems to say; `apply_saved` sets them in the form's order (the model before its data set).

`read_previous(values)` reads the layout of the version before the state: one text per form widget under its
objectName in the "runForm" group ("runForm/batchSizeEdit" = "64", a device list as a JSON list) and the hooks'
options under "logging/". The confirmation to run local workers reachable from the network is not carried over:
the form asks for it each session. An empty TensorBoard folder is not restored: the box offers its own again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.config import (
    BACKENDS,
    FILE_OPTIMIZER,
    MAX_CLUSTER_TIMEOUT_S,
    MAX_STEPS,
    MAX_TPU_TIMEOUT_S,
    MAX_WORKERS,
    MIN_CLUSTER_TIMEOUT_S,
    MIN_TPU_TIMEOUT_S,
    OPTIMIZERS,
    PRECISIONS,
    STRATEGIES,
)
from core.workloads.models import MODELS
from core.workloads.workload import is_model_file
from gui.state.run_form import LENGTH_UNITS, RunFormState

CHOICES: dict[str, tuple[str, ...]] = {
    "backend": BACKENDS,
    "strategy": STRATEGIES,
    "length_unit": LENGTH_UNITS,
    "optimizer": (*OPTIMIZERS, FILE_OPTIMIZER),
    "precision": PRECISIONS,
}
RANGES: dict[str, tuple[int, int]] = {
    "workers": (1, MAX_WORKERS),
    "cluster_timeout_s": (MIN_CLUSTER_TIMEOUT_S, MAX_CLUSTER_TIMEOUT_S),
    "tpu_timeout_s": (MIN_TPU_TIMEOUT_S, MAX_TPU_TIMEOUT_S),
    "profile_first": (1, MAX_STEPS),
    "profile_last": (1, MAX_STEPS),
}
PREVIOUS_FORM_GROUP = "runForm/"  # where the previous version kept a value per form widget (all of them are replaced)
PREVIOUS_KEYS = {  # the previous version's settings key -> the state's field
    "runForm/modelCombo": "model",
    "runForm/datasetCombo": "dataset",
    "runForm/vocabEdit": "vocab",
    "runForm/backendCombo": "backend",
    "runForm/strategyCombo": "strategy",
    "runForm/deviceCombo": "device",
    "runForm/deviceList": "mirrored_devices",
    "runForm/workersSpin": "workers",
    "runForm/clusterTimeoutSpin": "cluster_timeout_s",
    "runForm/tpuAddressEdit": "tpu_address",
    "runForm/tpuTimeoutSpin": "tpu_timeout_s",
    "runForm/batchSizeEdit": "batch_size",
    "runForm/stepsEdit": "length",
    "runForm/stepsUnitCombo": "length_unit",
    "runForm/learningRateEdit": "learning_rate",
    "runForm/optimizerCombo": "optimizer",
    "runForm/precisionCombo": "precision",
    "runForm/xlaCheck": "xla",
    "runForm/stepsPerCallEdit": "steps_per_call",
    "logging/tensorboard": "tensorboard",
    "logging/tensorboard_dir": "tensorboard_dir",
    "logging/profile": "profile",
    "logging/profile_first": "profile_first",
    "logging/profile_last": "profile_last",
}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_DEFAULTS = RunFormState()

Problem = tuple[str, object, str]  # (the saved key or field, its value, what was expected)


def saved_values(state: RunFormState) -> dict[str, Any]:
    """The user's choices by field name, JSON-ready (a tuple as a list)."""
    return {name: _json_ready(getattr(state, name)) for name in RunFormState.saved_fields()}


def read_saved(data: object) -> tuple[dict[str, Any], list[Problem]]:
    """The values of saved `data` (a JSON object by field name) the state can take, and the problems of the others.

    A name the state lacks (saved by a later version) is left out quietly.
    """
    if not isinstance(data, Mapping):
        return {}, [("", data, "a JSON object of the run form's choices")]
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    for name in RunFormState.saved_fields():
        if name not in data:
            continue
        value, expected = _checked(name, data[name])
        if expected:
            problems.append((name, data[name], expected))
        elif _kept(name, value):
            values[name] = value
    return values, problems


def read_previous(saved: Mapping[str, object]) -> tuple[dict[str, Any], list[Problem]]:
    """The values of the previous version's settings (`saved`: its keys in PREVIOUS_KEYS, as QSettings reads them)."""
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, name in PREVIOUS_KEYS.items():
        raw = saved.get(key)
        if raw is None:
            continue
        value, expected = _checked(name, _from_text(name, raw))
        if expected:
            problems.append((key, raw, expected))
        elif _kept(name, value):
            values[name] = value
    return values, problems


def apply_saved(state: RunFormState, values: Mapping[str, Any]) -> None:
    """Set the state's fields from checked `values`, in the form's order (the model before its data set)."""
    for name in RunFormState.saved_fields():
        if name in values:
            setattr(state, name, values[name])


def _kept(name: str, value: object) -> bool:
    """Whether a saved value is restored (an empty TensorBoard folder gives way to the box's own)."""
    return not (name == "tensorboard_dir" and value == "")


def _checked(name: str, value: object) -> tuple[Any, str]:
    """(the value as the state holds it, "") or (None, what was expected)."""
    default = getattr(_DEFAULTS, name)
    if isinstance(default, bool):
        return (value, "") if isinstance(value, bool) else (None, "true or false")
    if isinstance(default, int):
        low, high = RANGES[name]
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return (value, "") if ok else (None, f"a whole number from {low} to {high}")
    if isinstance(default, tuple):
        if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
            return tuple(value), ""
        return None, "a list of device names"
    if not isinstance(value, str):
        return None, "a text"
    if name in CHOICES and value not in CHOICES[name]:
        return None, f"one of {', '.join(CHOICES[name])}"
    if name == "model" and value not in MODELS and not is_model_file(value):
        return None, f"a sample model ({', '.join(MODELS)}) or a model file's path"
    return value, ""


def _from_text(name: str, raw: object) -> object:
    """A previous version's text value as the field's kind (left as it is when it does not read as one)."""
    if not isinstance(raw, str):
        return raw
    default = getattr(_DEFAULTS, name)
    text = raw.strip()
    if isinstance(default, bool):
        return True if text.lower() in _TRUE else False if text.lower() in _FALSE else raw
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            return raw
    if isinstance(default, tuple):
        try:
            return json.loads(text)
        except ValueError:
            return raw
    return raw


def _json_ready(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
