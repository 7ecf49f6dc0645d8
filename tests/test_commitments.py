"""`spendlake commitments`: per commitment, its cost in the window, used and unused (FOCUS
CommitmentDiscountStatus), coverage of eligible usage, expiry and owner."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.core.timewindow import Window
from service.core.timewindow import share_in_window
from service.attribution import commitments
from tests.attribution_helpers import declared_sources
from tests.rules_lake import build_lake

SP = "arn:aws:savingsplans::111122223333:savingsplan/sp-1"
RI = "arn:aws:ec2:us-east-1:444455556666:reserved-instances/ri-1"
NOW = datetime(2026, 11, 8, tzinfo=timezone.utc)


def hour(h: int) -> dict:
    return {"ChargePeriodStart": f"2026-11-07 {h:02d}:00:00", "ChargePeriodEnd": f"2026-11-07 {h + 1:02d}:00:00"}


def ec2(region: str, h: int, **extra) -> dict:
    return {"ChargeCategory": "Usage", "ServiceName": "Amazon EC2", "RegionId": region, "BillingCurrency": "USD",
            "ListCost": "10", "BilledCost": "10", "EffectiveCost": "10", **hour(h), **extra}


def rows() -> list[dict]:
    lines = []
    for h in range(4):
        # covered by the Savings Plan: $10 on demand for $6 of commitment
        lines.append(ec2("us-west-2", h, CommitmentDiscountId=SP, CommitmentDiscountStatus="Used",
                         CommitmentDiscountCategory="Spend", CommitmentDiscountType="Savings Plan",
                         BilledCost="10", EffectiveCost="6"))
        # its negation names the plan but is neither used nor unused commitment
        lines.append(ec2("us-west-2", h, ChargeCategory="Credit", CommitmentDiscountId=SP, BilledCost="-10",
                         EffectiveCost="0", ListCost="0"))
        # the fee: $8 an hour, $2 of it unused (AWS: SavingsPlanRecurringFee)
        lines.append({"ChargeCategory": "Purchase", "CommitmentDiscountId": SP, "CommitmentDiscountStatus": "Unused",
                      "CommitmentDiscountCategory": "Spend", "CommitmentDiscountType": "Savings Plan",
                      "ResourceId": SP, "SubAccountId": "111122223333", "BillingCurrency": "USD",
                      "BilledCost": "8", "EffectiveCost": "2", "Tags": {"team": "Inference"},
                      "x_commitment_end": "2027-06-01 00:00:00", **hour(h)})
        # on demand EC2 in another region: eligible for a Savings Plan, not covered
        lines.append(ec2("us-east-1", h))
        # S3 is not eligible
        lines.append({**ec2("us-west-2", h), "ServiceName": "Amazon S3", "ListCost": "50"})
    # a reservation left wholly unused, billed monthly: the window holds 7 of its 30 days
    lines.append({"ChargeCategory": "Purchase", "CommitmentDiscountId": RI, "CommitmentDiscountStatus": "Unused",
                  "CommitmentDiscountCategory": "Usage", "CommitmentDiscountType": "Reserved Instance",
                  "ResourceId": RI, "SubAccountId": "444455556666", "BillingCurrency": "USD",
                  "BilledCost": "720", "EffectiveCost": "720",
                  "ChargePeriodStart": "2026-11-01 00:00:00", "ChargePeriodEnd": "2026-12-01 00:00:00"})
    return lines


@pytest.fixture
def config_file(tmp_path):
    lake = Lake(tmp_path / "lake")
    build_lake(lake, {"costs": rows()}, NOW.date())
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": {
        "dimensions": {"team": {"tags": ["team"], "rules": [{"match": {"account": "444455556666"}, "value": "platform"}]},
                       "project": {"tags": ["project"]}}}}))
    return path


def spendlake(config_file, *args):
    return CliRunner().invoke(cli, ["--config", str(config_file), *args])


def test_used_unused_coverage_expiry_and_owner_per_commitment(config_file):
    result = spendlake(config_file, "commitments", "--since", "30d", "--until", "2026-11-08", "--by", "team",
                       "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["since"], data["until"], data["by"]) == ("2026-10-09T00:00:00Z", "2026-11-08T00:00:00Z", ["team"])
    by_id = {row["commitment_id"]: row for row in data["rows"]}
    sp, ri = by_id[SP], by_id[RI]
    assert [row["commitment_id"] for row in data["rows"]] == [RI, SP]  # largest unused first
    # 4 hours × $6 used + 4 × $2 unused
    assert {k: Decimal(sp[k]) for k in ("commitment", "used", "unused", "unused_pct", "utilization_pct")} == {
        "commitment": Decimal(32), "used": Decimal(24), "unused": Decimal(8), "unused_pct": Decimal(25),
        "utilization_pct": Decimal(75)}
    # covered $40 on demand of $80 eligible EC2 (both regions: a Savings Plan is not regional); S3 is not eligible
    assert (Decimal(sp["covered_usage"]), Decimal(sp["eligible_usage"]), Decimal(sp["coverage_pct"])) == (
        Decimal(40), Decimal(80), Decimal(50))
    assert (sp["expires"], sp["team"], sp["account"], sp["type"]) == (
        "2027-06-01T00:00:00Z", "Inference", "111122223333", "Savings Plan")
    # 7 of 30 days of $720 lie in the window, all unused; owned by its paying account's rule
    assert (Decimal(ri["unused"]), Decimal(ri["used"]), Decimal(ri["utilization_pct"])) == (
        Decimal(168), Decimal(0), Decimal(0))
    assert (ri["coverage_pct"], ri["expires"], ri["team"]) == (None, None, "platform")
    [total] = data["totals"]
    assert {k: Decimal(total[k]) for k in ("commitment", "used", "unused")} == {
        "commitment": Decimal(200), "used": Decimal(24), "unused": Decimal(176)}
    assert Decimal(total["utilization_pct"]) == Decimal(12)


def test_table_and_csv_show_the_same_commitments(config_file):
    table = CliRunner().invoke(cli, ["--config", str(config_file), "commitments", "--until", "2026-11-08",
                                     "--format", "table"], env={"COLUMNS": "300"})
    assert table.exit_code == 0, table.output
    assert "sp-1" in table.output and "25.0%" in table.output and "2027-06-01" in table.output
    csv = spendlake(config_file, "commitments", "--until", "2026-11-08", "--format", "csv")
    header, *lines = csv.output.splitlines()
    assert header.startswith("commitment_id,type,account,currency,commitment,used,unused")
    assert len(lines) == 2 and lines[1].startswith(SP)


def test_at_120_columns_the_table_shows_the_owner_asked_for_and_wraps_a_long_id(config_file):
    """The Savings Plan ARN took the width and `--by team`'s column was the first left out."""
    table = CliRunner().invoke(cli, ["--config", str(config_file), "commitments", "--until", "2026-11-08",
                                     "--by", "team", "--format", "table"], env={"COLUMNS": "120"})
    assert table.exit_code == 0, table.output
    header = next(line for line in table.output.splitlines() if "commitment_id" in line)
    assert "team" in header and "type" in header and "Inference" in table.output and "platform" in table.output
    # the ARN whole, over two lines broken after a separator
    assert "arn:aws:savingsplans::111122223333:" in table.output and "savingsplan/sp-1" in table.output
    assert max(len(line) for line in table.output.splitlines() if not line.startswith("not shown")) <= 120


def test_a_window_without_commitments_and_an_unknown_dimension(config_file):
    empty = spendlake(config_file, "commitments", "--since", "2026-01-01", "--until", "2026-02-01", "--format", "json")
    assert empty.exit_code == 0 and json.loads(empty.output)["rows"] == []
    wrong = spendlake(config_file, "commitments", "--by", "colour")
    assert wrong.exit_code == 2 and "colour" in wrong.output


def test_window_edges_count_the_fraction_inside(config_file):
    config = parse_config(yaml.safe_load(config_file.read_text()), str(config_file))
    window = Window(datetime(2026, 11, 7, 1, 30, tzinfo=timezone.utc), NOW)
    result = commitments(Lake.of(config), config, window)
    sp = next(row for row in result.rows if row.commitment_id == SP)
    assert (sp.used, sp.unused) == (Decimal(15), Decimal(5))  # half of hour 1, then hours 2 and 3
    assert share_in_window(Decimal(1), datetime(2026, 11, 1), datetime(2026, 11, 4), datetime(2026, 11, 2),
                           datetime(2026, 11, 8)) == Decimal("0.666666666667")


def test_aws_commitment_start_and_end_times_become_its_start_and_expiry(tmp_path):
    """savingsPlan/StartTime and reservation/StartTime were not read, so a commitment bought at
    14:00 in a daily export counted from its row's midnight; they are x_commitment_start now."""
    import duckdb
    from billing_helpers import failures, ingest_files
    from tests.aws_exports import local_put, write_cur2

    part = tmp_path / "part.parquet"
    duckdb.connect().execute(f"""COPY (SELECT TIMESTAMP '2026-10-01' AS bill_billing_period_start_date,
        TIMESTAMP '2026-11-01' AS bill_billing_period_end_date, TIMESTAMP '2026-10-02 03:00' AS
        line_item_usage_start_date, TIMESTAMP '2026-10-02 04:00' AS line_item_usage_end_date,
        'USD' AS line_item_currency_code, * FROM (VALUES
        ('SavingsPlanRecurringFee', 8.0, '{SP}', '2026-10-02T03:14:00.000Z', '2027-06-01T00:00:00.000Z', NULL,
         NULL, NULL),
        ('RIFee', 3.0, NULL, NULL, NULL, '{RI}', '2025-12-31T23:59:59Z', '2026-12-31T23:59:59Z'),
        ('RIFee', 3.0, NULL, NULL, NULL, 'arn:ri-2', 'not a time', 'not a time'),
        ('Usage', 1.0, NULL, '2026-10-02T00:00:00Z', NULL, NULL, NULL, NULL))
        t(line_item_line_item_type, line_item_unblended_cost, savings_plan_savings_plan_a_r_n,
          savings_plan_start_time, savings_plan_end_time, reservation_reservation_a_r_n, reservation_start_time,
          reservation_end_time)) TO '{part}' (FORMAT parquet)""")
    write_cur2(local_put(tmp_path / "export"), prefix="", export="cur2", period="2026-10", execution="e1",
               parts=[part.read_bytes()], fmt="parquet")
    lake, result = ingest_files(tmp_path, ("cur2", "aws-cur2", tmp_path / "export"))
    assert failures(result) == []
    got = lake.query().execute(
        "SELECT CommitmentDiscountId, x_commitment_start, x_commitment_end FROM costs ORDER BY ALL").fetchall()
    assert got == [(RI, datetime(2025, 12, 31, 23, 59, 59), datetime(2026, 12, 31, 23, 59, 59)),
                   (SP, datetime(2026, 10, 2, 3, 14), datetime(2027, 6, 1)),
                   ("arn:ri-2", None, None),  # a time that does not parse is none
                   (None, None, None)]  # a line of no commitment has none


def test_the_window_ends_where_the_data_ends(config_file):
    # usage runs through 2026-11-07 04:00; 1d back from there holds all four hours of the plan
    result = spendlake(config_file, "commitments", "--since", "1d", "--format", "json")
    data = json.loads(result.output)
    assert data["until"] == "2026-11-07T04:00:00Z"
    assert Decimal(next(r for r in data["rows"] if r["commitment_id"] == SP)["used"]) == Decimal(24)


def test_metrics_give_utilization_and_unused_dollars_by_type_and_owner(config_file):
    from prometheus_client import CollectorRegistry

    from service.serve.metrics import LakeCollector

    config = parse_config(yaml.safe_load(config_file.read_text()), str(config_file))
    registry = CollectorRegistry()
    registry.register(LakeCollector(config))
    value = registry.get_sample_value
    # 30 days to the data's end (2026-11-07 04:00): the plan's 4 hours, 148 of the reservation's 720 hours
    labels = {"type": "Savings Plan", "team": "Inference"}
    assert value("spendlake_commitment_utilization_ratio", labels) == 0.75
    assert value("spendlake_commitment_unused_usd", labels) == 8.0
    labels = {"type": "Reserved Instance", "team": "platform"}
    assert (value("spendlake_commitment_utilization_ratio", labels), value("spendlake_commitment_unused_usd", labels)) \
        == (0.0, 148.0)


def test_the_report_has_a_commitments_section(config_file):
    from datetime import date

    from service.report.data import gather
    from service.report.render import render_csvs, render_html

    config = parse_config(yaml.safe_load(config_file.read_text()), str(config_file))
    report = gather(config, Lake.of(config), date(2026, 11, 7))
    [section] = [s for s in report.sections if s.key == "commitments"]
    rows = {row["commitment_id"]: row for row in section.tables[0].rows}
    assert (Decimal(rows[RI]["unused"]), Decimal(rows[SP]["unused_pct"]), rows[SP]["expires"]) == (
        Decimal(168), Decimal(25), "2027-06-01T00:00:00Z")  # 30 days to 2026-11-08: 7 days of the reservation
    assert section.tables[0].total["unused"] == Decimal(176)
    # the reservation's bill names no end: its blank expires is said, not left to read as "never"
    assert rows[RI]["expires"] is None and section.tables[0].notes == [
        "An empty expires: the bill names no end date for that commitment (AWS exports give savingsPlan/EndTime "
        "and reservation/EndTime; other providers' cost rows carry none)."]
    html = render_html(report)
    assert "Commitments" in html and "sp-1" in html and "An empty expires: the bill names no end date" in html
    assert render_csvs(report)["commitments.csv"].splitlines()[0].startswith("commitment_id,type,account")


def test_the_demo_organisation_holds_a_partly_unused_savings_plan_and_capacity_reservation(tmp_path):
    from datetime import date

    from connectors.synthetic.billing import generate_organisation
    from connectors.synthetic.org import INSTANCES, SAVINGS_PLAN_USE
    from rules.capacity_unused import CapacityUnused
    from rules.commitment_unused import CommitmentUnused
    from rules.engine import evaluate
    from rules.context import RuleContext
    from service.core.timewindow import parse_window
    from service.ingest.billing import ingest

    result = generate_organisation(tmp_path / "out", days=2, start=date(2026, 11, 5), seed=5, rows=3000)
    org = result.organisation
    config = parse_config({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "cur2", "kind": "aws-cur2", "location": str(result.exports["parquet"])}]})
    assert all(o.status == "committed" for o in ingest(config).outcomes)
    lake = Lake.of(config)
    window = Window(datetime(2026, 11, 5, tzinfo=timezone.utc), datetime(2026, 11, 7, tzinfo=timezone.utc))
    [plan] = commitments(lake, config, window).rows
    assert plan.commitment_id == org.savings_plan_arn and plan.type == "Savings Plan"
    # the fleet uses SAVINGS_PLAN_USE of the hourly commitment, rounded up to the cent: a little more is unused
    assert plan.utilization_pct <= SAVINGS_PLAN_USE * 100 < plan.utilization_pct + 1 and plan.unused_pct >= 5
    assert plan.coverage_pct is not None and 0 < plan.coverage_pct <= 100

    ctx = RuleContext(con=lake.query(), window=parse_window("2d", now=window.until))
    fresh, outcomes = evaluate([CommitmentUnused(), CapacityUnused()], ctx)
    assert [o.status for o in outcomes] == ["ok", "ok"]
    [unused_plan] = fresh["commitment-unused"]
    assert Decimal(unused_plan.evidence["unused_usd"]) == plan.unused.quantize(Decimal("0.01"))
    [capacity] = fresh["capacity-unused"]
    # one of its two p5.48xlarge slots empty for the 48 hours, billed on demand
    assert capacity.resource_id == org.capacity_reservation_arn
    assert Decimal(capacity.evidence["unused_usd"]) == 48 * Decimal(INSTANCES["p5.48xlarge"][0])
    assert capacity.evidence["used_hours"] == capacity.evidence["unused_hours"] == "48"


def test_the_command_and_the_api_take_one_default_window(config_file, monkeypatch):
    """`30d` was written twice, as the option's default and in /api/v1/commitments' handler: both
    are COMMITMENTS_SINCE, which commitments_asked reads when no `since` is given."""
    from service.attribution import COMMITMENTS_SINCE
    from service.cli.commitments import commitments_command
    from service.core.config import load_config
    from tests.test_service_http import api_for

    [since] = [option for option in commitments_command.params if option.name == "since"]
    assert since.default == COMMITMENTS_SINCE
    api = api_for(load_config(config_file))
    shown = json.loads(spendlake(config_file, "commitments", "--format", "json").output)
    assert json.loads(api.handle("/api/v1/commitments", {}, None).body) == shown
    monkeypatch.setattr("service.attribution.commitment_usage.COMMITMENTS_SINCE", "1h")  # data ends 11-07 04:00
    assert json.loads(api.handle("/api/v1/commitments", {}, None).body)["since"] == "2026-11-07T03:00:00Z"


def test_the_commitments_chart_draws_the_currency_of_most_commitments_and_names_the_others(tmp_path):
    # two EUR reservations and one USD: the chart drew USD alone and left the EUR ones out unsaid; the
    # report of Nov 8 holds 8 of the USD one's 30 days, $192
    def reservation(arn: str, currency: str) -> dict:
        return {"ChargeCategory": "Purchase", "CommitmentDiscountId": arn, "CommitmentDiscountStatus": "Unused",
                "CommitmentDiscountCategory": "Usage", "CommitmentDiscountType": "Reserved Instance",
                "ResourceId": arn, "BillingCurrency": currency, "BilledCost": "720", "EffectiveCost": "720",
                "ChargePeriodStart": "2026-11-01 00:00:00", "ChargePeriodEnd": "2026-12-01 00:00:00"}
    from service.report.sections.commitments import commitments_section

    lake = Lake(tmp_path / "lake")
    build_lake(lake, {"costs": [reservation(RI, "USD"), reservation(RI + "-eu1", "EUR"),
                                reservation(RI + "-eu2", "EUR")]}, NOW.date())
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake)})
    [chart] = commitments_section(config, lake, NOW.date()).charts
    assert (chart.currency, chart.title, len(chart.categories)) == ("EUR", "Commitments (EUR): used and unused", 2)
    assert chart.note == ("The chart draws EUR only, the currency most of its rows are in (currencies are never "
                          "converted): $192.00 over the same days is left out; commitments.csv has it.")
