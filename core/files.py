"""Files written whole or not at all: a temporary file beside the target, renamed over it once complete."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def write_atomically(path: Path, write: Callable[[IO[str]], Any]) -> None:
    """Call `write(file)` on a new temporary file next to `path`, fsync it, then rename it to `path`.

    The temporary file gets the usual permissions (0666 less the umask) and is
    removed when anything fails, so `path` is either the whole new content or as
    it was before. OSError (a missing folder, a full disk) propagates.
    """
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(descriptor, "w", newline="", encoding="utf-8") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
