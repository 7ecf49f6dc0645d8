"""RELIABILITY 46: ingest in flat memory whatever the number or size of the parts; DuckDB
spills into the lake's staging area; out of memory and a full disk are reported as such.

The figures at 1M-100M lines are bench/ingest_bench.py's; these tests are small and
measure what is deterministic: how parts are staged, DuckDB's own peak memory and spill
per query (its profiler, logged by service.core.staging), and the errors."""

from __future__ import annotations

import gzip
import logging
from datetime import date
from pathlib import Path

from decimal import Decimal

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import service.core.lake as lake_module
import service.core.staging as staging
import service.ingest.rollups as rollups
from connectors.aws_export import PARTS_AT_ONCE
from connectors.synthetic.billing import generate_organisation
from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import DataError, ResourceError, duckdb_error
from service.core.lake import Lake
from service.core.schema import COST_COLUMNS
from service.ingest.billing import ingest
from service.ingest.inventory import run_inventory
from tests.aws_exports import legacy_csv, line

START = date(2026, 11, 3)
KINDS = {"legacy-csv.gz": "aws-cur", "csv.gz": "aws-cur2", "parquet": "aws-cur2", "focus-csv": "focus"}


def config(lake: Path, kind: str, location: Path):
    return parse_config({"lake": str(lake), "sources": [{"name": "bill", "kind": kind, "location": str(location)}]})


def committed(result) -> list[tuple]:
    assert [o.error for o in result.outcomes] == [None] * len(result.outcomes)
    return [(e.billing_period, e.rows, e.totals[0].billed_cost, e.totals[0].effective_cost)
            for o in result.outcomes for e in o.entries]


def expected(generation) -> list[tuple]:
    return [(p.billing_period, p.rows, p.billed_cost, p.effective_cost) for p in generation.periods]


def staged_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "service.core.staging" and hasattr(r, "peak_bytes")]


@pytest.fixture(scope="module")
def bills(tmp_path_factory):
    """The same three days of the organisation in every layout, in 2 and in 24 parts."""
    out = tmp_path_factory.mktemp("bills")
    return {parts: generate_organisation(out / f"parts-{parts}", days=3, start=START, seed=46, parts=parts,
                                         formats=tuple(KINDS)) for parts in (2, 24)}


@pytest.mark.slow
def test_46_parts_are_staged_one_at_a_time_so_memory_does_not_grow_with_their_number(tmp_path, bills, monkeypatch,
                                                                                       caplog):
    # 24 CSV.gz parts read at once hold a 30.5 MB buffer each: far above this limit (two at a time fit).
    monkeypatch.setattr(lake_module, "WRITER_MEMORY_LIMIT", "160MB")
    caplog.set_level(logging.DEBUG, logger="service.core.staging")
    peaks = {}
    for parts, generation in bills.items():
        caplog.clear()
        result = ingest(config(tmp_path / f"lake-{parts}", "aws-cur", generation.exports["legacy-csv.gz"]))
        assert committed(result) == expected(generation)
        records = staged_records(caplog)
        groups = -(-parts // PARTS_AT_ONCE)  # each group of parts its own query, in turn
        assert [r.part for r in records] == list(range(1, groups + 1))
        peaks[parts] = max(r.peak_bytes for r in records)
    assert 0 < peaks[24] <= peaks[2] * 1.1 + (4 << 20), peaks  # bounded by one group, not by how many


@pytest.mark.slow
def test_46_every_layout_ingests_exactly_under_a_small_memory_limit(tmp_path, bills, monkeypatch):
    monkeypatch.setattr(lake_module, "WRITER_MEMORY_LIMIT", "100MB")
    generation = bills[24]
    for fmt, kind in KINDS.items():
        result = ingest(config(tmp_path / f"lake-{len(fmt)}-{kind}", kind, generation.exports[fmt]))
        assert committed(result) == expected(generation), fmt


@pytest.mark.slow
def test_46_the_writer_spills_into_the_lake_staging_area(tmp_path, monkeypatch, caplog):
    """An inventory snapshot is sorted on every column before it is written: under a tiny
    limit that sort spills, inside the sandbox, and the snapshot is complete."""
    rows = 900_000
    tags = tmp_path / "tags.parquet"
    duckdb.sql(f"COPY (SELECT 'arn:aws:ec2:us-east-1:1:instance/i-' || md5(i::VARCHAR) AS resource_id, 'us-east-1' "
               f"AS region, 'team' AS key, 'nlp-' || (i % 97) AS value FROM range({rows}) t(i)) TO '{tags}' (FORMAT parquet)")
    # small enough that the sort spills, large enough that DuckDB's fixed per-thread buffers
    # never run it out of memory (80 MB did, once, on a loaded machine)
    monkeypatch.setattr(lake_module, "WRITER_MEMORY_LIMIT", "128MB")
    caplog.set_level(logging.DEBUG, logger="service.core.commit")
    cfg = parse_config({"lake": str(tmp_path / "lake"), "inventory": [{"name": "tags", "kind": "aws-tags",
                                                                       "path": str(tags)}]})
    [outcome] = run_inventory(cfg)
    assert outcome.error is None and list(outcome.rows.values()) == [rows]
    [record] = [r for r in caplog.records if hasattr(r, "spilled_bytes")]
    # DuckDB's limit bounds its buffer pool; allocations outside it (readers, the sort's
    # payload blocks) let the peak pass it by some MB (89 MB of 80 seen under load)
    assert record.spilled_bytes > 0 and record.peak_bytes <= 160 << 20
    lake = Lake(cfg.lake)
    con = lake.writer()
    assert Path(con.execute("SELECT current_setting('temp_directory')").fetchone()[0]).is_relative_to(lake.staging)


def test_46_out_of_memory_is_reported_as_such_not_as_a_damaged_file(tmp_path, bills, monkeypatch):
    monkeypatch.setattr(lake_module, "WRITER_MEMORY_LIMIT", "16MB")  # below one CSV.gz read buffer
    export = bills[2].exports["csv.gz"]
    cfg = config(tmp_path / "lake", "aws-cur2", export)
    failures = [o for o in ingest(cfg).outcomes if o.status == "failed"]
    assert failures and all(isinstance(o.error, ResourceError) for o in failures)
    message = str(failures[0].error)
    assert message.count("out of memory") == 1 and "damaged" not in message and "UTF-8" not in message
    assert not Lake(cfg.lake).ledger()
    (tmp_path / "spendlake.yaml").write_text(f"lake: {tmp_path / 'lake'}\nsources:\n"
                                             f"  - {{name: bill, kind: aws-cur2, location: '{export}'}}\n")
    done = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "ingest"])
    assert done.exit_code == 3 and "out of memory" in done.output and "Traceback" not in done.output


def test_46_disk_full_is_reported_as_such(tmp_path, bills, monkeypatch):
    """DuckDB's ENOSPC, and the OS's while a staged file is written, both say 'disk full'."""
    with pytest.raises(duckdb.IOException) as raised:
        duckdb.sql("COPY (SELECT range AS i, md5(range::VARCHAR) FROM range(200000)) TO '/dev/full' (FORMAT parquet)")
    error = duckdb_error(raised.value, "could not read the delivery", where="x")
    assert isinstance(error, ResourceError) and str(error).startswith("x: disk full")

    real = staging.pq.ParquetWriter.__init__
    monkeypatch.setattr(staging.pq.ParquetWriter, "__init__",
                        lambda self, path, *args, **kw: real(self, "/dev/full", *args, **kw))
    cfg = config(tmp_path / "lake", "aws-cur2", bills[2].exports["parquet"])
    [failure] = [o for o in ingest(cfg).outcomes if o.status == "failed"]
    assert isinstance(failure.error, ResourceError) and "disk full" in str(failure.error)
    assert failure.error.where.startswith(str(tmp_path / "lake" / "_staging")), failure.error  # the file, not the lake
    assert "damaged" not in str(failure.error) and not Lake(cfg.lake).ledger()


@pytest.mark.slow
def test_46_a_bad_value_after_the_first_streamed_batch_is_a_data_error_naming_its_row(tmp_path):
    """DuckDB's errors reach the stager through Arrow as OSError: they must stay data errors."""
    bad_row = staging.BATCH_ROWS + 12_345
    header, good, bad = legacy_csv([line(cost="1"), line(cost="oops")]).decode().splitlines()
    rows = [good] * (bad_row - 1) + [bad] + [good] * 1000
    export = tmp_path / "cur.csv.gz"
    export.write_bytes(gzip.compress(("\n".join([header, *rows]) + "\n").encode(), compresslevel=1))
    [outcome] = ingest(config(tmp_path / "lake", "aws-cur", export)).outcomes
    assert isinstance(outcome.error, DataError) and not isinstance(outcome.error, ResourceError)
    message = str(outcome.error)
    assert f"row {bad_row}" in message and "'oops' is not a number" in message
    assert "could not write to the lake" not in message


def test_46_small_batches_are_written_as_full_row_groups_and_the_rows_tie_out(tmp_path, bills, monkeypatch):
    """Batches are read small (DuckDB's memory per batch in flight) and buffered into the lake
    file's row groups, for one period and for a delivery whose batches mix periods."""
    monkeypatch.setattr(staging, "BATCH_ROWS", 700)
    monkeypatch.setattr(staging, "ROW_GROUP_ROWS", 2_000)
    generation = bills[2]
    for fmt, kind in (("focus-csv", "focus"), ("parquet", "aws-cur2")):
        cfg = config(tmp_path / f"lake-{kind}", kind, generation.exports[fmt])
        assert committed(ingest(cfg)) == expected(generation), fmt
        for path in (tmp_path / f"lake-{kind}").glob("costs/**/data.parquet"):
            meta = pq.ParquetFile(path).metadata
            groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
            assert groups[:-1] == [2_000] * (len(groups) - 1) and 0 < groups[-1] <= 2_000, (fmt, groups)


def test_46_a_write_failing_on_a_later_batch_fails_the_delivery_and_leaves_the_lake_as_it_was(tmp_path, bills,
                                                                                               monkeypatch):
    """Batches are written on a thread while the next one is read: a write that fails on the
    third batch (the disk fills) still fails the delivery, says so, and commits nothing."""
    import errno
    monkeypatch.setattr(staging, "BATCH_ROWS", 700)
    monkeypatch.setattr(staging, "ROW_GROUP_ROWS", 700)
    calls, real = [], staging._PeriodFile.write

    def fills_the_disk(self, batch):
        calls.append(batch.num_rows)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, batch)
    monkeypatch.setattr(staging._PeriodFile, "write", fills_the_disk)
    cfg = config(tmp_path / "lake", "aws-cur2", bills[2].exports["parquet"])
    [failure] = [o for o in ingest(cfg).outcomes if o.status == "failed"]
    assert len(calls) == 3 and isinstance(failure.error, ResourceError) and "disk full" in str(failure.error)
    assert not Lake(cfg.lake).ledger() and not list((tmp_path / "lake").glob("costs/**/*.parquet"))


def test_46_lake_cost_files_keep_time_statistics_and_text_dictionaries(tmp_path, bills):
    """The lake's cost files: min/max statistics on the time columns (a window skips row
    groups by them), dictionaries on text and tag keys and values (they repeat), and neither
    on money (unique values: both cost the single-threaded writer a quarter of its time)."""
    cfg = config(tmp_path / "lake", "aws-cur2", bills[2].exports["parquet"])
    assert committed(ingest(cfg)) == expected(bills[2])
    for path in (tmp_path / "lake").glob("costs/**/data.parquet"):
        group = pq.ParquetFile(path).metadata.row_group(0)
        columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
        for name in ("ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart"):
            assert columns[name].is_stats_set and columns[name].statistics.has_min_max, name
        for name in ("ServiceName", "ResourceId", "Tags.key_value.key", "Tags.key_value.value"):
            assert "RLE_DICTIONARY" in columns[name].encodings, name
        for name in ("BilledCost", "EffectiveCost"):
            assert not columns[name].is_stats_set and "RLE_DICTIONARY" not in columns[name].encodings, name


def test_46_columns_a_focus_export_lacks_are_stored_as_typed_nulls_in_canonical_order(tmp_path):
    """The FOCUS connector leaves out the columns the file does not have (DuckDB need not compute
    them); the staged file still has every canonical column, in order and type, NULL."""
    export = tmp_path / "export" / "bill.csv"
    export.parent.mkdir()
    export.write_text("BillingPeriodStart,ChargePeriodStart,BilledCost,BillingCurrency,SubAccountId\n"
                      "2026-10-01T00:00:00Z,2026-10-02T00:00:00Z,1.50,USD,a\n"
                      "2026-10-01T00:00:00Z,2026-10-03T00:00:00Z,2.25,USD,b\n")
    [outcome] = ingest(config(tmp_path / "lake", "focus", export.parent)).outcomes
    assert outcome.error is None and outcome.entries[0].totals[0].billed_cost == Decimal("3.75")
    [path] = (tmp_path / "lake").glob("costs/**/data.parquet")
    con = duckdb.connect()
    assert pq.read_schema(path) == staging.canonical_schema(con)
    row = con.execute("SELECT * FROM read_parquet(?, hive_partitioning = false) ORDER BY SubAccountId LIMIT 1", [str(path)]).fetchone()
    present = {"BillingPeriodStart", "ChargePeriodStart", "BilledCost", "BillingCurrency", "SubAccountId"}
    names = [name for name, _ in COST_COLUMNS]
    assert [names[i] for i, value in enumerate(row) if value is not None] == [n for n in names if n in present]


def test_46_columns_an_aws_export_lacks_are_added_by_the_stager_as_typed_nulls(tmp_path, bills, monkeypatch):
    """The AWS connectors leave out the canonical columns the export has no field for (DuckDB
    need not compute ~30 all-NULL columns); the lake file still has every column, in order."""
    batches: list[list[str]] = []
    complete = staging._complete
    monkeypatch.setattr(staging, "_complete", lambda rows, schema: batches.append(rows.schema.names) or complete(rows, schema))
    generation = bills[2]
    cfg = config(tmp_path / "lake", "aws-cur", generation.exports["legacy-csv.gz"])
    assert committed(ingest(cfg)) == expected(generation)
    assert batches and all("SkuId" not in names and "BilledCost" in names for names in batches)
    con = duckdb.connect()
    for path in (tmp_path / "lake").glob("costs/**/data.parquet"):
        assert pq.read_schema(path) == staging.canonical_schema(con)
        [(skus, costs)] = con.execute("SELECT count(SkuId), count(BilledCost) FROM read_parquet(?)", [str(path)]).fetchall()
        assert skus == 0 and costs > 0



def one_line_bill(tmp_path: Path):
    """The config of a lake and a FOCUS export of one line."""
    export = tmp_path / "export" / "bill.csv"
    export.parent.mkdir()
    export.write_text("BillingPeriodStart,ChargePeriodStart,BilledCost,BillingCurrency\n"
                      "2026-10-01T00:00:00Z,2026-10-02T00:00:00Z,1.50,USD\n")
    return config(tmp_path / "lake", "focus", export.parent)


def test_46_the_ingest_log_marks_where_the_rollup_build_begins(tmp_path, caplog):
    """bench/ingest_bench.py splits the ingest's wall time at this line (the rollup build has
    no counterpart in the bare copy it compares with)."""
    with caplog.at_level(logging.INFO, logger="service.ingest.rollups"):
        [outcome] = ingest(one_line_bill(tmp_path)).outcomes
    assert outcome.error is None
    assert [r.getMessage() for r in caplog.records if r.name == "service.ingest.rollups"][0].startswith(
        "building the attribution rollups")


def test_11_a_rollup_build_on_a_full_disk_warns_disk_full_and_the_commit_stands(tmp_path, monkeypatch):
    """The warning carried DuckDB's offsets and JSON ('IO Error: Async write failed for range
    [offset=0, size=4095]: {"exception_type":"IO",...}') where every other write says disk full."""
    def full(*_args, **_kwargs):
        raise duckdb.IOException('IO Error: Async write failed for range [offset=0, size=4095]: {"exception_type":'
                                 '"IO","exception_message":"Could not write file \\"/lake/_staging/r.parquet\\": '
                                 'No space left on device","errno":"28"}')

    monkeypatch.setattr(rollups, "materialise", full)
    result = ingest(one_line_bill(tmp_path))  # the build's failure is one of the ingest's warnings (break42)
    [outcome] = result.outcomes
    assert outcome.status == "committed"
    [warning] = result.warnings
    assert warning.endswith('retries): disk full: Could not write file "/lake/_staging/r.parquet": No '
                                         "space left on device — free disk space on the lake's file system (the "
                                         "lake's _staging directory holds staged files and DuckDB's spill files), "
                                         "then run the command again; the previous data is intact")
