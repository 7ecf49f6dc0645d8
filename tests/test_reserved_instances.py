"""A CUR 2.0 month with a Reserved Instance, end to end: its fee lines (RIFee) and the usage it
covered (DiscountedUsage: billed 0, its amortized cost in `reservation_effective_cost`) ingest,
attribute tying out to the bill (`attribute --check`), and export as FOCUS with every money sum
the lake's plus what the export fills (tests/test_export.py `filled_sums`: a covered hour
contracts at its ListCost).

By hand: a g5.12xlarge (On-Demand 5.672 an hour) under an RI of 3.50 an hour, 2026-11-02 10:00-12:00:
two covered hours (billed 0, effective 3.50, list 5.672 each) of team nlp and the RI's two fees
(billed 3.50 each, effective 0: amortized into the hours); one On-Demand hour of another g5 at 13:00
(5.672, team cv); a tax of 1.00. Billed 3.50 + 3.50 + 5.672 + 1.00 = 13.672, effective the same.
"""

from __future__ import annotations

import json
from decimal import Decimal

import duckdb
import yaml
from click.testing import CliRunner
from test_clusters_eks_cur2 import G5, RI, add_to, config_file, hour, write_export
from test_export import assert_ties_out, export_sums, filled_sums, lake_sums

from service.cli.main import cli
from service.core.lake import Lake

D = Decimal
OTHER_G5 = "i-0g5c000000000003"


def reserved_month(tmp_path) -> str:
    lines: list[dict] = []
    for h in (10, 11):
        add_to(lines, hour(h), "DiscountedUsage", "AmazonEC2", "USE1-BoxUsage:g5.12xlarge", G5, "0", "5.672",
               instance_type="g5.12xlarge", reservation_effective_cost="3.50", reservation_reservation_a_r_n=RI,
               pricing_public_on_demand_rate="5.672", pricing_unit="Hrs", tags={"user_team": "nlp"})
        add_to(lines, hour(h), "RIFee", "AmazonEC2", "HeavyUsage:g5.12xlarge", RI, "3.50", "0",
               instance_type="g5.12xlarge", reservation_reservation_a_r_n=RI,
               reservation_unused_amortized_upfront_fee_for_billing_period="0", reservation_unused_recurring_fee="0")
    add_to(lines, hour(13), "Usage", "AmazonEC2", "USE1-BoxUsage:g5.12xlarge", OTHER_G5, "5.672", "5.672",
           instance_type="g5.12xlarge", pricing_public_on_demand_rate="5.672", pricing_unit="Hrs",
           tags={"user_team": "cv"})
    add_to(lines, hour(0), "Tax", "AmazonEC2", "", "", "1.00", "0", operation="")
    path = config_file(tmp_path, write_export(tmp_path, "parquet", lines=lines), clusters=False)
    ingested = CliRunner().invoke(cli, ["--config", str(path), "ingest"])
    assert ingested.exit_code == 0, ingested.output
    return str(path)


def test_a_reserved_instances_covered_hours_and_fees_attribute_and_export_tying_out(tmp_path):
    path = reserved_month(tmp_path)
    lake = Lake(yaml.safe_load(open(path))["lake"])
    checked = CliRunner().invoke(cli, ["--config", path, "attribute", "--check", "--format", "json"])
    assert checked.exit_code == 0, checked.output
    teams = {}
    for cost in ("billed", "effective"):
        shown = CliRunner().invoke(cli, ["--config", path, "attribute", "--since", "2026-11-01", "--until",
                                         "2026-12-01", "--cost", cost, "--format", "json"])
        assert [t["cost"] for t in json.loads(shown.stdout)["totals"]] == ["13.672000000000"], (cost, shown.output)
        teams[cost] = {row["team"]: D(row["cost"]) for row in json.loads(shown.stdout)["rows"]}
    # billed, the fees are the RI's (no tag) and the hours they covered 0; effective, the hours carry them
    assert teams == {"billed": {"unallocated": D("8.00"), "cv": D("5.672"), "nlp": D(0)},
                     "effective": {"nlp": D("7.00"), "cv": D("5.672"), "unallocated": D("1.00")}}
    filled = filled_sums(lake)
    assert filled[("2026-11", "USD", "cur2"), "ContractedCost"] > 0  # the covered hours' contracted cost is filled
    out = tmp_path / "focus"
    exported = CliRunner().invoke(cli, ["--config", path, "export", "--format", "focus", "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    assert_ties_out(lake_sums(lake), export_sums(out))
    data = f"read_parquet('{out}/*/*.parquet')"
    covered = duckdb.sql(f"SELECT BilledCost, EffectiveCost, ContractedCost, ListCost FROM {data} "
                         "WHERE CommitmentDiscountStatus = 'Used'").fetchall()
    assert covered == [(D(0), D("3.5"), D("5.672"), D("5.672"))] * 2
    # contracted: 2 × 5.672 covered + 2 × 3.50 fees + 5.672 = 24.016, and the tax's 1.00 × 24.016 / 12.672
    # (1.90); list: 2 × 5.672 + 5.672 = 17.016 (the fees list at 0), the tax's 1.34
    assert duckdb.sql(f"SELECT sum(BilledCost), sum(ContractedCost), sum(ListCost) FROM {data}").fetchall() == [
        (D("13.672"), D("25.916"), D("18.356"))]
