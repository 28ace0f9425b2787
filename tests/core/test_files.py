"""`core.files`: a write is the whole new content or none, through a link, never over what is not a regular file; reads
refuse what is not a regular file at once."""

from __future__ import annotations

import errno
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from core.files import NotARegularFile, open_regular, os_error_words, regular_file, too_long, write_all_atomically, write_atomically


def test_the_new_content_replaces_the_old_whole(tmp_path: Path) -> None:
    target = tmp_path / "cache.json"
    target.write_text("old")
    write_atomically(target, lambda file: file.write("new"))
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["cache.json"]


def test_a_writer_that_fails_half_way_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "cache.json"
    target.write_text("old")

    def half_then_fail(file):
        file.write("half")
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError, match="disk gone"):
        write_atomically(target, half_then_fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["cache.json"]


def test_a_missing_folder_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "missing" / "cache.json", lambda file: file.write("x"))


def test_a_symbolic_link_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real.csv"
    target.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    written = write_atomically(link, lambda file: file.write("new"))
    assert link.is_symlink() and os.readlink(link) == str(target), "the link itself is kept"
    assert target.read_text() == "new" and written == target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "real.csv"]


@pytest.mark.parametrize("kind", ["fifo", "folder", "socket", "link-to-dev-null"])
def test_what_is_not_a_regular_file_is_refused_and_left_as_it_is(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "export.csv"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(target))
        server.close()
    else:
        target.symlink_to("/dev/null")
    before = os.lstat(target)
    with pytest.raises(NotARegularFile) as refused:
        write_atomically(target, lambda file: file.write("x"))
    assert refused.value.filename == str(target) and "not a regular file" in str(refused.value)
    after = os.lstat(target)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino), "the same node, untouched"
    assert [p.name for p in tmp_path.iterdir()] == ["export.csv"], "no temporary file left"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_files_that_belong_together_are_all_written_or_none(tmp_path: Path) -> None:
    first, second = tmp_path / "runs.csv", tmp_path / "runs.csv.meta.json"
    first.write_text("old rows")
    os.mkfifo(second)
    with pytest.raises(NotARegularFile):
        write_all_atomically([(first, lambda file: file.write("new rows")), (second, lambda file: file.write("{}"))])
    assert first.read_text() == "old rows", "a refused second target stops the first too"
    second.unlink()
    write_all_atomically([(first, lambda file: file.write("new rows")), (second, b"{}")])
    assert (first.read_text(), second.read_bytes()) == ("new rows", b"{}")


def test_reading_refuses_a_named_pipe_at_once_instead_of_waiting_on_it(tmp_path: Path) -> None:
    fifo = tmp_path / "model.keras"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(NotARegularFile) as refused:
        open_regular(fifo)
    assert refused.value.kind == "a named pipe (FIFO)" and time.monotonic() - started < 1
    with pytest.raises(NotARegularFile):
        regular_file(fifo)


def test_a_name_over_255_bytes_is_said_in_words(tmp_path: Path) -> None:
    long = tmp_path / ("é" * 150)  # 300 bytes in UTF-8, 150 characters
    with pytest.raises(OSError) as failed:
        write_atomically(long, lambda file: file.write("x"))
    assert failed.value.errno == errno.ENAMETOOLONG
    said = os_error_words(failed.value, long)
    assert said == too_long(long) and "300 bytes" in said and "255" in said  # the name's length against the limit
    assert too_long(tmp_path / ("a" * 255)) == ""
