"""Reading a `.keras` archive within limits: a hostile zip cannot take the time or the memory.

A `.keras` file is a zip: `config.json`, `metadata.json`, `model.weights.h5` and
maybe `assets/`. Every member the app reads has a cap (`MEMBER_CAPS`), checked
from the zip's directory before anything is inflated and enforced again while
reading in chunks (a directory can lie about sizes). The whole file and the sum
of its members' declared sizes have a cap too (`MAX_MODEL_FILE_BYTES`), so Keras's
own loader, which inflates members whole, only ever sees an archive checked here.
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any

MIB = 2**20
GIB = 2**30
MEMBER_CAPS = {"config.json": 64 * MIB, "metadata.json": 1 * MIB}
MAX_MODEL_FILE_BYTES = 16 * GIB  # the file itself, and its members inflated, added up
CHUNK_BYTES = 1 * MIB


class ArchiveLimitError(ValueError):
    """An archive past one of the limits, or unreadable; the message says which and what to do."""


def check_archive(path: str | os.PathLike) -> None:
    """Refuse a `.keras` archive over the size limits, from its directory alone (nothing inflated)."""
    size = os.path.getsize(path)
    if size > MAX_MODEL_FILE_BYTES:
        raise ArchiveLimitError(f"the file is {_gib(size)}, over Device Lab's limit of {_gib(MAX_MODEL_FILE_BYTES)} for a model file.")
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise ArchiveLimitError(f"not a readable .keras file ({exc}). Save the model again.") from None
    names = {info.filename for info in infos}
    if "config.json" not in names:
        raise ArchiveLimitError("a zip archive but not a Keras model (it has no config.json). Save the model with model.save().")
    for info in infos:
        _check_declared(info)
    inflated = sum(info.file_size for info in infos)
    if inflated > MAX_MODEL_FILE_BYTES:
        raise ArchiveLimitError(
            f"its members inflate to {_gib(inflated)}, over the limit of {_gib(MAX_MODEL_FILE_BYTES)}: "
            "a damaged or hostile archive (a zip bomb). Save the model again."
        )


def _check_declared(info: zipfile.ZipInfo) -> None:
    cap = MEMBER_CAPS.get(info.filename)
    if cap is not None and info.file_size > cap:
        raise ArchiveLimitError(_over_cap(info.filename, f"inflates to {_mib(info.file_size)}", cap))


def _over_cap(name: str, what: str, cap: int) -> str:
    return (
        f"its {name} {what}, over the limit of {_mib(cap)} for that member: a damaged or hostile archive "
        "(a zip bomb), not a model Keras saved. Save the model again."
    )


def read_member(path: str | os.PathLike, name: str) -> bytes:
    """The member `name` (one of MEMBER_CAPS) inflated chunk by chunk, never past its cap."""
    cap = MEMBER_CAPS[name]
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
        _check_declared(info)
        chunks, total = [], 0
        with archive.open(info) as stream:
            while chunk := stream.read(CHUNK_BYTES):
                total += len(chunk)
                if total > cap:
                    raise ArchiveLimitError(_over_cap(name, f"inflates past {_mib(cap)}", cap))
                chunks.append(chunk)
    return b"".join(chunks)


def read_json_member(path: str | os.PathLike, name: str) -> Any:
    """A JSON member (config.json, metadata.json) read within its cap; KeyError when the archive lacks it."""
    return json.loads(read_member(path, name))


def _mib(size: int) -> str:
    return f"{size / MIB:,.1f} MiB"


def _gib(size: int) -> str:
    return f"{size / GIB:,.1f} GiB"
