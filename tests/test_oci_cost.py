"""`oci-cost`: Oracle Cloud cost reports (reports/cost-csv/*.csv.gz) into the lake.

The fixture (tests/data/oci, README there) is hand-made from Oracle's documented cost report
schema: three files of two reports (the first split in -00001 / -00002), tag columns that
differ between reports, a correction of one line, and a usage report beside them. Its sums,
checked by hand from the rows:
    2026-04: 80.00 + 80.00 + 0.0017137097                  = 160.0017137097 (3 lines)
    2026-05: 0.01275 + 80.00 + 40.00 (correction) + 1.02   = 121.03275      (4 lines;
             the corrected 80.00 line is replaced by its 40.00 correction)
"""

from __future__ import annotations

import gzip
import shutil
from datetime import datetime
from decimal import Decimal

import boto3
import duckdb
import pytest
from billing_helpers import failures, ingest_files
from click.testing import CliRunner
from conftest import DATA
from moto import mock_aws

from service.cli.main import cli

OCI = DATA / "oci"
GPU = "ocid1.instance.oc1.iad.anuwcljtgpunode01examplexk3m2a"
PERIODS = [("2026-04", "USD", 3, Decimal("160.0017137097")), ("2026-05", "USD", 4, Decimal("121.03275"))]


def period_sums(lake):
    return lake.query().execute(
        "SELECT billing_period, BillingCurrency, count(*), sum(BilledCost) FROM costs GROUP BY ALL ORDER BY ALL"
    ).fetchall()


def test_cost_reports_sum_per_month_with_the_correction_replacing_its_line(tmp_path):
    lake, result = ingest_files(tmp_path, ("oci", "oci-cost", OCI))
    assert failures(result) == []
    assert period_sums(lake) == PERIODS
    con = lake.query()
    # EffectiveCost is what OCI charged, as BilledCost
    assert con.execute("SELECT sum(EffectiveCost) = sum(BilledCost) FROM costs").fetchone() == (True,)
    hour = con.execute(
        "SELECT BilledCost, PricingQuantity, ChargeClass FROM costs WHERE ResourceId = ? "
        "AND ChargePeriodStart = TIMESTAMP '2026-05-01 00:00:00'", [GPU]).fetchall()
    assert hour == [(Decimal(40), Decimal(4), "Correction")]


def test_columns_and_tags_as_the_report_gives_them(tmp_path):
    lake, _ = ingest_files(tmp_path, ("oci", "oci-cost", OCI))
    row = lake.query().execute(
        "SELECT BillingAccountId, SubAccountId, SubAccountName, ChargePeriodEnd, ServiceName, ChargeDescription, "
        "ResourceType, RegionId, AvailabilityZone, SkuId, PricingUnit, ContractedUnitPrice, ProviderName, "
        "ChargeCategory, ChargeFrequency, Tags FROM costs WHERE ResourceId = ? "
        "AND ChargePeriodStart = TIMESTAMP '2026-04-30 22:00:00'", [GPU]).fetchall()
    assert row == [("ocid1.tenancy.oc1..aaaaaaaa5kexampletenancyq7vd3x2mlorg",
                    "ocid1.compartment.oc1..aaaaaaaamltrainingexamplec4vb2n", "ml-training",
                    datetime(2026, 4, 30, 23), "COMPUTE", "Compute - GPU - H100 - BM", "instance",
                    "us-ashburn-1", "GqIF:US-ASHBURN-AD-1", "B98415", "GPU Per Hour", Decimal("10"), "Oracle",
                    "Usage", "Usage-Based",
                    {"Oracle-Tags.CreatedBy": "oracleidentitycloudservice/alice@example.com",
                     "Oracle-Tags.CreatedOn": "2026-04-01T09:12:44.513Z", "team": "pretrain", "project": "llm-7b"})]
    # the later report's tag columns differ; empty tag values are left out
    tags = dict(lake.query().execute(
        "SELECT ServiceName || ' ' || strftime(ChargePeriodStart, '%H'), Tags FROM costs "
        "WHERE ChargePeriodStart >= TIMESTAMP '2026-05-01 00:00:00'").fetchall())
    assert tags["OBJECT_STORE 00"] == {"Oracle-Tags.CreatedBy": "oracleidentitycloudservice/bob@example.com",
                                      "Oracle-Tags.CreatedOn": "2026-03-14T17:02:09.120Z"}
    assert tags["NETWORK 01"] == {"Oracle-Tags.CreatedBy": "oracleidentitycloudservice/alice@example.com",
                                  "team": "pretrain"}
    assert tags["COMPUTE 01"]["experiment"] == "run-42"


def test_usage_reports_are_not_read_and_the_cost_folder_alone_works(tmp_path):
    copy = tmp_path / "cost-csv"
    shutil.copytree(OCI / "reports" / "cost-csv", copy)
    lake, result = ingest_files(tmp_path, ("oci", "oci-cost", copy))
    assert failures(result) == [] and period_sums(lake) == PERIODS


@pytest.mark.slow
def test_an_unchanged_bucket_is_not_read_again_and_a_new_report_replaces_its_month(tmp_path):
    bucket = tmp_path / "bucket"
    shutil.copytree(OCI, bucket)
    cfg = tmp_path / "spendlake.yaml"
    cfg.write_text(f"lake: {tmp_path / 'lake'}\nsources:\n  - {{name: oci, kind: oci-cost, location: '{bucket}'}}\n")
    runner = CliRunner()
    first = runner.invoke(cli, ["--config", str(cfg), "ingest"], catch_exceptions=False)
    assert first.exit_code == 0 and "2026-05: committed 4 rows USD 121.032750000000" in first.output
    second = runner.invoke(cli, ["--config", str(cfg), "ingest"], catch_exceptions=False)
    assert second.exit_code == 0 and "unchanged" in second.output
    header = gzip.decompress((OCI / "reports/cost-csv/0001000000987652-00001.csv.gz").read_bytes()).decode()
    header = header.splitlines()[0]
    late = ("Z9kT4nB1wQx6Rc3MdJAT0001,ocid1.tenancy.oc1..aaaaaaaa5kexampletenancyq7vd3x2mlorg,2026-05-01T02:00Z,"
            "2026-05-01T03:00Z,COMPUTE,ocid1.compartment.oc1..aaaaaaaamltrainingexamplec4vb2n,ml-training,"
            f"us-ashburn-1,GqIF:US-ASHBURN-AD-1,{GPU},8,0,8761234,B98415,Compute - GPU - H100 - BM,10.00,,80.00,,USD,,"
            "GPU Per Hour,N,,,oracleidentitycloudservice/alice@example.com,pretrain,run-42")
    (bucket / "reports/cost-csv/0001000000987653-00001.csv.gz").write_bytes(
        gzip.compress(f"{header}\n{late}\n".encode()))
    third = runner.invoke(cli, ["--config", str(cfg), "ingest"], catch_exceptions=False)
    assert third.exit_code == 0 and "2026-05: committed 5 rows USD 201.032750000000" in third.output


def test_a_month_cut_by_oracles_one_year_retention_is_left_as_the_lake_has_it(tmp_path):
    """Rows of a month that began more than a year before the newest interval are not read:
    the month's first files are gone from the bucket, so the lake keeps its whole copy."""
    bucket = tmp_path / "bucket" / "reports" / "cost-csv"
    shutil.copytree(OCI / "reports" / "cost-csv", bucket)
    header = gzip.decompress((bucket / "0001000000987652-00001.csv.gz").read_bytes()).decode().splitlines()[0]
    row = ("Z9kT4nB1wQx6Rc3MdJAT0002,ocid1.tenancy.oc1..aaaaaaaa5kexampletenancyq7vd3x2mlorg,2027-05-20T00:00Z,"
           "2027-05-20T01:00Z,COMPUTE,ocid1.compartment.oc1..aaaaaaaamltrainingexamplec4vb2n,ml-training,"
           f"us-ashburn-1,GqIF:US-ASHBURN-AD-1,{GPU},8,0,8761234,B98415,Compute - GPU - H100 - BM,10.00,,80.00,,USD,,"
           "GPU Per Hour,N,,,oracleidentitycloudservice/alice@example.com,pretrain,run-42")
    (bucket / "0001000001234567-00001.csv.gz").write_bytes(gzip.compress(f"{header}\n{row}\n".encode()))
    lake, result = ingest_files(tmp_path, ("oci", "oci-cost", tmp_path / "bucket"))
    assert failures(result) == []
    # 2027-05-20 − 365 days = 2026-05-20: 2026-05 is cut, 2026-04 too; 2027-05 is whole
    assert period_sums(lake) == [("2027-05", "USD", 1, Decimal(80))]


@pytest.mark.slow
def test_cost_reports_from_an_s3_compatible_bucket(tmp_path):
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="usage-reports")
        for path in sorted(OCI.rglob("*.csv.gz")):
            client.put_object(Bucket="usage-reports", Key=path.relative_to(OCI).as_posix(), Body=path.read_bytes())
        lake, result = ingest_files(tmp_path, ("oci", "oci-cost", "s3://usage-reports"))
    assert failures(result) == []
    assert period_sums(lake) == PERIODS


def test_a_location_without_cost_reports_exits_3_naming_it(tmp_path):
    empty = tmp_path / "bucket" / "reports" / "usage-csv"
    shutil.copytree(OCI / "reports" / "usage-csv", empty)
    cfg = tmp_path / "spendlake.yaml"
    cfg.write_text(f"lake: {tmp_path / 'lake'}\nsources:\n  - {{name: oci, kind: oci-cost, "
                   f"location: '{tmp_path / 'bucket'}'}}\n")
    result = CliRunner().invoke(cli, ["--config", str(cfg), "ingest"], catch_exceptions=False)
    assert result.exit_code == 3
    assert f"no OCI cost report files (reports/cost-csv/*.csv.gz) under {tmp_path / 'bucket'}" in result.output


@pytest.mark.parametrize("column, value, said", [
    ("lineItem/intervalUsageStart", "2026-05-32T01:00Z", "cannot read the cost report: line 4, column "
     "lineItem/intervalUsageStart: not a date/time: 2026-05-32T01:00Z"),  # read in the report's first scan
    ("cost/unitPrice", "ten", "line 4, column cost/unitPrice: not a number: ten")])  # in the lines' read
def test_a_value_the_sql_refuses_names_its_line(tmp_path, column, value, said):
    """oci-cost named the file and column of a bad time or number, no line, where the other
    connectors say `line N, column C` (small47): the line its record begins on."""
    bucket = tmp_path / "bucket"
    shutil.copytree(OCI, bucket)
    report = bucket / "reports" / "cost-csv" / "0001000000987652-00001.csv.gz"
    lines = gzip.decompress(report.read_bytes()).decode().splitlines(keepends=True)
    index = lines[0].rstrip("\r\n").split(",").index(column)
    fields = lines[3].split(",")
    fields[index] = value
    report.write_bytes(gzip.compress("".join([*lines[:3], ",".join(fields), *lines[4:]]).encode()))
    _, result = ingest_files(tmp_path, ("oci", "oci-cost", bucket))
    [message] = failures(result)
    assert f"{report}: {said}" in message and message.endswith(value), message


def test_free_lines_without_a_currency_take_the_tenancys(tmp_path):
    """koku's real-shaped GBP report (tests/data/oci README): Oracle leaves cost/currencyCode
    blank on free Object Storage lines; they are the tenancy's GBP lines, not a bill of
    their own. A line with a cost and no currency, or a delivery of two currencies, keeps none."""
    report = DATA / "oci-koku"
    lake, result = ingest_files(tmp_path, ("oci", "oci-cost", report))
    assert failures(result) == []
    raw = next(iter(report.rglob("*.csv")))
    [(total,)] = duckdb.sql("SELECT sum(CAST(\"cost/myCost\" AS DECIMAL(38,12))) FROM read_csv(?, all_varchar = true)",
                            params=[str(raw)]).fetchall()
    assert period_sums(lake) == [("2022-04", "GBP", 5, total)] and total == Decimal("0.000040641")

    other = tmp_path / "bucket" / "reports" / "cost-csv"
    other.mkdir(parents=True)
    lines = raw.read_text().splitlines(keepends=True)
    (other / "0001000000603747.csv").write_text("".join(
        [lines[0], lines[1].replace(",0.000000000000,,", ",1.000000000000,,", 1), *lines[2:]]))
    (other / "0001000000603748.csv").write_text(lines[0] + lines[4].replace(",GBP,", ",USD,"))
    lake, _ = ingest_files(tmp_path / "second", ("oci", "oci-cost", other.parent.parent))
    assert lake.query().execute("SELECT BillingCurrency, count(*) FROM costs GROUP BY ALL ORDER BY ALL").fetchall() \
        == [("GBP", 3), ("USD", 1), (None, 2)]


def test_oracles_own_report_excerpt_sums_as_duckdb_over_the_raw_file(tmp_path):
    """An Oracle tenancy's report (tests/data/oci README): E-notation and 18-decimal costs,
    back-references on lines that are no correction, an end with seconds and a start without."""
    report = DATA / "oci-oracle"
    lake, result = ingest_files(tmp_path, ("oci", "oci-cost", report))
    assert failures(result) == []
    raw = next(iter(report.rglob("*.csv")))
    [(rows, exact)] = duckdb.sql("SELECT count(*), sum(CAST(\"cost/myCost\" AS DECIMAL(38,20))) FROM read_csv(?, "
                                 "all_varchar = true)", params=[str(raw)]).fetchall()
    assert (rows, exact) == (21, Decimal("0.120284359054846088"))
    assert period_sums(lake) == [("2023-11", "USD", 21, Decimal("0.120284359056"))]  # 12 decimals a line
    assert lake.query().execute("SELECT count(*) FROM costs WHERE ChargeClass IS NOT NULL OR "
                                "ChargePeriodEnd - ChargePeriodStart <> INTERVAL 1 HOUR").fetchone() == (0,)
