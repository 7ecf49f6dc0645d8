"""`aws-cur`: legacy CUR layouts (versioned, overwrite, bare CSV, Athena Parquet) into the lake."""

from __future__ import annotations

import csv
import gzip
import json
from decimal import Decimal

import boto3
import duckdb
import pytest
from click.testing import CliRunner
from moto import mock_aws

from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from tests.aws_exports import LEGACY_COLUMNS, legacy_csv, line, local_put, s3_put, write_legacy
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"


def config(tmp_path, location, **options):
    return parse_config({"lake": str(tmp_path / "lake"),
                         "sources": [{"name": "cur", "kind": "aws-cur", "location": str(location), **options}]})


def totals(lake: Lake):
    return lake.query().execute(
        "SELECT billing_period, BillingCurrency, sum(BilledCost), sum(EffectiveCost), count(*) "
        "FROM costs GROUP BY ALL ORDER BY ALL").fetchall()


def run_cli(cfg_path, *args):
    return CliRunner().invoke(cli, ["--config", str(cfg_path), *args], catch_exceptions=False)


def write_config(tmp_path, location, **options):
    import yaml

    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "cur", "kind": "aws-cur", "location": str(location), **options}]}))
    return path


def test_real_sample_sums_equal_the_reference(tmp_path):
    reference = next(r for r in csv.DictReader((SAMPLES / "reference_sums.csv").open())
                     if r["file"] == "aws/legacy_cur_csv_anonymous_sample.csv")
    cfg = config(tmp_path, SAMPLE)
    result = ingest(cfg)
    assert [o.status for o in result.outcomes] == ["committed"]
    [(period, currency, billed, effective, rows)] = totals(Lake(cfg.lake))
    assert (period, currency, rows) == ("2023-11", reference["cur"], int(reference["n_rows"]))
    assert billed == Decimal(reference["billed"]) and effective == Decimal(reference["effective"])
    con = Lake(cfg.lake).query()
    # 12-digit account ids stay strings; times are UTC; a blank invoice id is NULL (estimated).
    assert con.execute("SELECT DISTINCT SubAccountId, InvoiceId FROM costs").fetchall() == [("123412340534", None)]
    assert con.execute("SELECT min(ChargePeriodStart) FROM costs").fetchone()[0].isoformat() == "2023-11-01T00:00:00"
    assert not Lake(cfg.lake).ledger()[0].final


def test_zip_compressed_report_reads_as_its_csv(tmp_path):
    """Legacy CUR's ZIP compression (`<report>-1.csv.zip`): the real sample zipped gives its
    reference sums; an archive that is damaged or holds two files fails naming it."""
    import zipfile

    folder = tmp_path / "cur"
    folder.mkdir()
    with zipfile.ZipFile(folder / "report-1.csv.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(SAMPLE, "report-1.csv")
    cfg = config(tmp_path, folder)
    assert [o.status for o in ingest(cfg).outcomes] == ["committed"]
    [(period, _, billed, _, rows)] = totals(Lake(cfg.lake))
    assert (period, billed, rows) == ("2023-11", Decimal("1.682308697400"), 1281)

    with zipfile.ZipFile(folder / "report-1.csv.zip", "a") as archive:
        archive.writestr("other.csv", "x\n")
    [failed] = ingest(cfg).failed
    assert "holds 2 files, not one CSV" in str(failed.error) and "report-1.csv.zip" in str(failed.error)
    (folder / "report-1.csv.zip").write_bytes(b"PK\x03\x04 cut short")
    [failed] = ingest(cfg).failed
    assert "cannot read the ZIP archive" in str(failed.error) and "report-1.csv.zip" in str(failed.error)


def by_line_type(tmp_path, rows: list[dict], measures: str) -> tuple[dict, Lake]:
    """Ingest the rows as a legacy CUR file: ({line item type: (measures…)}, the lake)."""
    export = tmp_path / "export.csv"
    export.write_bytes(legacy_csv(rows))
    cfg = config(tmp_path, export)
    ingest(cfg)
    lake = Lake(cfg.lake)
    return dict(lake.query().execute(f"SELECT x_line_item_type, ({measures}) FROM costs").fetchall()), lake


def test_amortized_cost_category_and_tags_by_line_item_type(tmp_path):
    rows = [
        line(cost="10", team="pretrain", **{"resourceTags__user:Team": "Eval"}),
        line(cost="3", kind="SavingsPlanCoveredUsage", savingsPlan__SavingsPlanEffectiveCost="2.5"),
        line(cost="-3", kind="SavingsPlanNegation"),
        line(cost="0", kind="SavingsPlanUpfrontFee"),
        line(cost="7", kind="SavingsPlanRecurringFee", savingsPlan__TotalCommitmentToDate="7",
             savingsPlan__UsedCommitment="6.25"),
        line(cost="0", kind="DiscountedUsage", reservation__EffectiveCost="1.75"),
        line(cost="5", kind="RIFee", reservation__UnusedAmortizedUpfrontFeeForBillingPeriod="0.5",
             reservation__UnusedRecurringFee="1.81E-8"),
        line(cost="0.4", kind="Tax"),
        line(cost="-1", kind="Credit"),
        line(cost="-2", kind="Refund"),
    ]
    got, lake = by_line_type(tmp_path, rows, "EffectiveCost, ChargeCategory, Tags")
    assert got["Usage"] == (Decimal(10), "Usage", {"user:team": "pretrain", "user:Team": "Eval"})
    assert got["SavingsPlanCoveredUsage"][:2] == (Decimal("2.5"), "Usage")
    assert got["SavingsPlanCoveredUsage"][2] == {}  # empty tag values are dropped
    assert got["SavingsPlanNegation"][:2] == (Decimal(0), "Credit")
    assert got["SavingsPlanUpfrontFee"][:2] == (Decimal(0), "Purchase")
    assert got["SavingsPlanRecurringFee"][:2] == (Decimal("0.75"), "Purchase")
    assert got["DiscountedUsage"][:2] == (Decimal("1.75"), "Usage")
    assert got["RIFee"][:2] == (Decimal("0.5000000181"), "Purchase")
    assert got["Tax"][:2] == (Decimal("0.4"), "Tax")
    assert got["Credit"][:2] == (Decimal(-1), "Credit")
    assert got["Refund"][:2] == (Decimal(-2), "Adjustment")
    [(_, _, billed, effective, _)] = totals(lake)
    assert billed == Decimal("19.4") and effective == Decimal("12.9000000181")


DISCOUNTS = ("BundledDiscount", "Discount", "EdpDiscount", "PrivateRateDiscount", "DistributorDiscount",
             "SppDiscount", "RiVolumeDiscount")


def test_every_discount_line_type_is_a_usage_based_credit(tmp_path, monkeypatch):
    """A reseller's customer gets SppDiscount lines (Solution Provider Program), a large RI
    buyer RiVolumeDiscount ones: credits like an EDP discount, never usage (the unallocated
    and anomaly rules leave credits out). By hand: 10 of usage less 1+…+7 = -18. A period the
    reader before (version 1, those two 'Usage') committed is read again by the next ingest."""
    import connectors.aws_common as aws_common
    from connectors.aws_export import AwsExportConnector

    rows = [line(cost="10")] + [line(cost=f"-{n}", kind=kind) for n, kind in enumerate(DISCOUNTS, 1)]
    monkeypatch.setattr(aws_common, "CHARGE_CATEGORY", {k: v for k, v in aws_common.CHARGE_CATEGORY.items()
                                                        if k not in ("SppDiscount", "RiVolumeDiscount")})
    monkeypatch.setattr(AwsExportConnector, "reader_version", 1)
    got, lake = by_line_type(tmp_path, rows, "ChargeCategory")
    assert got["SppDiscount"] == "Usage"
    monkeypatch.undo()
    cfg = config(tmp_path, tmp_path / "export.csv")  # the same file, unchanged
    assert [o.status for o in ingest(cfg).outcomes] == ["committed"]
    assert [o.status for o in ingest(cfg).outcomes] == ["unchanged"]
    got = dict(lake.query().execute(
        "SELECT x_line_item_type, (BilledCost, ChargeCategory, ChargeFrequency) FROM costs").fetchall())
    assert got == {"Usage": (Decimal(10), "Usage", "Usage-Based")} | {
        kind: (Decimal(-n), "Credit", "Usage-Based") for n, kind in enumerate(DISCOUNTS, 1)}
    [(_, _, billed, effective, _)] = totals(lake)
    assert billed == effective == Decimal(-18)


def list_rounding_after_ingest(tmp_path, rows) -> tuple[Lake, Decimal]:
    """Ingest `rows` as one legacy CUR file: (its lake, the list cost rounding `attribute --check` reports)."""
    export = tmp_path / "export.csv"
    export.write_bytes(legacy_csv(rows))
    cfg = config(tmp_path, export)
    assert run_cli(write_config(tmp_path, export), "ingest").exit_code == 0
    check = run_cli(tmp_path / "spendlake.yaml", "attribute", "--check", "--format", "json")
    return Lake(cfg.lake), {r["cost"]: Decimal(r["rounding"]) for r in json.loads(check.output)}["list"]


def test_list_cost_counts_savings_plan_covered_usage_once(tmp_path):
    """A SavingsPlanNegation line may repeat the public On-Demand cost of the usage it offsets
    (AWS's CID summary_view sums public_cost without these lines): its ListCost is 0, as its
    EffectiveCost is. By hand: 10 (on demand) + 3 (covered) = 13 at public prices, not 16."""
    rows = [line(cost="10"),
            line(cost="3", kind="SavingsPlanCoveredUsage", savingsPlan__SavingsPlanEffectiveCost="2.5"),
            line(cost="-3", kind="SavingsPlanNegation", pricing__publicOnDemandCost="3.0000000000004"),
            line(cost="7", kind="SavingsPlanRecurringFee", pricing__publicOnDemandCost="")]
    lake, rounding = list_rounding_after_ingest(tmp_path, rows)
    assert rounding == 0  # nothing rounded: zeroed
    got = dict(lake.query().execute("SELECT x_line_item_type, ListCost FROM costs").fetchall())
    assert got == {"Usage": Decimal(10), "SavingsPlanCoveredUsage": Decimal(3), "SavingsPlanNegation": Decimal(0),
                   "SavingsPlanRecurringFee": None}
    assert lake.query().execute("SELECT sum(ListCost) FROM costs").fetchone()[0] == Decimal(13)


def test_a_tax_lines_public_on_demand_cost_of_0_is_no_list_cost(tmp_path):
    """AWS writes a public On-Demand cost of 0 on every Tax line (samples/aws: 12 of 12, 0.08 of
    tax billed): a tax has no public price, and FOCUS derives its list cost from the charges it
    taxes (the export does). The lake keeps none (NULL), and its rounding column none either."""
    rows = [line(cost="10", pricing__publicOnDemandCost="12"),
            line(cost="0.5", kind="Tax", pricing__publicOnDemandCost="0"),
            line(cost="0.2", kind="Tax", pricing__publicOnDemandCost="0.0000000000004")]
    lake, rounding = list_rounding_after_ingest(tmp_path, rows)
    got = lake.query().execute("SELECT x_line_item_type, BilledCost, ListCost FROM costs ORDER BY 2").fetchall()
    assert got == [("Tax", Decimal("0.2"), None), ("Tax", Decimal("0.5"), None), ("Usage", Decimal(10), Decimal(12))]
    assert rounding == 0


def test_a_reservations_upfront_fee_is_not_counted_again_in_effective_cost(tmp_path):
    """An RI's upfront fee (a Fee line carrying the reservation's ARN) is amortized by AWS into
    its DiscountedUsage lines' reservation/EffectiveCost and the RIFee line's unused amortized
    fee; counted again on the Fee line, amortized spend held the whole fee twice. A Fee without
    a reservation (a Capacity Block, support) keeps its cost. By hand: billed 876 + 50 + 0 + 20
    + 4 = 950; effective 0 + (5 + 3) + 10 + 20 + 4 = 42 (918 before)."""
    arn = "arn:aws:ec2:us-east-1:000123456789:reserved-instances/ri-1"
    rows = [line(cost="876", kind="Fee", reservation__ReservationARN=arn),
            line(cost="50", kind="RIFee", reservation__ReservationARN=arn,
                 reservation__UnusedAmortizedUpfrontFeeForBillingPeriod="5", reservation__UnusedRecurringFee="3"),
            line(cost="0", kind="DiscountedUsage", reservation__ReservationARN=arn, reservation__EffectiveCost="10"),
            line(cost="20", kind="Fee"),
            line(cost="4")]
    export = tmp_path / "export.csv"
    export.write_bytes(legacy_csv(rows, [*LEGACY_COLUMNS, "reservation/ReservationARN"]))
    assert run_cli(write_config(tmp_path, export), "ingest").exit_code == 0
    lake = Lake(config(tmp_path, export).lake)
    assert lake.query().execute("SELECT sum(BilledCost), sum(EffectiveCost) FROM costs").fetchone() == (
        Decimal(950), Decimal(42))
    check = run_cli(tmp_path / "spendlake.yaml", "attribute", "--check", "--cost", "effective", "--format", "json")
    assert check.exit_code == 0, check.output


def test_bare_csv_spanning_two_periods_and_two_currencies(tmp_path):
    export = tmp_path / "cur.csv"
    export.write_bytes(legacy_csv([line("2026-09", "1.5"), line("2026-10", "2", currency="EUR"),
                                   line("2026-10", "3")]))
    cfg = config(tmp_path, export)
    ingest(cfg)
    assert totals(Lake(cfg.lake)) == [("2026-09", "USD", Decimal("1.5"), Decimal("1.5"), 1),
                                      ("2026-10", "EUR", Decimal(2), Decimal(2), 1),
                                      ("2026-10", "USD", Decimal(3), Decimal(3), 1)]
    result = ingest(cfg)
    assert [o.status for o in result.outcomes] == ["unchanged"]


def test_an_account_id_a_spreadsheet_rewrote_fails_the_file_naming_column_and_value(tmp_path):
    """A CUR re-saved through a spreadsheet as CSV keeps its columns but writes 12-digit account
    ids as 1.23412E+11: the file fails (exit 3) rather than commit a wrong account."""
    export = tmp_path / "cur.csv"
    resaved = line("2026-10", "2", lineItem__UsageAccountId="1.23457E+11")
    export.write_bytes(legacy_csv([line("2026-10", "1"), resaved]))
    cfg_path = write_config(tmp_path, export)
    result = run_cli(cfg_path, "ingest")
    assert result.exit_code == 3
    for part in ("cur.csv", "column lineItem/UsageAccountId: a number in scientific notation", "1.23457E+11",
                 "not through a spreadsheet"):
        assert part in result.output
    assert Lake(config(tmp_path, export).lake).ledger() == []


def write_athena_month(tmp_path, rows, name="report-00001.snappy.parquet"):
    """A Parquet report's month as AWS writes it: `<report>/<report>/year=YYYY/month=M/` under `cur/`."""
    con = duckdb.connect()
    month_dir = tmp_path / "cur" / "report" / "report" / "year=2026" / "month=9"
    month_dir.mkdir(parents=True, exist_ok=True)
    csv_file = tmp_path / "rows.csv"
    csv_file.write_bytes(legacy_csv(rows))
    # Athena flattening: snake_case names, one resource_tags_user_* column per tag, '' for missing.
    columns = ", ".join(f'"{c}" AS "{snake(c)}"' for c in LEGACY_COLUMNS if c != "resourceTags/user:Team")
    con.execute(f"COPY (SELECT {columns} FROM read_csv('{csv_file}', all_varchar=true)) "
                f"TO '{month_dir / name}' (FORMAT parquet)")
    (tmp_path / "cur" / "report" / "cost_and_usage_data_status").mkdir(exist_ok=True)


def test_athena_parquet_layout(tmp_path):
    write_athena_month(tmp_path, [line("2026-09", "1.25", team="data"), line("2026-09", "2", kind="Tax")])
    cfg = config(tmp_path, tmp_path / "cur")
    ingest(cfg)
    assert totals(Lake(cfg.lake)) == [("2026-09", "USD", Decimal("3.25"), Decimal("3.25"), 2)]
    tags = Lake(cfg.lake).query().execute("SELECT Tags FROM costs ORDER BY BilledCost").fetchall()
    assert tags == [({"user_team": "data"},), ({},)]


def test_a_parquet_reports_period_manifest_names_its_athena_month_files(tmp_path):
    # AWS writes a Parquet report's manifest in the period folder, its reportKeys the month's
    # files beside it: the month is that one delivery (it was also a second delivery of 2026-09
    # whose files were looked for in the period folder: exit 3 on every ingest), and a stale
    # part the manifest does not list is not counted.
    write_athena_month(tmp_path, [line("2026-09", "1.25"), line("2026-09", "2", kind="Tax")])
    write_athena_month(tmp_path, [line("2026-09", "100")], name="report-00002.snappy.parquet")
    period = tmp_path / "cur" / "report" / "20260901-20261001"
    period.mkdir()
    (period / "report-Manifest.json").write_text(json.dumps({
        "assemblyId": "a9", "reportName": "report", "bucket": "bucket", "contentType": "Parquet",
        "reportKeys": ["prefix/report/report/year=2026/month=9/report-00001.snappy.parquet"]}))
    result = run_cli(write_config(tmp_path, tmp_path / "cur"), "ingest")
    assert result.exit_code == 0, result.output
    assert totals(Lake(tmp_path / "lake")) == [("2026-09", "USD", Decimal("3.25"), Decimal("3.25"), 2)]
    assert Lake(tmp_path / "lake").ledger()[0].delivery_id == "a9"


def snake(column):
    from connectors.aws_common import snake_name

    return snake_name(column)


def test_manifest_missing_waits_and_commits_nothing(tmp_path):
    write_legacy(local_put(tmp_path / "exp"), prefix="cur", report="rep", period="2026-10", assembly="a1",
                 parts=[[line()]], manifest=False)
    cfg_path = write_config(tmp_path, tmp_path / "exp")
    result = run_cli(cfg_path, "ingest")
    assert result.exit_code == 0, result.output
    assert "waiting for manifest" in result.output
    assert not Lake(tmp_path / "lake").ledger()


@pytest.fixture
def bucket():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bills")
        yield client


def test_only_the_current_assembly_counts(tmp_path, bucket):
    put = s3_put(bucket, "bills")
    write_legacy(put, prefix="cur", report="rep", period="2026-10", assembly="old-assembly",
                 parts=[[line(cost="100")], [line(cost="50")]], bucket="bills")
    write_legacy(put, prefix="cur", report="rep", period="2026-10", assembly="new-assembly",
                 parts=[[line(cost="120")]], bucket="bills")
    cfg = config(tmp_path, "s3://bills/cur")
    ingest(cfg)
    assert totals(Lake(cfg.lake)) == [("2026-10", "USD", Decimal(120), Decimal(120), 1)]
    assert Lake(cfg.lake).ledger()[0].delivery_id == "new-assembly"


@pytest.mark.slow
def test_overwrite_redelivery_shrinking_from_three_parts_to_two(tmp_path, bucket):
    put = s3_put(bucket, "bills")
    write_legacy(put, prefix="cur", report="rep", period="2026-10", assembly="a1", overwrite=True,
                 parts=[[line(cost="1")], [line(cost="2")], [line(cost="4", team="only-in-part-3")]])
    cfg = config(tmp_path, "s3://bills/cur")
    ingest(cfg)
    assert totals(Lake(cfg.lake))[0][2] == Decimal(7)
    # The re-delivery writes parts 1 and 2 and a new manifest; the stale part 3 stays in the bucket.
    write_legacy(put, prefix="cur", report="rep", period="2026-10", assembly="a2", overwrite=True,
                 parts=[[line(cost="10")], [line(cost="20")]])
    ingest(cfg)
    assert totals(Lake(cfg.lake)) == [("2026-10", "USD", Decimal(30), Decimal(30), 2)]
    con = Lake(cfg.lake).query()
    assert con.execute("SELECT count(*) FROM costs WHERE Tags['user:team'] = 'only-in-part-3'").fetchone() == (0,)


def test_manifest_naming_a_missing_key_fails_that_period_only(tmp_path, bucket):
    put = s3_put(bucket, "bills")
    write_legacy(put, prefix="cur", report="rep", period="2026-09", assembly="sep", parts=[[line("2026-09", "9")]])
    write_legacy(put, prefix="cur", report="rep", period="2026-10", assembly="oct", parts=[[line("2026-10", "1")]],
                 extra_keys=("cur/rep/20261001-20261101/oct/rep-2.csv.gz",))
    cfg_path = write_config(tmp_path, "s3://bills/cur")
    result = run_cli(cfg_path, "ingest")
    assert result.exit_code == 3
    assert "s3://bills/cur/rep/20261001-20261101/oct/rep-2.csv.gz" in result.output
    assert totals(Lake(tmp_path / "lake")) == [("2026-09", "USD", Decimal(9), Decimal(9), 1)]


@pytest.mark.slow
def test_restated_closed_month_with_refund_changes_only_that_month(tmp_path, bucket):
    put = s3_put(bucket, "bills")
    write_legacy(put, prefix="cur", report="rep", period="2026-09", assembly="sep1",
                 parts=[[line("2026-09", "9", invoice="INV-9")]])
    write_legacy(put, prefix="cur", report="rep", period="2026-10", assembly="oct1", parts=[[line("2026-10", "1")]])
    cfg = config(tmp_path, "s3://bills/cur")
    ingest(cfg)
    lake = Lake(cfg.lake)
    october_file = lake.partition_file("costs", [("source", "cur"), ("billing_period", "2026-10")])
    before = (october_file.read_bytes(), october_file.stat().st_mtime_ns)
    write_legacy(put, prefix="cur", report="rep", period="2026-09", assembly="sep2",
                 parts=[[line("2026-09", "9", invoice="INV-9"), line("2026-09", "-2.5", kind="Refund",
                                                                    invoice="INV-9"),
                         line("2026-09", "0.5")]])  # a late line without bill/InvoiceId: the bill stays final
    result = ingest(cfg)
    assert sorted(o.status for o in result.outcomes) == ["committed", "unchanged"]
    assert totals(lake) == [("2026-09", "USD", Decimal("7.0"), Decimal("7.0"), 3),
                            ("2026-10", "USD", Decimal(1), Decimal(1), 1)]
    assert (october_file.read_bytes(), october_file.stat().st_mtime_ns) == before
    entries = {e.billing_period: e for e in lake.ledger()}
    assert entries["2026-09"].final and not entries["2026-10"].final


@pytest.mark.slow
def test_same_delivery_twice_leaves_the_lake_byte_for_byte(tmp_path, bucket):
    write_legacy(s3_put(bucket, "bills"), prefix="cur", report="rep", period="2026-10", assembly="a1",
                 parts=[[line(cost="1"), line(cost="2", currency="EUR")]])
    cfg_path = write_config(tmp_path, "s3://bills/cur")
    assert run_cli(cfg_path, "ingest").exit_code == 0
    lake_dir = tmp_path / "lake" / "costs"
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in lake_dir.rglob("*") if p.is_file()}
    ledger_before = (tmp_path / "lake" / "_ledger" / "deliveries.json").read_bytes()
    second = run_cli(cfg_path, "ingest")
    assert second.exit_code == 0 and "unchanged" in second.output
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in lake_dir.rglob("*") if p.is_file()} == before
    assert (tmp_path / "lake" / "_ledger" / "deliveries.json").read_bytes() == ledger_before
    assert totals(Lake(tmp_path / "lake")) == [("2026-10", "EUR", Decimal(2), Decimal(2), 1),
                                               ("2026-10", "USD", Decimal(1), Decimal(1), 1)]


def test_a_data_exports_export_under_kind_aws_cur_is_not_read_as_bare_csv(tmp_path):
    # Its CSV.gz files were read as bare CUR files: every CREATE_NEW_REPORT execution counted
    # ($150 for a $100 bill here), without a word.
    put = local_put(tmp_path / "exp")
    for folder, cost in (("20261002T000000Z-e1", "50"), ("20261003T000000Z-e2", "100")):
        put(f"cur2/ex/data/BILLING_PERIOD=2026-10/{folder}/ex-00001.csv.gz", gzip.compress(legacy_csv([line(cost=cost)])))
        put(f"cur2/ex/metadata/BILLING_PERIOD=2026-10/{folder}/ex-Manifest.json", b"{}")
    cfg_path = write_config(tmp_path, tmp_path / "exp")
    result = run_cli(cfg_path, "ingest")
    assert result.exit_code == 3 and "kind: aws-cur2" in result.output, result.output
    assert not (tmp_path / "lake").exists() or not Lake(tmp_path / "lake").ledger()
    # beside a legacy report, the export is skipped (and said so) and the report is read
    write_legacy(put, prefix="cur", report="rep", period="2026-10", assembly="a1", parts=[[line(cost="7")]])
    result = run_cli(cfg_path, "ingest")
    assert result.exit_code == 0, result.output
    assert f"{tmp_path / 'exp' / 'cur2' / 'ex'}: skipped, an AWS Data Exports export" in result.output
    assert totals(Lake(tmp_path / "lake")) == [("2026-10", "USD", Decimal("7"), Decimal("7"), 1)]


def test_report_name_picks_one_report_under_a_shared_prefix(tmp_path):
    put = local_put(tmp_path / "exp")
    write_legacy(put, prefix="cur", report="hourly", period="2026-10", assembly="h1", parts=[[line(cost="1")]])
    write_legacy(put, prefix="cur", report="daily", period="2026-10", assembly="d1", parts=[[line(cost="30")]])
    cfg = config(tmp_path, tmp_path / "exp", report_name="daily")
    ingest(cfg)
    assert [(e.delivery_id, e.totals[0].billed_cost) for e in Lake(cfg.lake).ledger()] == [("d1", Decimal(30))]


def test_report_name_picks_its_report_not_one_whose_name_begins_with_it(tmp_path):
    # `cost` took cost-hourly's files too (named cost-hourly-1.csv.gz, cost-hourly-Manifest.json):
    # '2 reports deliver 2026-10 … set report_name', exit 3 with report_name set
    put = local_put(tmp_path / "exp")
    write_legacy(put, prefix="cur", report="cost-hourly", period="2026-10", assembly="h1", parts=[[line(cost="1")]])
    write_legacy(put, prefix="cur", report="cost", period="2026-10", assembly="d1", parts=[[line(cost="30")]])
    cfg = config(tmp_path, tmp_path / "exp", report_name="cost")
    assert [o.status for o in ingest(cfg).outcomes] == ["committed"]
    assert [(e.delivery_id, e.totals[0].billed_cost) for e in Lake(cfg.lake).ledger()] == [("d1", Decimal(30))]


def test_two_reports_for_one_period_without_report_name_fail_instead_of_replacing(tmp_path):
    put = local_put(tmp_path / "exp")
    write_legacy(put, prefix="cur", report="hourly", period="2026-10", assembly="h1", parts=[[line(cost="1")]])
    write_legacy(put, prefix="cur", report="daily", period="2026-10", assembly="d1", parts=[[line(cost="30")]])
    result = ingest(config(tmp_path, tmp_path / "exp"))
    assert {o.status for o in result.outcomes} == {"failed"}
    assert "set report_name" in str(result.outcomes[0].error) and "cur/daily/20261001-20261101/" in str(
        result.outcomes[0].error)
    assert not Lake(tmp_path / "lake").ledger()


def test_45_costs_with_more_than_12_decimals_give_the_rounding_total_of_check(tmp_path):
    """Unblended and public on-demand cost as text with 14 decimals: stored rounded half away
    from zero at 12, and what was rounded away is in the ledger, shown by `--check`."""
    export = tmp_path / "cur.csv"
    export.write_bytes(legacy_csv([line("2026-10", "1.00000000000049"), line("2026-10", "2.00000000000051"),
                                   line("2026-10", "4.00000000000049"),
                                   line("2026-10", "3")]))
    path = write_config(tmp_path, export)
    assert run_cli(path, "ingest").exit_code == 0
    assert totals(Lake(config(tmp_path, export).lake))[0][2] == Decimal("10.000000000001")
    import json

    check = run_cli(path, "attribute", "--check", "--format", "json")
    rows = {r["cost"]: r for r in json.loads(check.output)}
    assert Decimal(rows["billed"]["rounding"]) == Decimal("0.00000000000049")  # (0.49 − 0.49 + 0.49)e-12
    assert Decimal(rows["billed"]["source_total"]) + Decimal(rows["billed"]["rounding"]) == Decimal("10.00000000000149")
    assert Decimal(rows["effective"]["rounding"]) == 0  # derived from several fields: not tracked
