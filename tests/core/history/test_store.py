"""Run history in SQLite: real files in tmp_path, no mocks."""

from __future__ import annotations

import csv
import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.config import RunConfig
from core.history import database
from core.history.database import wal_damage
from core.history.export import metadata_path
from core.history.store import RunStore, RunSummary, StoreError
from core.results import RunResult, RunStatus, StepRecord

REPO_ROOT = Path(__file__).resolve().parents[3]
ENVIRONMENT = {
    "tensorflow": "2.16.1",
    "keras": "3.3.3",
    "python": "3.11.7",
    "platform": "Linux-6.5-x86_64",
    "host": "lab-box",
    "cpu": "AMD EPYC 7B13",
    "devices": ["GPU:0"],
    "gpus": ["NVIDIA H100 80GB HBM3"],
    "driver": "550.54.15",
}


def make_result(
    steps: int = 1000,
    status: str = RunStatus.COMPLETED,
    message: str = "",
    model: str = "mlp",
    devices: tuple[str, ...] = ("GPU:0",),
    samples_per_s: float = 12345.678,
    seed: int = 0,
    started_at: str = "2024-05-01T10:00:00+00:00",
) -> RunResult:
    rng = random.Random(seed)
    strategy = "one-device" if len(devices) == 1 else "mirrored"
    config = RunConfig(model=model, dataset="synthetic", strategy=strategy, devices=devices, steps=max(steps, 1))
    losses = tuple(rng.uniform(0.01, 3.0) for _ in range(steps))
    times = tuple(rng.uniform(0.001, 0.02) for _ in range(steps))
    return RunResult(
        status=status,
        config=config.to_dict(),
        message=message,
        steps_done=steps,
        replicas=len(devices),
        warmup_s=sum(times[:2]) if steps else None,
        warmup_steps=min(2, steps),
        step_time_median_ms=8.123456789,
        step_time_p95_ms=17.5,
        step_time_spread=0.12,
        samples_per_s=samples_per_s,
        final_loss=losses[-1] if losses else None,
        peak_memory_bytes=123_456_789,
        peak_memory_source="device allocator peak",
        wall_s=12.5,
        started_at=started_at,
        environment=dict(ENVIRONMENT, devices=list(devices)),
        losses=losses,
        step_times_s=times,
        warnings=("a warning, with a comma",),
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "history.sqlite3"


@pytest.fixture
def store(db_path: Path):
    with RunStore.open(db_path) as opened:
        yield opened


def read_csv(path: Path) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The export's metadata (the JSON file beside it) and its rows, read by csv.DictReader from the first line on."""
    metadata = json.loads(metadata_path(path).read_text(encoding="utf-8"))
    with path.open(newline="", encoding="utf-8") as file:
        return metadata, list(csv.DictReader(file))


def test_save_and_load_round_trip_is_exact(store: RunStore) -> None:
    result = make_result(steps=1000)
    run_id = store.save(result, label="baseline", group="cpu-vs-gpu")
    assert store.load(run_id) == result
    assert store.notice == "" and store.recovered_from is None


def test_stopped_and_failed_runs_keep_status_and_message(store: RunStore) -> None:
    stopped = make_result(steps=40, status=RunStatus.STOPPED, message="Stopped by the user after 40 of 100 steps.")
    failed = make_result(steps=0, status=RunStatus.FAILED, message="Out of memory on the device: OOM. Lower the batch size.")
    stopped_id, failed_id = store.save(stopped), store.save(failed)
    assert store.load(stopped_id) == stopped
    loaded = store.load(failed_id)
    assert (loaded.status, loaded.message, loaded.losses) == (RunStatus.FAILED, failed.message, ())
    summary = {s.id: s for s in store.list_runs()}[failed_id]
    assert (summary.status, summary.message, summary.steps) == (RunStatus.FAILED, failed.message, 0)


def test_history_survives_a_new_store_on_the_same_file(db_path: Path) -> None:
    result = make_result(steps=500)
    with RunStore.open(db_path) as first:
        run_id = first.save(result, label="kept")
    with RunStore.open(db_path) as second:
        assert second.load(run_id) == result
        assert [s.label for s in second.list_runs()] == ["kept"]


def test_history_survives_a_fresh_process(db_path: Path) -> None:
    result = make_result(steps=2000, seed=7)
    with RunStore.open(db_path) as writer:
        run_id = writer.save(result)
    script = (
        "import json, sys\n"
        "from core.history.store import RunStore\n"
        "with RunStore.open(sys.argv[1]) as s:\n"
        "    print(json.dumps(s.load(int(sys.argv[2])).to_dict()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(db_path), str(run_id)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert RunResult.from_dict(json.loads(done.stdout)) == result


def test_abandoned_run_reads_back_as_interrupted_with_its_steps(db_path: Path) -> None:
    config = RunConfig(model="cnn", dataset="digits", steps=1000)
    records = [StepRecord(i, 1.0 / i, 0.01 + i * 1e-6, warmup=i <= 3) for i in range(1, 251)]
    with RunStore.open(db_path) as live:
        run_id = live.begin_run(config, label="crashy", environment=ENVIRONMENT)
        assert live.list_runs()[0].status == RunStatus.RUNNING
        for start in range(0, len(records), 100):
            live.append_steps(run_id, records[start : start + 100])
        # no finish_run: the app "crashed"
    with RunStore.open(db_path) as reopened:
        summary = reopened.list_runs()[0]
        loaded = reopened.load(run_id)
    assert (summary.status, summary.label, summary.steps, summary.model) == (RunStatus.INTERRUPTED, "crashy", 250, "cnn")
    assert loaded.status == RunStatus.INTERRUPTED and "250" in loaded.message
    assert loaded.losses == tuple(r.loss for r in records)
    assert loaded.step_times_s == tuple(r.step_time_s for r in records)
    assert (loaded.steps_done, loaded.warmup_steps, loaded.final_loss) == (250, 3, records[-1].loss)
    assert loaded.config == config.to_dict() and loaded.environment == ENVIRONMENT


def test_an_interrupted_jax_run_reads_its_step_times_as_its_own_result_would_in_8_call_windows(db_path: Path) -> None:
    """A JAX job sees some calls done together: its figures come from windows of the calls in flight, cut off or not."""
    clumped = [0.0005, 0.0005, 0.0005, 0.0025] * 8  # 32 steady steps at 1 ms on average, read in clumps
    records = [StepRecord(i, 1.0, t, warmup=i == 1) for i, t in enumerate([2.0, *clumped], start=1)]
    with RunStore.open(db_path) as live:
        run_id = live.begin_run(RunConfig(model="mlp", backend="jax", steps=100))
        live.append_steps(run_id, records)
    with RunStore.open(db_path) as reopened:
        loaded = reopened.load(run_id)
    assert loaded.status == RunStatus.INTERRUPTED and loaded.step_time_median_ms == pytest.approx(1.0)
    assert loaded.step_time_spread == pytest.approx(0.0)  # per step, the clumps would read as a 400% spread


def test_a_second_store_in_the_same_process_leaves_a_live_run_running(store: RunStore, db_path: Path) -> None:
    run_id = store.begin_run(RunConfig())
    store.append_steps(run_id, [StepRecord(1, 1.0, 0.1)])
    with RunStore.open(db_path) as history_panel:
        assert history_panel.list_runs()[0].status == RunStatus.RUNNING
        store.finish_run(run_id, make_result(steps=3))
        assert history_panel.list_runs()[0].status == RunStatus.COMPLETED
    with RunStore.open(db_path) as later:
        assert later.load(run_id) == make_result(steps=3)


def test_begin_append_finish_stores_the_final_result(store: RunStore) -> None:
    result = make_result(steps=300)
    run_id = store.begin_run(result.config, label="live")
    records = [StepRecord(i + 1, loss, t) for i, (loss, t) in enumerate(zip(result.losses, result.step_times_s, strict=True))]
    for start in range(0, 300, 64):
        store.append_steps(run_id, records[start : start + 64])
    store.finish_run(run_id, result)
    assert store.load(run_id) == result
    assert store.list_runs()[0].status == RunStatus.COMPLETED


def test_finish_without_series_keeps_appended_steps(store: RunStore) -> None:
    run_id = store.begin_run(RunConfig(), environment=ENVIRONMENT)
    store.append_steps(run_id, [StepRecord(1, 2.5, 0.5, warmup=True), StepRecord(2, 2.0, 0.01)])
    failed = RunResult(status=RunStatus.FAILED, config=RunConfig().to_dict(), message="NonFiniteLoss: loss became nan", steps_done=2)
    store.finish_run(run_id, failed)
    loaded = store.load(run_id)
    assert (loaded.status, loaded.message, loaded.losses, loaded.step_times_s) == (
        RunStatus.FAILED,
        failed.message,
        (2.5, 2.0),
        (0.5, 0.01),
    )
    assert loaded.started_at  # begin_run's start time is kept


def test_unknown_run_ids_raise_key_error(store: RunStore) -> None:
    with pytest.raises(KeyError):
        store.load(42)
    with pytest.raises(KeyError):
        store.append_steps(42, [StepRecord(1, 1.0, 0.1)])
    with pytest.raises(KeyError):
        store.finish_run(42, make_result(steps=1))


def test_delete_removes_runs_and_their_steps(store: RunStore, db_path: Path) -> None:
    ids = [store.save(make_result(steps=10, seed=i)) for i in range(3)]
    store.delete([ids[0], ids[2]])
    assert [s.id for s in store.list_runs()] == [ids[1]]
    with pytest.raises(KeyError):
        store.load(ids[0])
    with sqlite3.connect(db_path) as conn:
        assert {run_id for (run_id,) in conn.execute("SELECT DISTINCT run_id FROM steps")} == {ids[1]}


def test_list_runs_filters_searches_and_sorts(store: RunStore) -> None:
    a = store.save(make_result(model="mlp", samples_per_s=300.0, started_at="2024-05-01T10:00:00+00:00"), label="alpha")
    b = store.save(make_result(model="cnn", samples_per_s=100.0, started_at="2024-05-03T10:00:00+00:00"), label="beta", group="g1")
    c = store.save(
        make_result(
            model="cnn", status=RunStatus.FAILED, message="Out of memory", samples_per_s=200.0, started_at="2024-05-02T10:00:00+00:00"
        ),
        group="g1",
    )
    d = store.save(make_result(model="mlp", devices=("GPU:0", "GPU:1"), started_at="2024-05-04T10:00:00+00:00"), label="50%_off")

    def ids(**kwargs) -> list[int]:
        return [s.id for s in store.list_runs(**kwargs)]

    assert ids() == [d, b, c, a]
    assert ids(descending=False) == [a, c, b, d]
    assert ids(model="cnn") == [b, c]
    assert ids(status=RunStatus.FAILED) == [c]
    assert ids(model="cnn", status=RunStatus.COMPLETED) == [b]
    assert ids(search="ALPHA") == [a]
    assert ids(search="memory") == [c]
    assert ids(search="GPU:1") == [d]
    assert ids(search="50%_") == [d]  # LIKE wildcards are matched literally
    assert ids(search="0%") == [d]
    assert ids(order_by="samples_per_s", descending=False, model="cnn") == [b, c]
    assert ids(order_by="label", descending=False, status=RunStatus.COMPLETED) == [d, a, b]
    assert store.groups() == ["g1"]
    summary = store.list_runs(search="GPU:1")[0]
    assert summary == RunSummary(
        id=d, started_at="2024-05-04T10:00:00+00:00", label="50%_off", group="", status=RunStatus.COMPLETED, message="",
        model="mlp", dataset="synthetic", strategy="mirrored", devices=("GPU:0", "GPU:1"), replicas=2,
        batch_size=64, steps=1000, figures=store.load(d).figures(),
    )  # fmt: skip
    assert summary.figures["samples_per_s"] == 12345.678 and summary.figures["step_time_median_ms"] == 8.123456789
    with pytest.raises(ValueError, match="order_by"):
        store.list_runs(order_by="id; DROP TABLE runs")


def test_export_csv_holds_the_table_numbers_and_a_system_header(store: RunStore, tmp_path: Path) -> None:
    ids = [store.save(make_result(seed=1), label="cpu"), store.save(make_result(status=RunStatus.FAILED, message="boom, again", seed=2))]
    out = tmp_path / "runs.csv"
    store.export_csv(ids, out)
    metadata, rows = read_csv(out)
    header_text = json.dumps(metadata["system"])
    for value in ("2.16.1", "3.11.7", "AMD EPYC 7B13", "NVIDIA H100 80GB HBM3", "550.54.15", "lab-box"):
        assert value in header_text
    assert metadata["runs"] == ids and metadata["export"] == "runs.csv"
    summaries = {s.id: s for s in store.list_runs()}
    assert [int(row["id"]) for row in rows] == ids
    for row in rows:
        summary = summaries[int(row["id"])]
        assert float(row["samples_per_s"]) == summary.figures["samples_per_s"]
        assert float(row["step_time_median_ms"]) == summary.figures["step_time_median_ms"]
        assert float(row["step_time_p95_ms"]) == summary.figures["step_time_p95_ms"]
        assert float(row["warmup_s"]) == summary.figures["warmup_s"]
        assert float(row["final_loss"]) == summary.figures["final_loss"]
        assert int(row["replicas"]) == summary.replicas
        assert (row["status"], row["message"], row["label"]) == (summary.status, summary.message, summary.label)
    assert rows[0]["warnings"] == "a warning, with a comma"


def test_export_json_holds_the_full_results(store: RunStore, tmp_path: Path) -> None:
    results = [make_result(seed=3), make_result(steps=5, status=RunStatus.STOPPED, message="Stopped", seed=4)]
    ids = [store.save(result, label=f"run{i}") for i, result in enumerate(results)]
    out = tmp_path / "runs.json"
    store.export_json(ids, out)
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["system"]["tensorflow"] == "2.16.1"
    assert document["system"]["gpus"] == ["NVIDIA H100 80GB HBM3"]
    assert [run["id"] for run in document["runs"]] == ids
    assert [RunResult.from_dict(run) for run in document["runs"]] == results
    assert document["runs"][1]["label"] == "run1"


def test_export_header_lists_differing_environments(store: RunStore, tmp_path: Path) -> None:
    ids = [store.save(make_result(devices=("CPU:0",))), store.save(make_result(devices=("GPU:0", "GPU:1")))]
    store.export_json(ids, tmp_path / "runs.json")
    store.export_csv(ids, tmp_path / "runs.csv")
    assert json.loads((tmp_path / "runs.json").read_text())["system"]["devices"] == [["CPU:0"], ["GPU:0", "GPU:1"]]
    metadata, _ = read_csv(tmp_path / "runs.csv")
    assert metadata["system"]["devices"] == [["CPU:0"], ["GPU:0", "GPU:1"]]


def test_corrupt_file_is_moved_aside_and_a_new_store_works(db_path: Path) -> None:
    garbage = b"this is not a database\x00\xff" * 200
    db_path.write_bytes(garbage)
    with RunStore.open(db_path) as fresh:
        moved = fresh.recovered_from
        assert moved is not None and moved != db_path
        assert moved.name.startswith("history.sqlite3.corrupt-")
        assert moved.read_bytes() == garbage
        assert str(moved) in fresh.notice
        assert fresh.list_runs() == []
        run_id = fresh.save(make_result(steps=10))
    with RunStore.open(db_path) as again:
        assert again.recovered_from is None
        assert [s.id for s in again.list_runs()] == [run_id]


def test_damaged_pages_are_detected_by_quick_check(db_path: Path) -> None:
    with RunStore.open(db_path) as first:
        for seed in range(20):
            first.save(make_result(steps=2000, seed=seed))
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db_path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    data[2 * page_size : 6 * page_size] = b"\x5a" * (4 * page_size)  # smash the table b-tree pages, keep the header
    db_path.write_bytes(bytes(data))
    with RunStore.open(db_path) as recovered:
        assert recovered.recovered_from is not None and recovered.recovered_from.read_bytes() == bytes(data)
        assert recovered.list_runs() == []


def test_a_damaged_write_ahead_log_is_kept_and_the_user_told_what_was_recovered(db_path: Path) -> None:
    """A writer killed with its changes still in the -wal, then 4 bytes of its last frame changed: SQLite would drop that
    transaction and reset the log without a word; the store keeps a copy, says so, and the run before the damage is there."""
    script = (
        "import os, sys\n"
        "from core.history.store import RunStore\n"
        "from tests.core.history.test_store import make_result\n"
        "store = RunStore.open(sys.argv[1])\n"
        "store.save(make_result(steps=50, seed=1))\n"
        "store.save(make_result(steps=50, seed=2))\n"
        "os._exit(0)  # killed: no checkpoint, both runs only in the -wal\n"
    )
    subprocess.run([sys.executable, "-c", script, str(db_path)], cwd=REPO_ROOT, timeout=60, check=True)
    wal = db_path.with_name(db_path.name + "-wal")
    data = bytearray(wal.read_bytes())
    assert data and wal_damage(bytes(data)) == "", "a sound log left by a killed writer is not damage"
    data[-100:-96] = bytes(byte ^ 0xFF for byte in data[-100:-96])
    wal.write_bytes(bytes(data))
    with RunStore.open(db_path) as reopened:
        runs = reopened.list_runs()
        notice = reopened.notice
    kept = sorted(db_path.parent.glob(db_path.name + "-wal.damaged-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == bytes(data)
    assert "write-ahead log" in notice and "does not match its checksum" in notice and str(kept[0]) in notice
    assert [run.steps for run in runs] == [50], "the run committed before the damage was recovered"


def test_older_schema_is_migrated_and_keeps_its_runs(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    database.MIGRATIONS[0](conn)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    with RunStore.open(db_path) as first:  # upgrades 1 -> latest
        run_id = first.save(make_result(steps=50))
    conn = sqlite3.connect(db_path)
    conn.execute("DROP INDEX runs_started_at")
    conn.execute("DROP INDEX runs_model")
    conn.execute("DROP INDEX runs_status")
    conn.execute("PRAGMA user_version = 1")  # as an older Device Lab left it, with a run in it
    conn.commit()
    conn.close()
    with RunStore.open(db_path) as upgraded:
        assert upgraded.load(run_id) == make_result(steps=50)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(database.MIGRATIONS)
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"runs_started_at", "runs_model", "runs_status"} <= indexes
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_newer_schema_is_refused_not_moved(db_path: Path) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA user_version = 999")
    with pytest.raises(StoreError, match="newer Device Lab"):
        RunStore.open(db_path)
    assert db_path.exists()


def test_default_path_follows_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVICE_LAB_DATA_DIR", str(tmp_path / "data"))
    with RunStore.open() as opened:
        assert opened.path == tmp_path / "data" / "history.sqlite3"
        assert opened.path.exists()


def test_a_million_steps_round_trip(store: RunStore) -> None:
    n = 1_000_000
    losses = tuple(1.0 / (i + 1) for i in range(n))
    times = tuple(0.001 + (i % 997) * 1e-7 for i in range(n))
    result = RunResult(status=RunStatus.COMPLETED, config=RunConfig(steps=n).to_dict(), steps_done=n, losses=losses, step_times_s=times)
    run_id = store.save(result)
    loaded = store.load(run_id)
    assert loaded.losses == losses and loaded.step_times_s == times
    assert store.list_runs()[0].steps == n


def test_appends_from_a_worker_thread_while_the_gui_thread_reads(store: RunStore) -> None:
    import threading

    run_id = store.begin_run(RunConfig())
    records = [StepRecord(i, float(i), 0.001) for i in range(1, 5001)]

    def train() -> None:
        for start in range(0, len(records), 50):
            store.append_steps(run_id, records[start : start + 50])

    worker = threading.Thread(target=train)
    worker.start()
    while worker.is_alive():
        loaded = store.load(run_id)
        assert len(loaded.losses) == loaded.steps_done  # every read sees whole batches
    worker.join()
    assert store.load(run_id).losses == tuple(r.loss for r in records)
