"""`aws-cur2`: Data Exports CUR 2.0, Parquet and CSV.gz, OVERWRITE_REPORT and CREATE_NEW_REPORT."""

from __future__ import annotations

import gzip
from decimal import Decimal

import boto3
import duckdb
import pytest
from moto import mock_aws

from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from tests.aws_exports import cur2_table, line, local_put, s3_put, to_bytes, write_cur2, write_legacy


def config(tmp_path, location, name="lake"):
    return parse_config({"lake": str(tmp_path / name),
                         "sources": [{"name": "cur2", "kind": "aws-cur2", "location": str(location)}]})


def part(tmp_path, rows, fmt):
    con = duckdb.connect()
    return to_bytes(con, cur2_table(con, rows), tmp_path, fmt)


def costs(lake: Lake):
    return lake.query().execute(
        "SELECT billing_period, BillingCurrency, BilledCost, EffectiveCost, Tags, ServiceName, InvoiceId, "
        "ChargePeriodStart, SubAccountId FROM costs ORDER BY ALL").fetchall()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "csv.gz"])
def test_overwrite_and_create_new_layouts_give_the_same_lake(tmp_path, fmt):
    rows = [line("2026-10", "2.5", team="pretrain"), line("2026-10", "1.81E-8", kind="Tax", invoice="INV-1"),
            line("2026-10", "4", kind="SavingsPlanCoveredUsage", savingsPlan__SavingsPlanEffectiveCost="3")]
    first, second = part(tmp_path, rows[:1], fmt), part(tmp_path, rows[1:], fmt)
    write_cur2(local_put(tmp_path / "over"), prefix="exports", export="cur2", period="2026-10", execution="e1",
               parts=[part(tmp_path, [line("2026-10", "99")], fmt)], fmt=fmt)
    write_cur2(local_put(tmp_path / "over"), prefix="exports", export="cur2", period="2026-10", execution="e2",
               parts=[first, second], fmt=fmt)
    # CREATE_NEW_REPORT: an older delivery folder stays; only the newest manifest counts.
    write_cur2(local_put(tmp_path / "new"), prefix="exports", export="cur2", period="2026-10", execution="e1",
               parts=[part(tmp_path, [line("2026-10", "99")], fmt)], fmt=fmt, delivery_folder="20261103T010203Z-e1")
    write_cur2(local_put(tmp_path / "new"), prefix="exports", export="cur2", period="2026-10", execution="e2",
               parts=[first, second], fmt=fmt, delivery_folder="20261104T010203Z-e2")
    over, new = config(tmp_path, tmp_path / "over", "lake1"), config(tmp_path, tmp_path / "new", "lake2")
    ingest(over)
    ingest(new)
    assert costs(Lake(over.lake)) == costs(Lake(new.lake))
    got = costs(Lake(new.lake))
    assert [(r[2], r[3]) for r in got] == [(Decimal("1.81E-8"), Decimal("1.81E-8")), (Decimal("2.5"), Decimal("2.5")),
                                           (Decimal(4), Decimal(3))]
    assert {r[4].get("user_team") for r in got} == {"pretrain", None}
    assert {r[5] for r in got} == {"Amazon Elastic Compute Cloud"}  # from the product map / its JSON
    assert got[0][6] == "INV-1" and got[0][8] == "000123456789"
    assert got[0][7].isoformat() == "2026-10-02T03:00:00"
    assert [e.delivery_id for e in Lake(new.lake).ledger()] == ["e2"]
    assert [o.status for o in ingest(new).outcomes] == ["unchanged"]


def test_data_without_manifest_waits(tmp_path):
    write_cur2(local_put(tmp_path / "exp"), prefix="", export="cur2", period="2026-10", execution="e1",
               parts=[part(tmp_path, [line()], "parquet")], fmt="parquet", manifest=False)
    cfg = config(tmp_path, tmp_path / "exp" / "cur2")
    result = ingest(cfg)
    assert [(o.status, o.delivery.waiting) for o in result.outcomes] == [("waiting", "waiting for manifest")]
    assert not Lake(cfg.lake).ledger()


def test_two_periods_two_currencies_kept_apart(tmp_path):
    put = local_put(tmp_path / "exp")
    write_cur2(put, prefix="p", export="cur2", period="2026-09", execution="s1", fmt="parquet",
               parts=[part(tmp_path, [line("2026-09", "1"), line("2026-09", "2", currency="EUR")], "parquet")])
    write_cur2(put, prefix="p", export="cur2", period="2026-10", execution="o1", fmt="parquet",
               parts=[part(tmp_path, [line("2026-10", "5")], "parquet")])
    cfg = config(tmp_path, tmp_path / "exp")
    ingest(cfg)
    got = Lake(cfg.lake).query().execute(
        "SELECT billing_period, BillingCurrency, sum(BilledCost) FROM costs GROUP BY ALL ORDER BY ALL").fetchall()
    assert got == [("2026-09", "EUR", Decimal(2)), ("2026-09", "USD", Decimal(1)), ("2026-10", "USD", Decimal(5))]


def test_create_new_report_takes_the_manifest_written_last(tmp_path):
    import os

    put = local_put(tmp_path / "exp")
    # Folder names that do not sort by time (execution ids): the manifest's write time decides.
    write_cur2(put, prefix="", export="cur2", period="2026-10", execution="older", fmt="parquet",
               parts=[part(tmp_path, [line("2026-10", "1")], "parquet")], delivery_folder="zzz-older")
    write_cur2(put, prefix="", export="cur2", period="2026-10", execution="newer", fmt="parquet",
               parts=[part(tmp_path, [line("2026-10", "2")], "parquet")], delivery_folder="aaa-newer")
    metadata = tmp_path / "exp" / "cur2" / "metadata" / "BILLING_PERIOD=2026-10"
    os.utime(metadata / "zzz-older" / "cur2-Manifest.json", (1_800_000_000, 1_800_000_000))
    os.utime(metadata / "aaa-newer" / "cur2-Manifest.json", (1_800_000_100, 1_800_000_100))
    cfg = config(tmp_path, tmp_path / "exp")
    ingest(cfg)
    assert [(e.delivery_id, e.totals[0].billed_cost) for e in Lake(cfg.lake).ledger()] == [("newer", Decimal(2))]


def test_create_new_report_takes_the_execution_its_folder_dates_last_whatever_the_copy_times(tmp_path):
    """AWS names each CREATE_NEW_REPORT delivery folder by its execution id, which starts with the
    time it ran (`2025-12-28T13:14:37.728Z-8c5a76cc-…`, as real keys show). A copy without the
    write times (`cp -r`, rsync without -t) can leave the older manifest written last: it was
    the one read, an older bill. The folders' own times decide now; the write time only when a
    folder name carries none (the test above)."""
    import os

    put = local_put(tmp_path / "exp")
    folders = {"2026-11-03T05:00:29.516Z-a724c92c-3d21-4a7b-b82b-6b0f33fa60f5": "1",
               "2026-11-04T05:01:02.004Z-0d3c8e52-57d0-437d-851b-064e27aa8b06": "2"}
    for folder, cost in folders.items():
        write_cur2(put, prefix="", export="cur2", period="2026-10", execution=folder, fmt="parquet",
                   parts=[part(tmp_path, [line("2026-10", cost)], "parquet")], delivery_folder=folder)
    metadata = tmp_path / "exp" / "cur2" / "metadata" / "BILLING_PERIOD=2026-10"
    older, newer = folders
    os.utime(metadata / older / "cur2-Manifest.json", (1_800_000_100, 1_800_000_100))  # copied last
    os.utime(metadata / newer / "cur2-Manifest.json", (1_800_000_000, 1_800_000_000))
    cfg = config(tmp_path, tmp_path / "exp")
    ingest(cfg)
    assert [(e.delivery_id, e.totals[0].billed_cost) for e in Lake(cfg.lake).ledger()] == [(newer, Decimal(2))]


@pytest.mark.parametrize("kind", ["aws-cur2", "focus"])
def test_two_exports_for_one_period_fail_instead_of_replacing_each_other(tmp_path, kind):
    """Two Data Exports under one location (a daily and an hourly one, or two payers') both
    deliver 2026-10: kept apart by nothing, each ingest would replace the other's period, so
    the period fails naming both export folders and nothing is committed."""
    put = local_put(tmp_path / "exp")
    for export, cost in (("cur2-hourly", "1"), ("cur2-daily", "30")):
        write_cur2(put, prefix="exports", export=export, period="2026-10", execution=f"exec-{export}",
                   parts=[part(tmp_path, [line(cost=cost)], "parquet")], fmt="parquet")
    lake = tmp_path / "lake"
    cfg = parse_config({"lake": str(lake), "sources": [{"name": "cur", "kind": kind,
                                                        "location": str(tmp_path / "exp")}]})
    result = ingest(cfg)
    assert {o.status for o in result.outcomes} == {"failed"}
    error = str(result.outcomes[0].error)
    assert "2 Data Exports deliver 2026-10 under this location: exports/cur2-daily/, exports/cur2-hourly/" in error
    assert "give each export its own source" in error
    assert not Lake(lake).ledger()


def test_a_legacy_cur_under_kind_aws_cur2_says_kind_aws_cur_reads_it(tmp_path):
    # it said only "point it at the export's folder", which a legacy report's folder already is
    write_legacy(local_put(tmp_path / "exp"), prefix="cur", report="rep", period="2026-10", assembly="a1",
                 parts=[[line()]])
    [outcome] = ingest(config(tmp_path, tmp_path / "exp")).outcomes
    assert outcome.status == "failed"
    assert "sources[0].kind" in str(outcome.error) and "set kind: aws-cur" in str(outcome.error)


def test_5_a_parquet_file_whose_footer_is_damaged_is_named_alone_though_duckdb_names_none(tmp_path):
    # A read of several Parquet files failing on one's footer says only "TProtocolException:
    # Invalid data": the error named every file of the delivery, the good ones first.
    good = part(tmp_path, [line(cost="3")], "parquet")
    export = tmp_path / "exp"
    write_cur2(local_put(export), prefix="", export="ex", period="2026-10", execution="e1", fmt="parquet",
               parts=[good, good[:8] + bytes(len(good) // 2 - 8) + good[len(good) // 2:]])
    files = sorted(export.rglob("*.parquet"))
    [outcome] = ingest(config(tmp_path, export)).outcomes
    message = str(outcome.error)
    assert message.startswith(f"{files[1]}: cannot read the export") and str(files[0]) not in message, message


def test_5_an_s3_parquet_file_whose_rows_are_damaged_is_named_alone_by_its_uri_not_its_download(tmp_path):
    # Its footer reads, so the failure comes while staging the rows: the error named every file
    # of the delivery and DuckDB's text named the download's hashed name in the lake's scratch.
    con = duckdb.connect()
    rows = [line(cost="3", lineItem__LineItemDescription="x" * 3000)]
    (tmp_path / "c.parquet").write_bytes(part(tmp_path, rows, "parquet"))
    con.execute(f"COPY (FROM '{tmp_path}/c.parquet') TO '{tmp_path}/u.parquet' (FORMAT parquet, COMPRESSION uncompressed)")
    good = (tmp_path / "u.parquet").read_bytes()
    at = good.index(b"x" * 3000)
    bad = good[:at] + b"\xff" * 50 + good[at + 50:]  # not UTF-8, in a page of the row group
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bills")
        uris = write_cur2(s3_put(client, "bills"), prefix="", export="ex", period="2026-10", execution="e1",
                          parts=[good, bad], fmt="parquet", bucket="bills")
        [outcome] = ingest(config(tmp_path, "s3://bills/ex")).outcomes
    message = str(outcome.error)
    assert message.startswith(f"{uris[1]}: could not read the delivery: Invalid string encoding"), message
    assert uris[0] not in message and "_staging" not in message


@pytest.mark.parametrize("tags", ["{user_team=b}", "[1,2]", '""b""'])
def test_55_a_csv_tags_cell_that_is_not_a_json_object_names_the_column_and_the_value(tmp_path, tags):
    # Not JSON said only "Malformed JSON at byte 1 of input: unexpected character", naming no
    # column; JSON of another shape said DuckDB's "Expected OBJECT, but got ARRAY" and its SQL.
    body = gzip.decompress(part(tmp_path, [line(cost="1", team="a"), line(cost="2", team="b")], "csv.gz")).decode()
    body = body.replace('"{""user_team"":""b""}"', f'"{tags}"')
    write_cur2(local_put(tmp_path / "exp"), prefix="", export="ex", period="2026-10", execution="e1", fmt="csv",
               parts=[gzip.compress(body.encode())])
    [outcome] = ingest(config(tmp_path, tmp_path / "exp")).outcomes
    message = str(outcome.error)
    shown = tags.replace('""', '"')
    assert f"ex-00001.csv.gz: could not read the delivery: column resource_tags: tags {shown} are not a JSON " \
           "object" in message, message
    assert not Lake(tmp_path / "lake").ledger()
