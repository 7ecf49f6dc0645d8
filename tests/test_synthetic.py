"""The synthetic organisation: deterministic, realistic in shape, exact in its totals."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from connectors.synthetic.billing import generate_organisation, write_billing
from connectors.synthetic.org import PLATFORM_TEAM, TEAMS, build_organisation
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest

START = date(2026, 10, 29)  # a window across a month boundary: two billing periods


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    out = tmp_path_factory.mktemp("org")
    return generate_organisation(out, days=6, start=START, seed=11, formats=("parquet", "csv.gz"))


@pytest.fixture(scope="module")
def fortnight(tmp_path_factory):
    return generate_organisation(tmp_path_factory.mktemp("org14"), days=14, start=date(2026, 9, 1), seed=3)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_gives_byte_identical_exports(both, tmp_path):
    again = generate_organisation(tmp_path, days=6, start=START, seed=11, formats=("parquet", "csv.gz"))
    for fmt, root in both.exports.items():
        assert tree(root) == tree(again.exports[fmt]), fmt
    assert again.periods == both.periods


def test_another_seed_gives_another_bill(both, tmp_path):
    other = generate_organisation(tmp_path, days=6, start=START, seed=12)
    assert other.billed_cost != both.billed_cost


def test_layout_and_manifests_are_those_of_data_exports(both):
    for fmt, root in both.exports.items():
        periods = sorted(p.name for p in (root / "metadata").iterdir())
        assert periods == ["BILLING_PERIOD=2026-10", "BILLING_PERIOD=2026-11"]
        for period in periods:
            manifest = json.loads((root / "metadata" / period / f"{root.name}-Manifest.json").read_text())
            assert manifest["billingPeriod"]["start"].startswith(period.split("=")[1])
            [uri] = manifest["dataFiles"]
            assert uri.startswith("s3://") and f"/{root.name}/data/{period}/" in uri
            local = root / uri[uri.index("/data/") + 1:]
            assert local.is_file() and local.name.endswith(".snappy.parquet" if fmt == "parquet" else ".csv.gz")
            assert len(manifest["executionId"]) == 36


def test_totals_match_the_rows_and_the_amortization_rule(both):
    con = duckdb.connect()
    for fmt, root in both.exports.items():
        reader = "read_parquet" if fmt == "parquet" else "read_csv"
        for period in both.periods:
            files = str(root / "data" / f"BILLING_PERIOD={period.billing_period}" / "*")
            rows, billed, effective, invoices = con.execute(f"""
                SELECT count(*), sum(CAST(line_item_unblended_cost AS DECIMAL(38,10))),
                       sum(CASE line_item_line_item_type
                           WHEN 'SavingsPlanCoveredUsage' THEN CAST(savings_plan_savings_plan_effective_cost AS DECIMAL(38,10))
                           WHEN 'SavingsPlanNegation' THEN 0
                           WHEN 'SavingsPlanRecurringFee' THEN CAST(savings_plan_total_commitment_to_date AS DECIMAL(38,10))
                                - CAST(savings_plan_used_commitment AS DECIMAL(38,10))
                           ELSE CAST(line_item_unblended_cost AS DECIMAL(38,10)) END),
                       count(DISTINCT coalesce(CAST(bill_invoice_id AS VARCHAR), ''))
                FROM {reader}(?)""", [files]).fetchone()
            assert (rows, billed, effective) == (period.rows, period.billed_cost, period.effective_cost), fmt
            assert invoices == 1
    assert [p.final for p in both.periods] == [True, False]  # the open month has no invoice yet


def test_money_is_exact_decimal(both):
    con = duckdb.connect()
    parquet = str(both.exports["parquet"] / "data" / "*" / "*.parquet")
    kinds = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))",
                             [parquet]).fetchall())
    assert kinds["line_item_unblended_cost"] == "DECIMAL(38,10)"
    assert kinds["resource_tags"] == "MAP(VARCHAR, VARCHAR)"
    assert kinds["line_item_usage_start_date"].startswith("TIMESTAMP")
    csv_text = both.exports["csv.gz"] / "data" / "BILLING_PERIOD=2026-11" / "ml-org-cur2-csv-00001.csv.gz"
    costs = duckdb.connect().execute("SELECT line_item_unblended_cost FROM read_csv(?, all_varchar = true) LIMIT 50",
                                     [str(csv_text)]).fetchall()
    assert all(len(c.split(".")[1]) == 10 for (c,) in costs)


def test_a_savings_plan_negations_rate_is_negative_as_its_cost_is(both):
    """A CUR's SavingsPlanNegation writes the covered usage's rate negated (its UnblendedRate ×
    UsageAmount is its negative UnblendedCost); the generator wrote it positive, which the FOCUS
    export read as a contracted unit price."""
    files = str(both.exports["parquet"] / "data" / "*" / "*.parquet")
    signs = duckdb.connect().execute(
        "SELECT line_item_line_item_type, sign(CAST(line_item_unblended_rate AS DECIMAL(38,10))), "
        "sign(line_item_unblended_cost), count(*) FROM read_parquet(?) WHERE line_item_line_item_type "
        "LIKE 'SavingsPlan%Usage' OR line_item_line_item_type = 'SavingsPlanNegation' GROUP BY ALL ORDER BY ALL",
        [files]).fetchall()
    assert [row[:3] for row in signs] == [("SavingsPlanCoveredUsage", 1, 1), ("SavingsPlanNegation", -1, -1)]


def test_the_bill_looks_like_an_ml_organisation(fortnight):
    con = duckdb.connect()
    files = str(fortnight.exports["parquet"] / "data" / "*" / "*.parquet")
    con.read_parquet(files).create_view("bill")
    total = con.execute("SELECT sum(line_item_unblended_cost) FROM bill").fetchone()[0]
    gpu = con.execute("SELECT sum(line_item_unblended_cost) FROM bill WHERE product_instance_type IN "
                      "('p5.48xlarge', 'p4d.24xlarge', 'g5.12xlarge')").fetchone()[0]
    assert gpu / total > Decimal("0.6")  # GPUs dominate
    types = {t for (t,) in con.execute("SELECT DISTINCT line_item_line_item_type FROM bill").fetchall()}
    assert types == {"Usage", "SavingsPlanCoveredUsage", "SavingsPlanNegation", "SavingsPlanRecurringFee",
                     "Tax", "Fee", "Credit"}
    keys = {k for (k,) in con.execute("SELECT DISTINCT unnest(map_keys(resource_tags)) FROM bill").fetchall()}
    assert {"user_team", "user_Team", "user_owner_team", "user_project", "user_experiment"} <= keys
    teams = {v.strip().lower() for (v,) in con.execute(
        "SELECT DISTINCT coalesce(resource_tags['user_team'], resource_tags['user_Team'], "
        "resource_tags['user_owner_team']) FROM bill").fetchall() if v}
    assert teams == {*TEAMS, PLATFORM_TEAM}  # the platform team runs no fleet: it buys the Savings Plan
    tagged = con.execute("SELECT sum(line_item_unblended_cost) FROM bill WHERE cardinality(resource_tags) > 0").fetchone()[0]
    assert Decimal("0.7") < tagged / total < Decimal("0.9")
    assert tagged == total - fortnight.spend_by_team[None]
    experiments = {v for (v,) in con.execute("SELECT DISTINCT resource_tags['user_experiment'] FROM bill").fetchall() if v}
    assert any(e.startswith("llama-70b-run-") for e in experiments)
    services = {s for (s,) in con.execute("SELECT DISTINCT product['product_name'] FROM bill").fetchall()}
    assert {"Amazon Simple Storage Service", "Amazon FSx", "AmazonCloudWatch", "AWS Data Transfer",
            "AWS Support (Business)", "Savings Plans for AWS Compute usage"} <= services
    storage = {u for (u,) in con.execute("SELECT DISTINCT line_item_usage_type FROM bill "
                                         "WHERE line_item_product_code = 'AmazonS3'").fetchall()}
    assert {"TimedStorage-ByteHrs", "TimedStorage-SIA-ByteHrs", "TimedStorage-GlacierByteHrs"} <= storage
    p5 = con.execute("SELECT DISTINCT line_item_unblended_rate FROM bill WHERE line_item_usage_type = "
                     "'BoxUsage:p5.48xlarge'").fetchall()
    assert p5 == [("98.32",)]


@pytest.mark.slow  # generates an organisation's bill
def test_rows_sizes_the_fleet(tmp_path):
    result = generate_organisation(tmp_path, days=31, start=date(2026, 10, 1), seed=5, rows=300_000)
    assert [p.billing_period for p in result.periods] == ["2026-10"]
    assert 270_000 < result.rows < 330_000


def test_a_changed_organisation_bills_the_change(tmp_path):
    """The extension point: build, alter the streams (here: one more p5 node), write."""
    org = build_organisation(4, START, 3)
    node = next(s for s in org.streams if s.usage_type == "BoxUsage:p5.48xlarge")
    base = write_billing(build_organisation(4, START, 3), tmp_path / "base")
    org.streams.append(replace(node, resource_id="i-0123456789abcdef0", start=0, end=org.hours))
    changed = write_billing(org, tmp_path / "changed")
    assert changed.rows == base.rows + org.hours
    added = changed.billed_cost - base.billed_cost  # the node, plus support fee (3%) and its tax
    assert Decimal("98.32") * org.hours < added < Decimal("98.32") * org.hours * Decimal("1.1")


@pytest.mark.slow  # generates and ingests a legacy CUR
def test_legacy_cur_holds_the_same_bill_for_the_aws_cur_connector(tmp_path):
    result = generate_organisation(tmp_path / "out", days=5, start=START, seed=11,
                                   formats=("legacy-csv.gz",))
    root = result.exports["legacy-csv.gz"]
    assert sorted(p.name for p in root.iterdir()) == ["20261001-20261101", "20261101-20261201"]
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "cur", "kind": "aws-cur", "location": str(root)}]})
    outcomes = ingest(config).outcomes
    assert [o.status for o in outcomes] == ["committed", "committed"]
    assert [(e.billing_period, e.rows, e.totals[0].billed_cost, e.totals[0].effective_cost)
            for o in outcomes for e in o.entries] == [
        (p.billing_period, p.rows, p.billed_cost, p.effective_cost) for p in result.periods]
    keys = {k for (k,) in Lake(tmp_path / "lake").query().execute(
        "SELECT DISTINCT unnest(map_keys(Tags)) FROM costs").fetchall()}
    assert {"user:team", "user:Team", "user:owner-team", "user:project"} <= keys


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="formats"):
        generate_organisation(tmp_path, days=1, start=START, formats=("xlsx",))


@pytest.mark.slow
def test_parts_split_every_format_and_each_connector_reads_them_whole(tmp_path):
    """AWS splits large deliveries into numbered parts; the bench sends 20 of them."""
    kinds = {"parquet": "aws-cur2", "csv.gz": "aws-cur2", "legacy-csv.gz": "aws-cur", "focus-csv": "focus"}
    result = generate_organisation(tmp_path / "out", days=4, start=START, seed=11, parts=3, formats=tuple(kinds))
    con = duckdb.connect()
    for fmt, root in result.exports.items():
        files = [f for f in result.files if f.is_relative_to(root)]
        assert len(files) == 3 * len(result.periods), fmt
        reader = "read_parquet" if fmt == "parquet" else "read_csv"
        sizes = [con.execute(f"SELECT count(*) FROM {reader}(?)", [str(f)]).fetchone()[0] for f in files[:3]]
        assert sum(sizes) == result.periods[0].rows and max(sizes) - min(sizes) < 0.02 * sum(sizes) + 10, sizes
        config = parse_config({"lake": str(tmp_path / f"lake-{kinds[fmt]}-{len(fmt)}"),
                               "sources": [{"name": "s", "kind": kinds[fmt], "location": str(root)}]})
        entries = [e for o in ingest(config).outcomes for e in o.entries]
        assert [(e.billing_period, e.rows, e.totals[0].billed_cost, e.totals[0].effective_cost) for e in entries] == [
            (p.billing_period, p.rows, p.billed_cost, p.effective_cost) for p in result.periods], fmt
    manifest = json.loads(result.manifests[0].read_text())
    assert [k.rsplit("-", 1)[1] for k in manifest["dataFiles"]] == ["00001.snappy.parquet", "00002.snappy.parquet",
                                                                     "00003.snappy.parquet"]


@pytest.mark.slow  # generates, ingests and exports a FOCUS CSV
def test_the_focus_files_price_each_line_as_focus_requires_and_a_negation_contracts_at_0(tmp_path):
    """The FOCUS files had no ContractedCost, ContractedUnitPrice or ListUnitPrice: the export took
    a Savings Plan negation's ContractedCost to be its BilledCost, so the Credits' contracted cost
    held the negations' -9,438.51 beside the credits' -2,419.35 (these 3 days). A priced line now
    has unit prices whose product with its PricingQuantity is its contracted and list cost; a
    negation contracts and lists at 0 (its covered usage holds the hour's), a tax or a credit at its
    billed cost, without unit prices."""
    from service.export import ExportOptions, export_focus

    root = generate_organisation(tmp_path / "out", days=3, start=START, seed=11, formats=("focus-csv",)).exports[
        "focus-csv"]
    con = duckdb.connect()
    lines = con.execute(
        f"SELECT ChargeCategory, ChargeDescription, BilledCost, ContractedCost, ListCost, ContractedUnitPrice, "
        f"ListUnitPrice, PricingQuantity, PricingUnit FROM read_csv('{root}/*/*.csv', all_varchar=true)").fetchall()
    kinds = set()
    for category, description, billed, contracted, listed, unit_price, list_price, quantity, unit in lines:
        negation = description.startswith("SavingsPlanNegation")
        kinds.add((category, negation))
        if category in ("Usage", "Purchase"):
            product = Decimal(unit_price) * Decimal(quantity)
            assert abs(product - Decimal(contracted)) <= Decimal("1e-10") and unit_price == list_price and unit
            assert Decimal(listed) == Decimal(contracted) == Decimal(billed)
        else:
            assert (unit_price, list_price, quantity, unit) == (None, None, None, None)
            expected = Decimal(0) if negation else Decimal(billed)
            assert Decimal(contracted) == Decimal(listed) == expected, description
    assert kinds == {("Usage", False), ("Purchase", False), ("Tax", False), ("Credit", False), ("Credit", True)}

    config = parse_config({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "focus", "kind": "focus", "location": str(root)}]})
    assert [o.status for o in ingest(config).outcomes] == ["committed"]  # one folder of loose files
    export_focus(config, ExportOptions(str(tmp_path / "export")))
    exported = {(category, negation): (billed, contracted) for category, negation, billed, contracted in con.execute(
        "SELECT ChargeCategory, starts_with(ChargeDescription, 'SavingsPlanNegation'), sum(BilledCost), "
        f"sum(ContractedCost) FROM read_parquet('{tmp_path}/export/**/*.parquet') GROUP BY ALL").fetchall()}
    generated: dict = {}
    for category, description, billed, contracted, *_ in lines:
        key = (category, description.startswith("SavingsPlanNegation"))
        sums = generated.setdefault(key, [Decimal(0), Decimal(0)])
        sums[0], sums[1] = sums[0] + Decimal(billed), sums[1] + Decimal(contracted)
    assert exported == {key: tuple(sums) for key, sums in generated.items()}
    assert exported[("Credit", True)][0] < 0 == exported[("Credit", True)][1]  # the negations: billed, contracted
