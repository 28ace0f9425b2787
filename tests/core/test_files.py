"""`core.files.write_atomically`: the target is the whole new content or as it was, and no temporary file stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.files import write_atomically


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
