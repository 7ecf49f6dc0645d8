"""An inventory source of local files whose files, config and code are those its last read
read is not read again (service/ingest/inventory_inputs.py): its partitions are unchanged, as
a read would have found them. Anything a fingerprint of its inputs could miss reads again."""

from __future__ import annotations

import logging
import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from connectors.aws_listing import AwsListing
from connectors.gpu_metrics import GpuMetricsConnector
from connectors.s3_objects import S3ObjectsConnector
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest import inventory_inputs
from service.ingest.inventory import run_inventory

DATA = Path(__file__).parent / "data" / "inventory"
NOW = datetime(2026, 11, 28, 12, tzinfo=timezone.utc)


@pytest.fixture
def reads(monkeypatch):
    """The connectors' snapshots this test's runs took (source names, in order)."""
    taken: list[str] = []
    for connector in (GpuMetricsConnector, AwsListing):
        def counted(self, con, scratch, now, read=connector.snapshot):
            taken.append(self.config.name)
            return read(self, con, scratch, now)
        monkeypatch.setattr(connector, "snapshot", counted)
    return taken


def inventory(tmp_path: Path, now: datetime = NOW, **source):
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "gpus", "kind": "gpu-metrics", "path": str(tmp_path / "gpu"), **source}]})
    [outcome] = run_inventory(config, now=now)
    assert outcome.error is None, outcome.error
    return outcome


def test_files_read_before_are_not_read_again_until_a_byte_of_them_their_config_or_their_partitions_change(
        tmp_path, reads):
    """The demo's hourly inventory read its 746,322 GPU rows again each hour to find them
    unchanged (2.9 CPU s). Their file rewritten in place with the same size and time, the
    source's config changed, a partition damaged in the lake: each read again."""
    shutil.copytree(DATA / "gpu", tmp_path / "gpu")
    first = inventory(tmp_path)
    assert first.rows and not first.unchanged and reads == ["gpus"]
    again = inventory(tmp_path, NOW + timedelta(hours=1))
    assert reads == ["gpus"], "read again"
    assert (again.rows, again.unchanged, again.data_through) == ({}, first.rows, first.data_through)
    assert again.lines() == [line.replace("rows stored", "rows unchanged, not stored again") for line in first.lines()]

    export = tmp_path / "gpu" / "dcgm-export.csv"
    stat, text = export.stat(), export.read_text()
    export.write_text(text.replace("i-0ddd,0,2026-11-20 10:00:00,1.0", "i-0ddd,0,2026-11-20 10:00:00,5.0"))
    os.utime(export, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as `cp -p` or `rsync -t` leave it
    assert export.stat().st_size == stat.st_size
    changed = inventory(tmp_path)
    assert reads == ["gpus"] * 2
    assert changed.rows == {"gpu_utilization day=2026-11-20": first.rows["gpu_utilization day=2026-11-20"]}
    assert set(changed.unchanged) == set(first.rows) - set(changed.rows)

    inventory(tmp_path, lookback_hours=72)  # the config decides what a read gives: read again (the same rows)
    assert reads == ["gpus"] * 3
    inventory(tmp_path, lookback_hours=72)
    assert reads == ["gpus"] * 3

    [damaged] = (tmp_path / "lake" / "gpu_utilization").glob("source=gpus/day=2026-11-20/data.parquet")
    damaged.write_bytes(damaged.read_bytes()[:-20] + bytes(20))
    repaired = inventory(tmp_path, lookback_hours=72)
    assert reads == ["gpus"] * 4
    assert repaired.rows == changed.rows

    (tmp_path / "gpu" / "more.csv").write_text(text.replace("i-0ddd", "i-0fff"))  # a file added
    assert inventory(tmp_path, lookback_hours=72).rows
    assert reads == ["gpus"] * 5


def test_a_read_that_warned_or_whose_files_moved_under_it_is_read_again(tmp_path, reads, monkeypatch, caplog):
    """A warning is said by each run that reads (a fingerprint would silence it); files changed
    while they were read may hold other bytes than those hashed before: neither is recorded."""
    shutil.copytree(DATA / "gpu", tmp_path / "gpu")
    (tmp_path / "gpu" / "_partial").mkdir()
    (tmp_path / "gpu" / "_partial" / "late.csv").write_text("resource_id,gpu,hour,util_pct,metric\n")
    for run in (1, 2):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            inventory(tmp_path)
        assert reads == ["gpus"] * run
        assert [r for r in caplog.records if "_partial" in r.getMessage()], "the warning said again"
    shutil.rmtree(tmp_path / "gpu" / "_partial")

    export = tmp_path / "gpu" / "dcgm-export.csv"
    read = GpuMetricsConnector.snapshot

    def touched(self, con, scratch, now):
        os.utime(export, ns=(0, export.stat().st_mtime_ns + 1))  # written while read
        return read(self, con, scratch, now)
    monkeypatch.setattr(GpuMetricsConnector, "snapshot", touched)
    inventory(tmp_path)
    monkeypatch.setattr(GpuMetricsConnector, "snapshot", read)
    inventory(tmp_path)
    inventory(tmp_path)
    assert reads == ["gpus"] * 4  # the touched read, then the one after it; not the next


def test_a_snapshot_of_the_same_files_on_another_day_is_read_and_stored_for_that_day(tmp_path, reads):
    """A table of snapshot dates keeps one per day: the same files read the next day are a
    new day's snapshot, stored as before."""
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "tags", "kind": "aws-tags", "path": str(DATA / "tags" / "get-resources.json")}]})
    [first] = run_inventory(config, now=NOW)
    [same_day] = run_inventory(config, now=NOW + timedelta(hours=3))
    assert reads == ["tags"] and same_day.unchanged == first.rows and not same_day.rows
    [next_day] = run_inventory(config, now=NOW + timedelta(days=1))
    assert reads == ["tags"] * 2
    assert list(next_day.rows) == ["resource_tags snapshot_date=2026-11-29"]
    assert Lake.of(config).read_state("inventory_inputs")["tags"]["day"] == "2026-11-29"


def test_a_source_of_two_tables_not_read_again_tells_them_in_the_order_its_read_did(tmp_path, monkeypatch):
    """s3-objects stores s3_objects, then s3_buckets: a run that reads nothing says them in that order."""
    read = []
    monkeypatch.setattr(S3ObjectsConnector, "snapshot",
                        lambda self, *args, snapshot=S3ObjectsConnector.snapshot: read.append(1) or snapshot(self, *args))
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "s3", "kind": "s3-objects", "path": str(DATA / "s3" / "listing.csv"),
         "lifecycle_path": str(DATA / "s3" / "lifecycle.json")}]})
    [first] = run_inventory(config, now=NOW)
    [again] = run_inventory(config, now=NOW)
    assert len(read) == 1 and list(first.rows) == ["s3_objects snapshot_date=2026-11-28", "s3_buckets snapshot_date=2026-11-28"]
    assert again.lines() == [line.replace("rows stored", "rows unchanged, not stored again") for line in first.lines()]


def test_a_file_rewritten_after_its_hash_is_not_recorded_under_the_old_bytes(tmp_path, reads, monkeypatch):
    """review50b: the files' stats were taken after hashing them: a file rewritten between its hash and
    its stat was recorded under the old bytes' digest, so the old bytes written back later were not read
    again while the lake held the new ones'."""
    shutil.copytree(DATA / "gpu", tmp_path / "gpu")
    export = tmp_path / "gpu" / "dcgm-export.csv"
    old = export.read_text()
    hashed = inventory_inputs.sha256_file

    def rewritten(file):
        digest = hashed(file)
        if file == export:
            export.write_text(old.replace("i-0ddd,0,2026-11-20 10:00:00,1.0", "i-0ddd,0,2026-11-20 10:00:00,5.0"))
        return digest
    monkeypatch.setattr(inventory_inputs, "sha256_file", rewritten)
    inventory(tmp_path)
    monkeypatch.setattr(inventory_inputs, "sha256_file", hashed)
    export.write_text(old)
    inventory(tmp_path)
    assert reads == ["gpus"] * 2


def test_another_pyarrow_or_tz_database_reads_again(tmp_path, reads, monkeypatch):
    """review50b: a reader's library (pyarrow) or the tz database (a zone's rules changed) may read the
    same files otherwise: the digest holds their versions."""
    shutil.copytree(DATA / "gpu", tmp_path / "gpu")
    inventory(tmp_path)
    inventory(tmp_path)
    assert reads == ["gpus"]
    monkeypatch.setattr(inventory_inputs.metadata, "version", lambda package: "99.0")
    inventory(tmp_path)
    assert reads == ["gpus"] * 2
    zones = tmp_path / "zoneinfo"
    zones.mkdir()
    (zones / "tzdata.zi").write_text("# version 2099a\n")
    monkeypatch.setattr(inventory_inputs.zoneinfo, "TZPATH", (str(zones),))
    inventory(tmp_path)
    (zones / "tzdata.zi").write_text("# version 2099b\n")
    inventory(tmp_path)
    assert reads == ["gpus"] * 4


def test_a_plugin_of_one_top_level_module_hashes_its_file_alone(tmp_path, monkeypatch):
    """review50b: a connector that is a top-level module made its folder (site-packages) the code
    hashed, every .py there: its file alone is its code."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "solo_plugin.py").write_text("class Solo:\n    def inputs(self):\n        return []\n")
    (site / "unrelated.py").write_text("A = 1\n")
    monkeypatch.syspath_prepend(str(site))
    import solo_plugin
    [source] = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "gpus", "kind": "gpu-metrics", "path": str(site)}]}).inventory

    def digest() -> str:
        inventory_inputs._code_digest.cache_clear()
        return inventory_inputs.inputs(solo_plugin.Solo(), source).digest
    first = digest()
    (site / "unrelated.py").write_text("A = 2\n")
    assert digest() == first
    (site / "solo_plugin.py").write_text("class Solo:\n    def inputs(self):\n        return [] \n")
    assert digest() != first
