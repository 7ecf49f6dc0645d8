"""One delivery per (source, billing period) whatever the layout (RELIABILITY 40).

Every file under a source's location that holds rows of a billing period is that period's
delivery: one folder, several, Hive partitions by any column, CSV beside Parquet. Its id is
stable while the files are (re-ingesting is a no-op) and the period grows and shrinks with
its files. Totals tie to an independent DuckDB sum over the export files."""

from __future__ import annotations

import os
import shutil
from decimal import Decimal
from pathlib import Path

import boto3
import duckdb
import pyarrow.parquet as pq
import pytest
from billing_helpers import failures
from layout_exports import FORMATS, WRITERS, duckdb_sums, focus, lake_sums
from moto import mock_aws

from service.core.config import parse_config
from service.core.lake import Lake
from service.core.schema import COST_COLUMN_NAMES
from service.ingest.billing import IngestResult, ingest
from tests.conftest import DATA

TOOLKIT = DATA / "focus-toolkit"


def run(tmp_path: Path, kind: str, location: Path | str) -> tuple[Lake, IngestResult]:
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "src", "kind": kind, "location": str(location)}]})
    return Lake(config.lake), ingest(config)


def lines(result: IngestResult) -> list[str]:
    return [text for outcome in result.outcomes for text in outcome.lines()]


def committed(result: IngestResult) -> list[str]:
    """The periods committed, once per commit (a period committed twice appears twice)."""
    return sorted(e.billing_period for o in result.outcomes if o.status == "committed" for e in o.entries)


def statuses(result: IngestResult) -> set[str]:
    return {o.status for o in result.outcomes}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_40_a_period_spread_over_folders_and_hive_partitions_is_one_delivery(tmp_path, kind):
    export, write = tmp_path / "export", WRITERS[kind]
    first, second = FORMATS[kind]
    files = {  # May 2024 sits in four places; one file holds May and June
        "2024-05/part-0" + first: [("2024-05", "USD", "1.10"), ("2024-05", "EUR", "2.20")],
        "other/deep/part-9" + second: [("2024-05", "USD", "0.30")],
        "SubAccountId=000123/region=eu-west-1/part-3" + first: [("2024-05", "USD", "0.04")],
        "BillingPeriod=2024-05/year=2024/month=5/part-4" + second: [("2024-05", "EUR", "0.000000000001")],
        "2024-06/part-0" + first: [("2024-06", "USD", "5.00")],
        "mixed/part-5" + first: [("2024-05", "USD", "0.005"), ("2024-06", "USD", "7")],
    }
    for name, rows in files.items():
        (export / name).parent.mkdir(parents=True, exist_ok=True)
        write(export / name, rows)

    lake, result = run(tmp_path, kind, export)
    assert failures(result) == []
    assert committed(result) == ["2024-05", "2024-06"], lines(result)  # each once: nothing replaced another
    assert lake_sums(lake) == duckdb_sums(kind, export)
    assert lake_sums(lake)[("2024-05", "USD")] == Decimal("1.445")
    may = lake.ledger_entry("src", "2024-05")  # mixed/part-5 joins May and June: one delivery of six files
    assert may.rows == 6 and len(may.files) == 6 and lake.ledger_entry("src", "2024-06").delivery_id == may.delivery_id

    again = run(tmp_path, kind, export)[1]  # the same files: the same ids, nothing read again
    assert statuses(again) == {"unchanged"}, lines(again)
    assert lake.ledger_entry("src", "2024-05").delivery_id == may.delivery_id

    (export / "other" / "deep" / ("part-9" + second)).unlink()  # the period shrinks with its files
    shrunk = run(tmp_path, kind, export)[1]
    assert failures(shrunk) == [] and "2024-05" in committed(shrunk)
    assert lake_sums(lake) == duckdb_sums(kind, export)
    assert lake_sums(lake)[("2024-05", "USD")] == Decimal("1.145")


@pytest.mark.slow
def test_40_the_focus_toolkit_hive_folders_keep_every_row(tmp_path):
    """Hive-partitioned FOCUS Parquet (`SubAccountId=…/` by DuckDB, `BillingPeriodStart=…/
    BillingCurrency=…/` by the toolkit, values only in the folder names): all 150 rows and
    the reference BilledCost, where each folder used to replace the one before."""
    for name, billed, accounts in (("duckdb/aws-1.2-hive-subaccount", "4755.24563683379750000", 4),
                                   ("convert/azure-1.2-strict-parquet-hive/focus_1_4_cost_and_usage",
                                    "3697.78416071230400000", 4)):
        lake, result = run(tmp_path / name.replace("/", "_"), "focus", TOOLKIT / name)
        assert failures(result) == [] and committed(result) == ["2026-05"], lines(result)
        assert lake.query().execute(
            "SELECT count(*), count(DISTINCT SubAccountId), list(DISTINCT BillingCurrency) FROM costs"
        ).fetchall() == [(150, accounts, ["USD"])]
        assert abs(lake_sums(lake)[("2026-05", "USD")] - Decimal(billed)) <= Decimal("150e-12")
        assert statuses(run(tmp_path / name.replace("/", "_"), "focus", TOOLKIT / name)[1]) == {"unchanged"}


def hive_layout(root: Path) -> None:
    """SubAccountId and BillingCurrency only in the folder names; RegionId in both (the
    file's value must win); a leading zero that a type guess would drop."""
    folder = root / "SubAccountId=000123" / "RegionId=eu-west-1" / "BillingCurrency=EUR"
    folder.mkdir(parents=True)
    path = folder / "part-0.parquet"
    focus(path, [("2024-05", "EUR", "2.5")])
    table = pq.read_table(path).drop_columns(["BillingCurrency"])
    pq.write_table(table.append_column("RegionId", [["us-east-1"]]), path)


def assert_hive_values(lake: Lake) -> None:
    assert lake.query().execute("SELECT SubAccountId, RegionId, BillingCurrency, BilledCost FROM costs").fetchall() \
        == [("000123", "us-east-1", "EUR", Decimal("2.5"))]
    [data] = lake.root.glob("costs/*/*/data.parquet")
    assert pq.read_schema(data).names == list(COST_COLUMN_NAMES)  # no `region`, no second RegionId


def test_40_hive_folder_values_fill_only_the_columns_a_file_lacks_as_text(tmp_path):
    hive_layout(tmp_path / "export")
    lake, result = run(tmp_path, "focus", tmp_path / "export")
    assert failures(result) == []
    assert_hive_values(lake)


@pytest.mark.slow
def test_40_hive_folder_values_are_read_from_s3_keys_too(tmp_path):
    """An S3 file is read from a download with a hashed name: the folders come from its key."""
    hive_layout(tmp_path / "export")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="exports")
        for path in (tmp_path / "export").rglob("*.parquet"):
            s3.upload_file(str(path), "exports", "focus/" + path.relative_to(tmp_path / "export").as_posix())
        lake, result = run(tmp_path, "focus", "s3://exports/focus")
    assert failures(result) == []
    assert_hive_values(lake)


def test_40_files_of_one_period_with_drifting_columns_union_by_name(tmp_path):
    folder = tmp_path / "export"
    (folder / "a").mkdir(parents=True)
    (folder / "b").mkdir()
    (folder / "a" / "old.csv").write_text(  # other order, no EffectiveCost, no ProviderName
        "ChargePeriodStart,BillingCurrency,BilledCost,BillingPeriodStart\n2024-05-02,USD,1.25,2024-05-01\n")
    (folder / "b" / "new.csv").write_text(  # an extra column the lake does not keep
        "BilledCost,x_Custom,EffectiveCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ProviderName\n"
        "2,zz,1.5,USD,2024-05-01,2024-05-03,AWS\n")
    focus(folder / "b" / "typed.parquet", [("2024-05", "USD", "0.75")])
    lake, result = run(tmp_path, "focus", folder)
    assert failures(result) == [] and committed(result) == ["2024-05"]
    assert lake.query().execute(
        "SELECT BilledCost, EffectiveCost, ProviderName FROM costs ORDER BY BilledCost").fetchall() == [
        (Decimal("0.75"), Decimal("0.75"), "AWS"), (Decimal("1.25"), None, None), (Decimal("2"), Decimal("1.5"), "AWS")]
    assert lake_sums(lake) == duckdb_sums("focus", folder) == {("2024-05", "USD"): Decimal("4")}


@pytest.mark.slow
def test_40_break_it_rename_rehive_mix_delete_and_drop_a_folder(tmp_path):
    """Each step changes the layout; the period always holds exactly the rows of the files
    there, tied to DuckDB's sum, and a second ingest of the same files reads nothing."""
    export = tmp_path / "export"
    (export / "2024-05").mkdir(parents=True)
    focus(export / "2024-05" / "a.csv", [("2024-05", "USD", "1"), ("2024-05", "USD", "2")])
    focus(export / "2024-05" / "b.parquet", [("2024-05", "USD", "4")])

    def step(expected: str) -> None:
        lake, result = run(tmp_path, "focus", export)
        assert failures(result) == [] and committed(result) == ["2024-05"], lines(result)
        assert lake_sums(lake) == duckdb_sums("focus", export) == {("2024-05", "USD"): Decimal(expected)}
        assert statuses(run(tmp_path, "focus", export)[1]) == {"unchanged"}

    step("7")
    (export / "2024-05").rename(export / "may")  # rename the folder
    step("7")
    hive = export / "may" / "SubAccountId=1" / "region=us"  # a second Hive level
    hive.mkdir(parents=True)
    (export / "may" / "b.parquet").rename(hive / "b.parquet")
    step("7")
    (export / "late").mkdir()  # CSV.gz beside Parquet and CSV, in another folder
    focus(export / "late" / "c.csv.gz", [("2024-05", "USD", "0.5")])
    step("7.5")
    (export / "may" / "a.csv").unlink()  # delete one part
    step("4.5")
    shutil.rmtree(export / "late")  # the period was spread over two folders; one goes
    step("4")
    path = hive / "b.parquet"  # the same bytes written again: a new version of the file
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    step("4")


@pytest.mark.slow
def test_40_a_file_that_cannot_be_read_holds_its_period_back(tmp_path):
    export = tmp_path / "export"
    (export / "x").mkdir(parents=True)
    (export / "y").mkdir()
    focus(export / "x" / "a.csv", [("2024-05", "USD", "1")])
    focus(export / "y" / "b.parquet", [("2024-05", "USD", "2")])
    focus(export / "y" / "june.csv", [("2024-06", "USD", "5")])
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("3")

    (export / "y" / "b.parquet").write_bytes(b"PAR1 not really")  # replaced by something unreadable
    focus(export / "y" / "june.csv", [("2024-06", "USD", "6")])
    result = run(tmp_path, "focus", export)[1]
    errors = failures(result)
    assert len(errors) == 2 and all(str(export / "y" / "b.parquet") in e for e in errors), errors
    assert committed(result) == ["2024-06"]  # the other period still commits
    assert lake_sums(lake) == {("2024-05", "USD"): Decimal("3"), ("2024-06", "USD"): Decimal("6")}

    focus(export / "y" / "b.parquet", [("2024-05", "USD", "2.5")])
    result = run(tmp_path, "focus", export)[1]
    assert failures(result) == [] and committed(result) == ["2024-05"]
    assert lake_sums(lake) == duckdb_sums("focus", export)


def test_40_what_ingest_knows_of_a_sources_files_goes_with_forget(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    focus(export / "a.csv", [("2024-05", "USD", "1")])
    focus(export / "b.csv", [("2024-05", "USD", "2")])
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and set(lake.read_state("file_periods")) == {"src"}
    lake.forget("src")
    assert lake.read_state("file_periods") == {} and lake.ledger() == []


def test_40_an_older_version_of_a_focus_toolkit_bundle_is_not_read_beside_the_newer(tmp_path):
    """`focus-toolkit convert --on-exists version` writes the new bundle into `run-<id>/` inside
    the old one, byte for byte the same periods: read together they doubled the bill (300 rows,
    twice the reference BilledCost). The version generated last counts, the other is said once."""
    import json

    out = tmp_path / "out"
    shutil.copytree(TOOLKIT / "convert/gcp-1.2-synthetic-parquet-hive", out)
    newer = out / "run-9865fbe6923c"
    shutil.copytree(TOOLKIT / "convert/gcp-1.2-synthetic-parquet-hive", newer)
    run_json = json.loads((newer / "_run.json").read_text())
    (newer / "_run.json").write_text(json.dumps(run_json | {"run_id": "9865fbe6923c",
                                                             "generated_at": "2099-01-01T00:00:00+00:00"}))
    for dropped in sorted((newer / "synthetic_focus_1_4_cost_and_usage").iterdir())[:1]:
        shutil.rmtree(dropped)  # the newer conversion has fewer sub-accounts: its rows, not the old ones, count
    lake, result = run(tmp_path, "focus", out)
    assert failures(result) == [] and committed(result) == ["2026-05"], lines(result)
    assert f"src {out}: skipped, a focus-data-toolkit bundle that run-9865fbe6923c/ replaces (generated later, as " \
           "their _run.json say): its files are not read, they hold the same billing periods" in lines(result)
    [(rows, billed)] = lake.query().execute("SELECT count(*), sum(BilledCost) FROM costs").fetchall()
    [(expected_rows, expected)] = duckdb.sql(
        f"SELECT count(*), sum(BilledCost) FROM read_parquet('{newer}/synthetic_focus_1_4_cost_and_usage/*/*.parquet')"
    ).fetchall()
    assert 0 < rows == expected_rows < 150 and abs(billed - expected) <= Decimal(rows) * Decimal("1e-12")
    assert statuses(run(tmp_path, "focus", out)[1]) == {"unchanged", "skipped"}
