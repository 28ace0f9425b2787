"""Files written whole or not at all, and paths that are not regular files.

`write_atomically` writes a temporary file beside the target and renames it over
the target once complete (exports, the ceilings cache). It writes through a
symbolic link (the link stays, the file it points to gets the new content) and
never replaces what is not a regular file: a folder, a device (/dev/full), a
named pipe or a socket is refused with `NotARegularFile`, untouched.

`regular_file` is the same rule for reading: a path that is not a regular file
(a FIFO or /dev/zero would block or never end a read) is refused before anything
opens it. `os_error_words` says an OSError in words, a name over 255 bytes among them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

NAME_MAX = 255  # bytes in one name of a path (Linux, macOS; NTFS counts UTF-16 units)
PATH_MAX = 4096  # bytes in a whole path on Linux
_TEMPORARY_STEM_BYTES = 200  # of the target's name in its temporary's: `.{stem}.{8 hex}.tmp` stays within NAME_MAX

Writer = Callable[[IO[str]], Any]


class NotARegularFile(OSError):
    """The path is there but is not a regular file (a folder, a device, a named pipe, a socket): nothing reads or replaces it.

    `kind` says what it is ("a named pipe (FIFO)"); the OSError's filename is the path.
    """

    def __init__(self, path: str | os.PathLike, mode: int) -> None:
        self.kind = file_kind(mode)
        code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
        super().__init__(code, f"it is {self.kind}, not a regular file", os.fspath(path))

    @property
    def is_folder(self) -> bool:
        return self.errno == errno.EISDIR


def file_kind(mode: int) -> str:
    """What a `stat` mode is, in words: "a regular file", "a folder", "a named pipe (FIFO)", "a character device", …"""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((words for test, words in kinds if test(mode)), "a special file")


def regular_file(path: str | os.PathLike) -> os.stat_result:
    """`path`'s stat (a symbolic link followed) when it is a regular file.

    Raises NotARegularFile when it is something else, and the OSError `os.stat`
    raised otherwise (FileNotFoundError, a name too long, no permission).
    """
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile(path, info.st_mode)
    return info


def open_regular(path: str | os.PathLike) -> IO[bytes]:
    """`path` opened for reading in binary, only when it is a regular file (NotARegularFile otherwise).

    Opened without blocking and checked on the open file, so a path swapped for a
    named pipe between a check and the open cannot make the read wait forever.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(path, mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return open(descriptor, "rb")


def too_long(path: str | os.PathLike) -> str:
    """Why the system refuses `path` as too long, in words ("" when neither a name in it nor the whole is over the limit)."""
    raw = os.fsencode(path)
    longest = max(raw.replace(b"\\", b"/").split(b"/"), key=len, default=b"")
    if len(longest) > NAME_MAX:
        return f"a name in the path is {len(longest)} bytes long, over the {NAME_MAX} a file system allows"
    if len(raw) >= PATH_MAX:
        return f"the path is {len(raw)} bytes long, over the {PATH_MAX} the system allows"
    return ""


def os_error_words(exc: OSError, path: str | os.PathLike | None = None) -> str:
    """An OSError in words, without Python's "[Errno N]" and without the file name: "no such file", "a name in the path is …"."""
    if isinstance(exc, NotARegularFile):
        return exc.strerror or f"it is {exc.kind}, not a regular file"
    if exc.errno == errno.ENAMETOOLONG:
        named = path if path is not None else exc.filename
        return (too_long(named) if named is not None else "") or "the path is too long"
    if exc.errno == errno.ENOENT:
        return "no such file or folder"
    if exc.errno == errno.ELOOP:
        return "its symbolic links form a loop"
    return (exc.strerror or str(exc)).rstrip(".")


def write_atomically(path: str | os.PathLike, write: Writer) -> Path:
    """Call `write(file)` on a new temporary file beside `path`, fsync it, then rename it to `path`; returns the file written.

    A symbolic link is written through: the file it points to gets the content,
    the link stays. The temporary file gets the usual permissions (0666 less the
    umask) and is removed when anything fails, so the target is either the whole
    new content or as it was before. NotARegularFile when the target is there and
    is not a regular file (nothing is written); any other OSError (a missing
    folder, a full disk) propagates.
    """
    return write_all_atomically([(path, write)])[0]


def write_bytes_atomically(path: str | os.PathLike, data: bytes) -> Path:
    """`write_atomically` of `data` as it is (bytes, no encoding)."""
    return write_all_atomically([(path, data)])[0]


def write_all_atomically(items: Sequence[tuple[str | os.PathLike, Writer | bytes]]) -> list[Path]:
    """`write_atomically` for several files that belong together (an export and its metadata); each item's content is
    written by its writer, or is the bytes given.

    Every target is checked before anything is written, and every file is written
    whole before the first rename, so a refusal or a failure while writing leaves
    all of them as they were.
    """
    targets = [writable_target(path) for path, _ in items]
    temporaries: list[Path] = []
    try:
        for target, (_, write) in zip(targets, items, strict=True):
            temporary = target.with_name(f".{_stem(target.name)}.{secrets.token_hex(4)}.tmp")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            temporaries.append(temporary)
            if isinstance(write, bytes):
                with open(descriptor, "wb") as raw:
                    raw.write(write)
                    raw.flush()
                    os.fsync(raw.fileno())
                continue
            with open(descriptor, "w", newline="", encoding="utf-8") as file:
                write(file)
                file.flush()
                os.fsync(file.fileno())
        for temporary, target in zip(temporaries, targets, strict=True):
            os.replace(temporary, target)
    except BaseException:
        for temporary in temporaries:
            with contextlib.suppress(OSError):
                temporary.unlink()
        raise
    return targets


def writable_target(path: str | os.PathLike) -> Path:
    """The file writing `path` replaces: `path` itself, or the file its symbolic link(s) point to.

    NotARegularFile when that is there and is not a regular file; the OSError of
    `os.stat` other than "no such file" (a name too long, a file where a folder
    should be) propagates.
    """
    given = Path(path).expanduser()
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return target
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile(given, info.st_mode)
    return target


def _stem(name: str) -> str:
    """`name` cut to at most _TEMPORARY_STEM_BYTES bytes (at a character), so the temporary's name stays within NAME_MAX."""
    while len(os.fsencode(name)) > _TEMPORARY_STEM_BYTES:
        name = name[:-1]
    return name
