"""The optimizer a model file was compiled with: read as JSON, rebuilt fresh for a run.

A `.keras` keeps it in `compile_config["optimizer"]` (a Keras 3 config); an `.h5`
from tf.keras 2 in `training_config["optimizer_config"]` ("Custom>RMSprop", with
arguments Keras 3 no longer takes, such as `jit_compile`). `optimizer_settings`
reads either without TensorFlow (for the description and the memory estimate);
`build_optimizer` makes a fresh Keras 3 optimizer of that class and settings
(its state is never restored: a run starts from step 0).
"""

from __future__ import annotations

import inspect
import math
from typing import Any

from core.config import ConfigError, RunConfig

SHOWN_SETTINGS = (
    "learning_rate",
    "momentum",
    "nesterov",
    "rho",
    "beta_1",
    "beta_2",
    "epsilon",
    "amsgrad",
    "centered",
    "weight_decay",
    "clipnorm",
    "clipvalue",
    "global_clipnorm",
    "use_ema",
)


def optimizer_name(config: Any) -> str | None:
    """The optimizer's class name in lower case ("rmsprop"), from a config or a plain name; None when there is none."""
    if isinstance(config, str):
        return config.lower()
    if isinstance(config, dict) and isinstance(config.get("class_name"), str):
        return config["class_name"].split(">")[-1].lower()
    return None


def optimizer_settings(config: Any) -> dict[str, Any]:
    """The settings worth showing (learning rate, and momentum, centered, ... where set), JSON values only; a schedule is named."""
    inner = config.get("config") if isinstance(config, dict) else None
    if not isinstance(inner, dict):
        return {}
    settings: dict[str, Any] = {}
    for key in SHOWN_SETTINGS:
        value = inner.get(key)
        if isinstance(value, dict):
            settings[key] = f"schedule {value.get('class_name', '?')}"
        elif isinstance(value, (bool, int, float)) and (value or key == "learning_rate"):
            settings[key] = round(value, 9) if isinstance(value, float) else value
    return settings


def build_optimizer(config: Any) -> tuple[Any, list[str]]:
    """A fresh Keras 3 optimizer for the file's config, and the arguments dropped because Keras 3 has none by that name.

    Raises ValueError when Keras 3 has no optimizer of that class.
    """
    import keras

    name = config.split(">")[-1] if isinstance(config, str) else str(config.get("class_name", "")).split(">")[-1]
    cls = {attr.lower(): getattr(keras.optimizers, attr) for attr in dir(keras.optimizers)}.get(name.lower())
    if not (inspect.isclass(cls) and issubclass(cls, keras.optimizers.Optimizer)):
        raise ValueError(f"Keras 3 has no optimizer {name!r}")
    inner = dict(config.get("config") or {}) if isinstance(config, dict) else {}
    accepted = set(inspect.signature(cls.__init__).parameters)
    dropped = sorted(key for key in inner if key not in accepted)
    kwargs = {key: value for key, value in inner.items() if key in accepted}
    if isinstance(kwargs.get("learning_rate"), dict):
        kwargs["learning_rate"] = keras.optimizers.schedules.deserialize(kwargs["learning_rate"])
    return cls(**kwargs), dropped


def learning_rate_used(optimizer: Any) -> float | None:
    """The learning rate `optimizer` takes its first step at (a schedule's at step 0), to float32's 7 significant digits
    (0.05, not 0.0500000007); None when it cannot say."""
    import keras

    try:
        value = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
    except Exception:  # an optimizer without a readable learning rate: the run's stays recorded
        return None
    return float(f"{value:.7g}") if math.isfinite(value) else None


def with_learning_rate_used(config: RunConfig, used: float | None) -> RunConfig:
    """`config` recording the learning rate its run really trained with (a model file's own optimizer brings its own);
    unchanged when that is unknown, the same to float32's precision (the run's own), or outside what a RunConfig takes."""
    if used is None or math.isclose(used, config.learning_rate, rel_tol=1e-6):
        return config
    try:
        return config.with_changes(learning_rate=used)
    except ConfigError:
        return config
