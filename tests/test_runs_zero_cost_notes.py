"""Runs that read $0 say why (break53b B6, B7): a Savings-Plan node's hours are billed $0 (its fee on
a line of its own), a Capacity Block's hours carry no cost (its price on its Purchase line): `runs`,
`attribute --by run` and the API note it beside the rows, as the daily report's clusters section does
(service/attribution/run_cost_notes.py). The bill is break53b's scenario s1: five p5.48xlarge
instance-hours, each half held by one run (4 of 8 GPUs)."""

from __future__ import annotations

import csv
import json
from datetime import date
from urllib.parse import parse_qs

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import load_config
from service.core.lake import Lake
from service.report.sections.clusters import clusters_section
from tests.test_service_http import api_for

COLUMNS = ("BilledCost", "EffectiveCost", "ListCost", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
           "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ChargeFrequency", "PricingCategory",
           "ProviderName", "ServiceName", "ResourceId", "SkuMeter", "CommitmentDiscountId", "CommitmentDiscountStatus",
           "CapacityReservationId", "CapacityReservationStatus", "Tags")
SP = "arn:aws:savingsplans::111122223333:savingsplan/sp-1"
BLOCK = "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-0cb"
P5 = "USE1-BoxUsage:p5.48xlarge"
HOUR = ("2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z")
SP_NOTE = ("the clusters' instances' effective (amortized) cost in the window is $312.08 where they are billed $252.08 "
           "($60.00 more: a Savings Plan or reservation covers hours billed $0 here): the commitment's fee is its own "
           "line, on no run; {option} shows each run its share of it")
BLOCK_NOTE = ("1.0 instance-hour(s) in the window ran on Capacity Block cr-0cb whose price, $500.00 (its Purchase "
              "line), is on no run: the block's hours carry no {cost} cost in the bill, so their runs read $0 for them "
              "(README: Shared GPU clusters, Capacity Blocks)")


def line(billed, effective, resource, meter=P5, category="Usage", period=HOUR, commitment="", reservation="",
         status="", tags='{"cluster":"p5"}'):
    used = "Used" if commitment and category == "Usage" else ""
    return (billed, effective, effective, "USD", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", *period, category,
            "Usage-Based" if category == "Usage" else "One-Time", "Committed" if commitment else "Standard", "AWS",
            "Amazon Elastic Compute Cloud", resource, meter, commitment, used, reservation, status, tags)


ON_DEMAND = line("98.32", "98.32", "i-0a")
SAVINGS_PLAN = [line("0", "60", "arn:aws:ec2:us-east-1:111122223333:instance/i-0b", commitment=SP),
                line("60", "0", SP, "ComputeSP:1yrNoUpfront", "Purchase", commitment=SP, tags="{}")]
# the block bought the day before its hour: its price on a Purchase line, its hour carrying none
CAPACITY_BLOCK = [line("0", "0", "i-0d", reservation=BLOCK, status="Used"),
                  line("500", "500", BLOCK, "USE1-CapacityBlock:p5.48xlarge", "Purchase",
                       ("2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"), reservation=BLOCK, tags="{}")]
SPOT_AND_UNSIZED = [line("40", "40", "i-0c", "USE1-SpotUsage:p5.48xlarge"),
                    line("113.76", "113.76", "i-0e", "USE1-BoxUsage:p6-b300.48xlarge")]


def lake_of(tmp_path, lines) -> str:
    """The config of a lake holding `lines` and one job per instance id, run-<id>, holding 4 GPUs for the hour."""
    bill = tmp_path / "bill" / "2026-11"
    bill.mkdir(parents=True)
    with open(bill / "focus.csv", "w", newline="") as out:
        csv.writer(out).writerows([COLUMNS, *lines])
    instances = [row[13].rsplit("/", 1)[-1] for row in lines if row[8] == "Usage"]
    (tmp_path / "jobs.csv").write_text("job_id,run_id,start_time,end_time,gpus,instance_ids,cluster\n" + "".join(
        f"{i},run-{i},{HOUR[0]},{HOUR[1]},4,{i},p5\n" for i in instances))
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"), "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "bill")}],
        "inventory": [{"name": "jobs", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv")}],
        "attribution": {"clusters": {"cluster_tag": "cluster"}}}))
    for command in (["ingest"], ["inventory"]):
        done = CliRunner().invoke(cli, ["--config", str(path), *command])
        assert done.exit_code == 0, done.output
    return str(path)


def run(config: str, *args: str):
    done = CliRunner().invoke(cli, ["--config", config, *args])
    assert done.exit_code == 0, done.output
    return done


def notes(done) -> list[str]:
    return [text.removeprefix("note: ") for text in done.stderr.splitlines() if text.startswith("note: ")]


def test_runs_on_savings_plan_nodes_note_the_clusters_effective_cost_in_every_format(tmp_path):
    config = lake_of(tmp_path, [ON_DEMAND, *SAVINGS_PLAN, *SPOT_AND_UNSIZED])
    said = SP_NOTE.format(option="--cost effective")
    data = json.loads(run(config, "runs", "--format", "json").stdout)
    assert {row["run"]: row["cost"] for row in data["rows"]}["run-i-0b"] == "0.000000000000"
    assert said in data["notes"]
    for fmt in ("table", "csv"):
        assert said in notes(run(config, "runs", "--format", fmt))
    story = run(config, "runs", "--run", "run-i-0b", "--format", "table")
    assert said in notes(story)
    # asked effective, the run carries its share of the commitment: nothing to say
    effective = run(config, "runs", "--cost", "effective", "--format", "json")
    assert {row["run"]: row["cost"] for row in json.loads(effective.stdout)["rows"]}["run-i-0b"] == "30.000000000000"
    assert not any("effective (amortized)" in note for note in notes(effective))
    # the API spells the option as a URL does
    served = json.loads(api_for(load_config(config)).handle("/api/v1/runs", parse_qs("since=2026-11-01"), None).body)
    assert SP_NOTE.format(option="cost=effective") in served["notes"]


def test_on_demand_nodes_say_nothing_of_effective_cost(tmp_path):
    config = lake_of(tmp_path, [ON_DEMAND, *SPOT_AND_UNSIZED])
    assert notes(run(config, "runs", "--format", "csv")) == []
    assert notes(run(config, "attribute", "--by", "run", "--since", "2026-11-01", "--format", "csv")) == []


def test_a_capacity_blocks_runs_note_its_price_on_no_run_billed_and_effective(tmp_path):
    config = lake_of(tmp_path, [ON_DEMAND, *CAPACITY_BLOCK])
    for cost in ("billed", "effective"):
        done = run(config, "runs", "--cost", cost, "--format", "json")
        assert {row["run"]: row["cost"] for row in json.loads(done.stdout)["rows"]}["run-i-0d"] == "0.000000000000"
        assert notes(done) == [BLOCK_NOTE.format(cost=cost)]
    # the price is on the hours where the bill amortizes it (AWS: the hours' EffectiveCost): no note effective
    amortized = [line("0", "500", "i-0d", reservation=BLOCK, status="Used"),
                 line("500", "0", *CAPACITY_BLOCK[1][13:15], "Purchase", ("2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"),
                      reservation=BLOCK, tags="{}")]
    config = lake_of(tmp_path / "amortized", [ON_DEMAND, *amortized])
    assert notes(run(config, "runs", "--cost", "effective", "--format", "json")) == []


def test_attribute_by_run_says_both_on_stderr_and_the_api_in_its_notes(tmp_path):
    config = lake_of(tmp_path, [ON_DEMAND, *SAVINGS_PLAN, *CAPACITY_BLOCK, *SPOT_AND_UNSIZED])
    done = run(config, "attribute", "--by", "run", "--since", "2026-11-01", "--format", "csv")
    assert "run-i-0b,USD,0.000000000000" in done.stdout
    assert notes(done) == [BLOCK_NOTE.format(cost="billed"), SP_NOTE.format(option="--cost effective")]
    # by a dimension without runs there is no run to read $0
    assert notes(run(config, "attribute", "--by", "team", "--since", "2026-11-01", "--format", "csv")) == []
    served = json.loads(api_for(load_config(config)).handle(
        "/api/v1/attribute", parse_qs("since=2026-11-01&by=run"), None).body)
    assert served["notes"] == [BLOCK_NOTE.format(cost="billed"), SP_NOTE.format(option="cost=effective")]
    assert json.loads(run(config, "attribute", "--check").stdout)[0]["ok"] is True


def test_the_reports_note_gives_a_savings_plan_used_whole_whose_bill_totals_are_alike(tmp_path):
    # the fee billed $60 and effective 0, the hour it covers billed 0 and effective $60: the bill's totals are
    # alike (812.08 both in break53b's s1), which the report's ledger check read as nothing to say
    config = load_config(lake_of(tmp_path, [ON_DEMAND, *SAVINGS_PLAN, *SPOT_AND_UNSIZED]))
    [section] = clusters_section(config, Lake(config.lake), date(2026, 11, 2), 10)
    assert section.note.endswith(
        " The clusters' instances' effective (amortized) cost this month is $312.08 where they are billed $252.08 "
        "($60.00 more: a Savings Plan or reservation covers hours billed $0 here); `report.clusters_cost: effective` "
        "shows each run its share of the commitment."), section.note
