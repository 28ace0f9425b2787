"""Autotune's backend stage: which other Keras backends a search tries, what their points cost, what the result says.

Each point on JAX or PyTorch starts a child process that imports its backend,
so the stage is off unless asked for (`--backends`), and a point's set-up is
estimated per backend (a TensorFlow point's says nothing about a JAX point's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CHILD_SETUP_GUESS_S = 10.0
"""Set-up and warm-up of a point on another backend before any was timed: a child process starts and imports it."""
BACKENDS_OFF_NOTE = "backend not tuned: add --backends tensorflow,jax to try others (each such point starts a child process)"


def other_backends(job_backend: str, backends: Sequence[str]) -> tuple[str, ...]:
    """The backends to try besides the job's own, each once, in the order given."""
    return tuple(backend for backend in dict.fromkeys(backends) if backend != job_backend)


def setup_key(settings: dict[str, Any], job_backend: str) -> tuple[str, bool]:
    """What a point's set-up time depends on: its backend and whether it compiles with XLA."""
    return settings.get("backend", job_backend), settings["xla"]


def setup_guess(key: tuple[str, bool], tensorflow_guess: float) -> float:
    """A point's set-up before any like it was timed: TensorFlow's guess, at least a child's start on another backend."""
    backend, _ = key
    return max(tensorflow_guess, CHILD_SETUP_GUESS_S if backend != "tensorflow" else 0.0)


def backends_note(job_backend: str, tried: Sequence[str]) -> str:
    """What the result says about backends: those tried, or that none was."""
    return "backends tried: " + ", ".join((job_backend, *tried)) if tried else BACKENDS_OFF_NOTE
