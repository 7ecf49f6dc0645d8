"""Inventory snapshots keep their own truth (RELIABILITY 35-37, for `spendlake inventory`'s
tables): a snapshot deleted, truncated or with bytes altered is exit 3 naming the file and
`spendlake inventory --source NAME`, which writes it again (or sets an earlier day's aside)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import load_config
from service.core import integrity
from service.core.lake import Lake
from service.core.lake_damage import unnamed_damage
from service.core.snapshot_ledger import RECORDS, SET_ASIDE
from service.ingest.inventory import run_inventory
from tests.conftest import REPO, written_shorter

HEADER = "job_id,start_time,end_time,gpus,cluster,state,user,team\n"
JOBS = HEADER + "".join(f"{100 + i},2026-11-{1 + i % 28:02d}T10:00:00Z,2026-11-{1 + i % 28:02d}T12:00:00Z,{i % 8},p5,"
                        f"{'FAILED' if i % 9 == 0 else 'COMPLETED'},user{i % 50},team{i % 7}\n" for i in range(3000))
QUERIES = [["rules", "run", "--dry-run", "--format", "json"], ["runs", "--since", "30d", "--format", "json"],
           ["status"]]


@pytest.fixture
def lake(tmp_path):
    """A lake holding one jobs-file snapshot taken by `spendlake inventory`."""
    (tmp_path / "jobs.csv").write_text(JOBS)
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"),
        "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv")}],
        "attribution": {"clusters": {}}}))
    result = spendlake(config, "inventory")
    assert result.exit_code == 0, result.output
    return config, Lake.of(load_config(config))


def spendlake(config: Path, *args: str):
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def snapshot(lake: Lake) -> Path:
    [file] = lake.table_dir("jobs").glob("source=trace/snapshot_date=*/data.parquet")
    return file


def job_count(lake: Lake) -> int:
    with lake.query() as con:
        return con.execute("SELECT count(*) FROM jobs").fetchall()[0][0]


def assert_every_query_exits_3_naming(config: Path, file: Path, state: str) -> None:
    for args in QUERIES:
        result = spendlake(config, *args)
        assert result.exit_code == 3, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        assert str(file) in result.output and f"is {state}" in result.output, (args, result.output)
        assert "spendlake inventory --source trace" in result.output, result.output


def flip(file: Path, start: int, length: int = 40, keep: os.stat_result | None = None) -> None:
    """Bytes flipped in place; with `keep`, the file's times set back to those (as bit rot leaves them)."""
    data = bytearray(file.read_bytes())
    data[start:start + length] = bytes(b ^ 0x5A for b in data[start:start + length])
    restore(file, bytes(data), keep)


def restore(file: Path, data: bytes, times: os.stat_result | None) -> None:
    file.write_bytes(data)
    if times is not None:
        os.utime(file, ns=(times.st_atime_ns, times.st_mtime_ns))


def test_35_a_deleted_inventory_snapshot_makes_every_query_exit_3_and_inventory_writes_it_again(lake):
    config, lake = lake
    file = snapshot(lake)
    file.unlink()
    assert_every_query_exits_3_naming(config, file, "missing")
    assert spendlake(config, "inventory").exit_code == 0  # the same input: written again all the same
    assert job_count(lake) == 3000


@pytest.mark.parametrize("removed", ["snapshot folder", "table folder"])
def test_35_a_snapshot_or_table_folder_removed_whole_is_missed_too(lake, removed):
    config, lake = lake
    file = snapshot(lake)
    shutil.rmtree(file.parent if removed == "snapshot folder" else lake.table_dir("jobs"))
    assert_every_query_exits_3_naming(config, file, "missing")


def test_36_a_truncated_inventory_snapshot_exits_3_without_traceback_and_the_metric_counts_it(lake):
    from prometheus_client import CollectorRegistry

    from service.serve.metrics import LakeCollector

    config, lake = lake
    file = snapshot(lake)
    file.write_bytes(file.read_bytes()[:5000])
    assert_every_query_exits_3_naming(config, file, "truncated")
    scrape = CollectorRegistry()
    scrape.register(LakeCollector(load_config(config)))
    assert scrape.get_sample_value("spendlake_lake_snapshots_damaged", {"kind": "snapshot", "state": "truncated"}) == 1
    assert spendlake(config, "inventory").exit_code == 0
    assert job_count(lake) == 3000


def test_a_shorter_snapshot_that_reads_is_altered_not_truncated(lake):
    """Another Parquet file of 100 of its jobs written in its place: every query called it
    truncated, a file cut short."""
    config, lake = lake
    file = snapshot(lake)
    written_shorter(file)
    assert_every_query_exits_3_naming(config, file, "altered")
    said = spendlake(config, "status").output
    assert "a readable Parquet file of 100 rows where the record says 3,000: changed since it was recorded" in said


def test_36_a_snapshot_cut_to_its_recorded_size_without_its_footer_is_truncated(lake):
    config, lake = lake
    file = snapshot(lake)
    data = file.read_bytes()
    file.write_bytes(data[:-8] + bytes(8))
    assert_every_query_exits_3_naming(config, file, "truncated")


def test_37_bytes_altered_in_a_snapshots_data_page_are_caught_by_the_next_read_and_by_verify(lake):
    config, lake = lake
    file = snapshot(lake)
    flip(file, 3000)  # same size, same footer: written after its record, so a read hashes it
    assert_every_query_exits_3_naming(config, file, "altered")
    verified = spendlake(config, "verify", "--format", "json")
    assert verified.exit_code == 3, verified.output
    [row] = json.loads(verified.output.split("\nerror:")[0])
    assert (row["table"], row["check"], row["partition"]) == ("jobs", "altered", file.parent.name), row
    assert "SHA-256" in row["detail"]
    assert_every_query_exits_3_naming(config, file, "altered")
    assert spendlake(config, "inventory").exit_code == 0  # the input is unchanged: written again all the same
    assert spendlake(config, "verify").exit_code == 0
    assert job_count(lake) == 3000


def test_a_snapshot_touched_but_not_changed_is_hashed_once_per_read_and_reads_as_before(lake, monkeypatch):
    config, lake = lake
    file = snapshot(lake)
    hashed = []
    real = integrity.sha256_file
    monkeypatch.setattr(integrity, "sha256_file", lambda path: hashed.append(path) or real(path))
    assert job_count(lake) == 3000 and hashed == []  # times as recorded: no hash
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert job_count(lake) == 3000 and hashed.count(file) == 1


def test_37_a_data_page_duckdb_fails_on_without_naming_a_file_is_named_by_its_hash(lake):
    config, lake = lake
    file = snapshot(lake)
    original, times = file.read_bytes(), file.stat()
    unnamed: list[tuple[int, duckdb.Error]] = []  # flips DuckDB reports without the file's name
    for start in range(0, len(original) - 200, 97):
        flip(file, start, keep=times)  # bit rot: the time stays, so only the bytes can tell
        try:
            job_count_all(lake)
        except duckdb.Error as exc:
            if str(file) not in str(exc):
                unnamed.append((start, exc))
        restore(file, original, times)
        if len(unnamed) == 3:
            break
    assert unnamed, "no flip of this file gave an error without its name"
    for start, exc in unnamed:
        flip(file, start, keep=times)  # bit rot: the time stays, so only the bytes can tell
        damage = unnamed_damage(lake, exc)
        assert damage is not None and damage.where == str(file), damage
        assert "is altered" in damage.message and "spendlake inventory --source trace" in damage.hint
        result = spendlake(config, "runs", "--since", "30d", "--format", "json")  # a traceback before
        assert result.exit_code in (0, 3), (start, result.exception)
        assert result.exit_code == 0 or (str(file) in result.output and "is altered" in result.output), result.output
        restore(file, original, times)
    assert unnamed_damage(lake, duckdb.BinderException("no column x")) is None  # the SQL, not the bytes


def job_count_all(lake: Lake) -> list:
    with lake.query() as con:
        return con.execute("SELECT * FROM jobs").fetchall()


def test_37_an_earlier_days_damaged_snapshot_is_set_aside_by_the_next_inventory(lake):
    config, lake = lake
    today = snapshot(lake)
    day = datetime.strptime(today.parent.name.split("=")[1], "%Y-%m-%d") - timedelta(days=1)
    run_inventory(load_config(config), now=day + timedelta(hours=6))
    earlier = today.parent.with_name(f"snapshot_date={day:%Y-%m-%d}") / today.name
    earlier.write_bytes(earlier.read_bytes()[:4000])
    assert_every_query_exits_3_naming(config, earlier, "truncated")
    result = spendlake(config, "inventory")  # the source holds today's jobs: that day cannot be taken again
    assert result.exit_code == 0, result.output
    assert f"{earlier.parent.name} is truncated" in result.output and SET_ASIDE in result.output, result.output
    assert not earlier.exists() and list((lake.root / SET_ASIDE).rglob("*.parquet"))
    assert job_count(lake) == 3000 and spendlake(config, "verify").exit_code == 0


def test_snapshots_written_before_records_are_read_listed_by_verify_and_recorded_by_the_next_inventory(lake):
    config, lake = lake
    shutil.rmtree(lake.root / RECORDS)
    assert job_count(lake) == 3000
    verified = spendlake(config, "verify", "--format", "json")
    assert verified.exit_code == 0 and json.loads(verified.output)[0]["check"] == "unrecorded", verified.output
    assert spendlake(config, "inventory").exit_code == 0
    assert json.loads(spendlake(config, "verify", "--format", "json").output)[0]["check"] == "ok"


def test_39_forget_removes_a_sources_snapshot_records_with_its_snapshots(lake, tmp_path):
    config, lake = lake
    file = snapshot(lake)
    assert (lake.root / RECORDS / "jobs" / "source=trace").exists()
    data = yaml.safe_load(config.read_text())
    data["inventory"][0]["name"] = "renamed"
    config.write_text(yaml.safe_dump(data))
    assert spendlake(config, "forget", "trace", "--yes").exit_code == 0
    assert not file.exists() and not (lake.root / RECORDS / "jobs" / "source=trace").exists()


def test_37_the_daily_verify_job_finds_an_altered_snapshot_and_the_metric_keeps_it(lake):
    from prometheus_client import CollectorRegistry

    from service.core.errors import DataError
    from service.serve.metrics import LakeCollector
    from service.serve.service import verify_lake

    config_path, lake = lake
    config = load_config(config_path)
    file = snapshot(lake)
    flip(file, 3000)
    with pytest.raises(DataError) as failed:
        verify_lake(config)
    assert failed.value.where == str(file) and "is altered" in failed.value.message
    scrape = CollectorRegistry()
    scrape.register(LakeCollector(config))
    assert scrape.get_sample_value("spendlake_lake_snapshots_damaged", {"kind": "snapshot", "state": "altered"}) == 1


EDITED_RECORDS = {  # a record edited by hand to the wrong types: each was a TypeError traceback from every read
    "size as text": lambda r: {**r, "size": str(r["size"])},  # '<' not supported between 'int' and 'str'
    "rows as text": lambda r: {**r, "rows": str(r["rows"])},
    "previous a list": lambda r: {**r, "previous": [r["size"]]},  # 'list' object has no attribute 'get'
    "written_at a number": lambda r: {**r, "written_at": 5},
}


@pytest.mark.parametrize("content", ["{not json", "[]", *EDITED_RECORDS])
def test_an_unreadable_record_is_read_as_none_and_written_again_by_the_next_inventory(lake, content):
    config, lake = lake
    [record] = (lake.root / RECORDS).rglob("*.json")
    edit = EDITED_RECORDS.get(content)
    record.write_text(json.dumps(edit(json.loads(record.read_text()))) if edit else content)
    assert job_count(lake) == 3000
    verified = spendlake(config, "verify", "--format", "json")
    [row] = json.loads(verified.stdout)
    # the record existed and is damaged: verify says so (it was exit 0, 'unrecorded', as if never recorded)
    assert verified.exit_code == 3 and row["check"] == "record lost" and "record is unreadable" in row["detail"], row
    assert spendlake(config, "inventory").exit_code == 0
    assert json.loads(spendlake(config, "verify", "--format", "json").output)[0]["check"] == "ok"


def test_a_record_deleted_since_the_last_verify_makes_verify_exit_3_with_the_fix_and_reads_go_on(lake):
    config, lake = lake
    assert spendlake(config, "verify").exit_code == 0
    file = snapshot(lake)
    [record] = (lake.root / RECORDS).rglob("*.json")
    kept = json.loads(record.read_text())
    record.unlink()
    assert job_count(lake) == 3000  # the file is read as one written before records, as before
    for _ in range(2):  # said again until it is fixed
        verified = spendlake(config, "verify")
        assert verified.exit_code == 3 and "lost its record" in verified.output, verified.output
        assert "there at the last `spendlake verify`, is gone" in verified.output, verified.output
        assert str(record) in verified.output and kept["sha256"] in verified.output, verified.output
        assert "spendlake inventory --source trace" in verified.output, verified.output
    assert str(file) in verified.output
    record.write_text(json.dumps({k: kept[k] for k in ("size", "rows", "sha256")}))  # the fix it names
    assert spendlake(config, "verify").exit_code == 0
    record.unlink()
    assert spendlake(config, "verify").exit_code == 3
    assert spendlake(config, "inventory").exit_code == 0 and spendlake(config, "verify").exit_code == 0


@pytest.mark.parametrize("stand_in", ["fifo", "link to /dev/zero"])
def test_36_a_snapshot_replaced_by_a_fifo_or_a_link_to_dev_zero_exits_3_not_hangs(tmp_path, stand_in):
    """A query over bills versions its rollups by the job snapshots' digests: one it could not
    take from the record was hashed whole, which never ends on /dev/zero, never starts on a FIFO."""
    from tests.test_runs import lake_with_runs, write_config

    lake, _ = lake_with_runs(tmp_path)
    config = write_config(tmp_path, lake)
    [file] = lake.table_dir("jobs").glob("source=*/snapshot_date=*/data.parquet")
    file.unlink()
    os.mkfifo(file) if stand_in == "fifo" else file.symlink_to("/dev/zero")
    for args in (["runs", "--since", "2026-11-02", "--format", "json"], ["attribute", "--since", "2026-11-02"]):
        query = subprocess.run([sys.executable, "-m", "service", "--config", config, *args], capture_output=True,
                               text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert query.returncode == 3, query.stderr
        assert f"{file}: jobs snapshot source=slurm/snapshot_date=" in query.stderr and "is truncated" in query.stderr


def test_a_verify_state_whose_recorded_snapshots_are_not_a_list_is_exit_3_naming_it(lake):
    config, lake = lake
    assert spendlake(config, "verify").exit_code == 0
    state = lake.root / "_state" / "snapshot_verify.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "recorded": 5}))  # edited by hand
    verified = spendlake(config, "verify")
    assert verified.exit_code == 3 and isinstance(verified.exception, SystemExit), repr(verified.exception)
    assert str(state) in verified.output and "recorded: must be a list" in verified.output, verified.output


def test_a_record_deleted_before_any_verify_saw_it_makes_verify_exit_3_naming_it(lake):
    """A snapshot written since the lake's snapshots are recorded and without its record lost it,
    whether or not a verify saw it (it was exit 0, `unrecorded`, as a snapshot from before records)."""
    config, lake = lake
    file = snapshot(lake)
    [record] = (lake.root / RECORDS).rglob("*.json")
    kept = json.loads(record.read_text())
    record.unlink()
    for why in ("after this lake's snapshots began to be recorded", "there at the last `spendlake verify`"):
        verified = spendlake(config, "verify")  # said again until it is fixed
        assert verified.exit_code == 3 and "lost its record" in verified.output, verified.output
        assert why in verified.output, verified.output
        assert str(record) in verified.output and kept["sha256"] in verified.output, verified.output
        assert "spendlake inventory --source trace" in verified.output and str(file) in verified.output
    assert job_count(lake) == 3000  # reads go on with the file, as before
    record.write_text(json.dumps({k: kept[k] for k in ("size", "rows", "sha256")}))  # the fix it names
    assert spendlake(config, "verify").exit_code == 0


def test_a_snapshot_older_than_the_lakes_first_record_is_unrecorded_not_lost(lake, tmp_path):
    config, lake = lake
    file = snapshot(lake)
    [record] = (lake.root / RECORDS).rglob("*.json")
    record.unlink()
    os.utime(file, (1_600_000_000, 1_600_000_000))  # written by a spendlake from before records
    verified = spendlake(config, "verify", "--format", "json")
    assert verified.exit_code == 0 and json.loads(verified.output)[0]["check"] == "unrecorded", verified.output


def test_verify_keeps_no_snapshot_set_aside_or_forgotten_in_its_recorded_list(lake, tmp_path):
    """`recorded` (what the last verify saw with a record) only grew: each snapshot set aside or of a
    forgotten source stayed in it for good. It holds what the lake holds."""
    from service.core.snapshot_ledger import VERIFY_STATE

    config, lake = lake
    days = 40
    source = lake.table_dir("jobs") / "source=trace"
    [first] = source.glob("snapshot_date=*")
    for day in range(days):  # a snapshot a day, each recorded
        shutil.copytree(first, source / f"snapshot_date=2026-10-{day % 30 + 1:02d}" if day < 30
                        else source / f"snapshot_date=2026-09-{day - 29:02d}", dirs_exist_ok=True)
    [record] = (lake.root / RECORDS).rglob("*.json")
    for folder in source.glob("snapshot_date=*"):
        if folder != first:
            shutil.copy(record, record.parent / f"{folder.name}.json")
    assert spendlake(config, "verify").exit_code == 0
    assert len(lake.read_state(VERIFY_STATE)["recorded"]) == days + 1
    for folder in sorted(source.glob("snapshot_date=2026-09-*")):  # set aside as damaged by an inventory
        shutil.rmtree(folder)
        (record.parent / f"{folder.name}.json").unlink()
    assert spendlake(config, "verify").exit_code == 0
    assert len(lake.read_state(VERIFY_STATE)["recorded"]) == 31
    data = yaml.safe_load(config.read_text())
    data["inventory"][0]["name"] = "renamed"
    config.write_text(yaml.safe_dump(data))
    assert spendlake(config, "verify").exit_code == 0  # the old source's snapshots are kept while the lake has them
    assert len(lake.read_state(VERIFY_STATE)["recorded"]) == 31
    assert spendlake(config, "forget", "trace", "--yes").exit_code == 0
    assert spendlake(config, "verify").exit_code == 0
    assert lake.read_state(VERIFY_STATE)["recorded"] == []
