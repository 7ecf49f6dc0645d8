"""A query versions its rollups by the inventory snapshots it reads (`inventory_latest`, with
`clusters:` every job snapshot's `jobs_basis`) from the SHA-256 each snapshot's record holds:
no snapshot file is read whole, the versions are those of hashing the files (rollups stored
before stay valid), and a snapshot without a usable record is still hashed."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from service.attribution.jobs import basis_of, jobs_basis
from service.attribution.rollup_versions import inventory_latest
from service.core import commit, snapshot_ledger
from service.core.commit import commit_snapshot
from service.core.config import load_config
from service.core.errors import SpendlakeError
from service.core.lake import Lake
from service.core.snapshot_ledger import RECORDS, record_file
from tests.test_inventory_integrity import JOBS, lake, snapshot, spendlake  # noqa: F401 (fixture)


def hashed_basis(lake: Lake) -> dict[str, str]:
    """`jobs_basis` as it was computed before records: every job snapshot's bytes hashed."""
    stamps = {}
    for source_dir in sorted(lake.table_dir("jobs").glob("source=*")):
        stamps[source_dir.name] = [(f.parent.name, hashlib.sha256(f.read_bytes()).hexdigest(), "")
                                   for f in sorted(source_dir.glob("snapshot_date=*/data.parquet"))]
    return basis_of(stamps)


@pytest.fixture
def hashed(monkeypatch) -> list[Path]:
    """The files `snapshot_ledger` hashes (and still hashed) but those it records as they are written."""
    seen: list[Path] = []
    real = snapshot_ledger.sha256_file

    def counting(path):
        if "_staging" not in Path(path).parts:
            seen.append(Path(path))
        return real(path)

    monkeypatch.setattr(snapshot_ledger, "sha256_file", counting)
    return seen


def tags_snapshot(lake: Lake, day: str, value: str) -> Path:
    con = duckdb.connect()
    try:
        relation = con.sql("SELECT 'i-1' AS resource_id, 'team' AS key, $v AS value", params={"v": value})
        return commit_snapshot(lake, con, relation, table="resource_tags", source="tags", key="snapshot_date",
                               value=day)
    finally:
        con.close()


def no_whole_reads(monkeypatch) -> None:
    read_bytes = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"read whole: {self}")
                        if self.name == "data.parquet" else read_bytes(self))


def test_the_jobs_basis_is_the_recorded_digests_without_reading_a_snapshot(lake, hashed, monkeypatch):
    config, lake = lake
    expected = hashed_basis(lake)
    no_whole_reads(monkeypatch)
    assert jobs_basis(lake) == expected and hashed == []


def test_the_latest_tag_snapshot_is_its_recorded_digest_and_the_versions_do_not_change(tmp_path, hashed,
                                                                                        monkeypatch):
    lake = Lake(tmp_path / "lake")
    tags_snapshot(lake, "2026-11-27", "a")
    latest = tags_snapshot(lake, "2026-11-28", "b")
    expected = {"source=tags": hashlib.sha256(latest.read_bytes()).hexdigest()}
    no_whole_reads(monkeypatch)
    assert inventory_latest(lake) == expected and hashed == []


def test_a_snapshot_rewritten_with_the_same_records_changes_nothing_and_a_changed_one_does(lake, hashed):
    config, lake = lake
    before = jobs_basis(lake)
    assert spendlake(config, "inventory").exit_code == 0
    assert jobs_basis(lake) == before
    jobs_csv = Path(load_config(config).inventory[0].path)
    jobs_csv.write_text(JOBS.replace(",user1,", ",user9,"))
    assert spendlake(config, "inventory").exit_code == 0
    assert jobs_basis(lake) != before and jobs_basis(lake) == hashed_basis(lake) and hashed == []


def test_a_snapshot_without_records_is_hashed_as_before(lake, hashed):
    config, lake = lake
    expected = hashed_basis(lake)
    shutil.rmtree(lake.root / RECORDS)
    assert jobs_basis(lake) == expected and hashed == [snapshot(lake)]


@pytest.mark.parametrize("record", ["not json", "[]", '{"size": 1, "rows": 3000, "sha256": "x"}'])
def test_a_snapshot_whose_record_is_unreadable_or_does_not_describe_it_is_hashed(lake, hashed, record):
    config, lake = lake
    expected = hashed_basis(lake)
    record_file(lake.root, snapshot(lake)).write_text(record)
    assert jobs_basis(lake) == expected and hashed == [snapshot(lake)]


def test_a_snapshot_recorded_as_either_of_two_files_alike_mid_commit_is_hashed(lake, hashed):
    """While `inventory` moves a new file of the same size and rows into place, the record
    holds both: only hashing tells which one a query sees."""
    config, lake = lake
    expected = hashed_basis(lake)
    path = record_file(lake.root, snapshot(lake))
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "sha256": "0" * 64, "previous": record}))
    assert jobs_basis(lake) == expected and hashed == [snapshot(lake)]


def test_a_commit_on_a_read_only_lake_raises_the_named_error_not_the_staged_files_unlink(tmp_path, monkeypatch):
    # a lake remounted read-only under the rules job: the staged file is written, placing it fails with
    # EROFS, and removing it fails the same way; the named error must win over the unlink's OSError
    def read_only(*_args, **_kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    unlink = Path.unlink
    monkeypatch.setattr(commit, "install", read_only)
    monkeypatch.setattr(Path, "unlink", lambda self, *a, **k: read_only() if "_staging" in self.parts
                        else unlink(self, *a, **k))
    with pytest.raises(SpendlakeError) as raised:
        tags_snapshot(Lake(tmp_path / "lake"), "2026-11-01", "a")
    assert raised.value.message == "read-only file system", raised.value
    assert raised.value.where == str(tmp_path / "lake") and "mount it read-write" in raised.value.hint
