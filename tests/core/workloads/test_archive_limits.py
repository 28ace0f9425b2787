"""A `.keras` archive is opened within limits: a zip bomb is refused from its directory, fast and in little memory."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from core.workloads import archive
from core.workloads.archive import MEMBER_CAPS, ArchiveLimitError, check_archive, read_member
from core.workloads.model_file import ModelFileError, check_model_path

ROOT = Path(__file__).resolve().parents[3]
BOMB_INFLATED = 1536 * 2**20  # config.json inflates to 1.5 GiB
MEMORY_LIMIT_BYTES = 200 * 2**20


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """A ~1.5 MB .keras whose config.json inflates to 1.5 GiB (one repeated byte), with a real metadata.json."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.keras"
    chunk = b" " * 2**20
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("metadata.json", json.dumps({"keras_version": "3.10.0"}))
        with zf.open("config.json", "w", force_zip64=True) as member:
            for _ in range(BOMB_INFLATED // len(chunk)):
                member.write(chunk)
    return path


def test_the_bomb_is_small_on_disk_and_huge_inflated(bomb):
    with zipfile.ZipFile(bomb) as zf:
        assert zf.getinfo("config.json").file_size == BOMB_INFLATED
    assert bomb.stat().st_size < 3 * 2**20


def test_the_bomb_is_refused_in_under_a_second_in_under_200_mb(bomb):
    """Measured in a fresh Python: the check's wall time and the process's peak resident memory.

    The peak is the kernel's VmHWM of the child's own address space: ru_maxrss would
    carry over the memory of the (TensorFlow-sized) test process it was forked from.
    """
    probe = textwrap.dedent(
        f"""
        import json, time
        from core.workloads.model_file import ModelFileError, check_model_path
        started = time.monotonic()
        try:
            check_model_path({str(bomb)!r})
            message = ""
        except ModelFileError as exc:
            message = str(exc)
        elapsed = time.monotonic() - started
        status = open("/proc/self/status").read()
        peak_kib = int(status.split("VmHWM:")[1].split()[0])
        print(json.dumps({{"message": message, "elapsed": elapsed, "maxrss": peak_kib * 1024}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert "config.json inflates to 1,536.0 MiB" in answer["message"] and "zip bomb" in answer["message"], answer
    assert answer["elapsed"] < 1.0, answer
    assert answer["maxrss"] < MEMORY_LIMIT_BYTES, answer


def test_the_cli_refuses_the_bomb_with_exit_2_before_tensorflow(bomb, tmp_path):
    env_dir = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "main.py", "run", "--model", str(bomb), "--steps", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "DEVICE_LAB_DATA_DIR": str(env_dir)},
    )
    assert done.returncode == 2, done.stderr
    assert "zip bomb" in done.stderr and str(bomb) in done.stderr
    assert "Traceback" not in done.stderr


def test_each_member_cap_is_checked_from_the_directory(tmp_path):
    path = tmp_path / "big_metadata.keras"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("config.json", "{}")
        zf.writestr("metadata.json", b" " * (MEMBER_CAPS["metadata.json"] + 1))
    with pytest.raises(ArchiveLimitError, match="metadata.json inflates to 1.0 MiB"):
        check_archive(path)
    with pytest.raises(ArchiveLimitError, match="metadata.json"):
        read_member(path, "metadata.json")
    assert read_member(path, "config.json") == b"{}"


def test_the_whole_file_and_its_members_added_up_have_a_limit(tmp_path, monkeypatch):
    path = tmp_path / "model.keras"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("config.json", "{}")
        zf.writestr("model.weights.h5", b"\0" * 100_000)
    check_archive(path)
    monkeypatch.setattr(archive, "MAX_MODEL_FILE_BYTES", 50_000)  # the real limit is 16 GiB: too big to write here
    with pytest.raises(ArchiveLimitError, match="inflate to"):
        check_archive(path)
    monkeypatch.setattr(archive, "MAX_MODEL_FILE_BYTES", 100)  # below the file's own size
    with pytest.raises(ArchiveLimitError, match="over Device Lab's limit"):
        check_archive(path)


def test_an_archive_without_config_is_refused_with_the_path(tmp_path):
    path = tmp_path / "not_a_model.keras"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(ModelFileError, match="no config.json") as error:
        check_model_path(path)
    assert error.value.path == str(path)
