"""Exports are all or nothing: a bad path or a failure half-way leaves no partial file and names the path and the reason."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from core.files import write_atomically
from core.history.export import ExportError, metadata_path
from core.history.store import RunStore
from tests.core.history.test_store import make_result
from tests.core.read_only_paths import read_only


@pytest.fixture
def store(tmp_path: Path):
    with RunStore.open(tmp_path / "history.sqlite3") as opened:
        opened.save(make_result(steps=50))
        yield opened


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        (lambda tmp: tmp / "missing" / "runs.csv", "does not exist"),
        (lambda tmp: tmp, "it is a folder"),
        (lambda tmp: Path("/proc/device-lab-export.csv"), "/proc"),
        (lambda tmp: tmp / "history.sqlite3" / "runs.csv", "is not a folder"),
    ],
    ids=["missing-folder", "a-folder", "proc", "under-a-file"],
)
def test_bad_paths_raise_with_the_path_and_the_reason(store: RunStore, tmp_path: Path, where, reason: str) -> None:
    target = where(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ExportError) as raised:
        store.export_csv([1], target)
    assert str(target) in str(raised.value) and reason in str(raised.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_unwritable_folder_is_refused_and_its_old_export_kept(store: RunStore, tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    old = folder / "runs.json"
    old.write_text("the previous export")
    with read_only(folder), pytest.raises(ExportError, match="can not be written"):
        store.export_json([1], old)
    assert old.read_text() == "the previous export" and [p.name for p in folder.iterdir()] == ["runs.json"]


def test_a_failure_half_way_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "runs.csv"
    target.write_text("the previous export")

    def write_then_fill_the_disk(file) -> None:
        file.write("half of the rows\n")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left on device"):
        write_atomically(target, write_then_fill_the_disk)
    assert target.read_text() == "the previous export" and [p.name for p in tmp_path.iterdir()] == ["runs.csv"]


def test_a_good_export_replaces_the_file_whole(store: RunStore, tmp_path: Path) -> None:
    target = tmp_path / "runs.csv"
    target.write_text("old")
    store.export_csv([1], target)
    assert target.read_text().startswith("id,label,group,") and metadata_path(target).read_text().startswith("{")
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
