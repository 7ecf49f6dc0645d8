"""A cost line's instance-hours bound what its instance gives (service/attribution/allocation_hours.py):
a line of Q instance-hours below its charge period's hours was up Q hours, placed on its jobs'
time first; above them it is Q / hours instances. p5.48xlarge and Standard_ND96isr_H100_v5 have 8
GPUs and bill $98.32 an hour here ($12.29 a GPU-hour); every figure is worked out by hand."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli

D = Decimal
FOCUS = ("BilledCost", "EffectiveCost", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
         "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ProviderName", "ResourceId")
ND_H100 = json.dumps({"UsageType": "ComputeHR", "ServiceType": "Standard_ND96isr_H100_v5", "VCPUs": 96})
VMSS = "/subscriptions/5f1b/resourcegroups/mc_aks/providers/microsoft.compute/virtualmachinescalesets/aks-gpu-vmss"
DAY = ("2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")


def focus_bill(extra: tuple[str, ...], rows: list[tuple]) -> str:
    """A FOCUS CSV: each row (cost, charge period start, end, resource, *values of `extra`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow((*FOCUS, *extra))
    for cost, start, end, resource, *values in rows:
        writer.writerow((cost, cost, "USD", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", start, end, "Usage",
                         "Cloud", resource, *values))
    return out.getvalue()


def aws_line(cost: str, start: str, end: str, instance: str, quantity: str, unit: str = "Hrs") -> tuple:
    return (cost, start, end, instance, "USE1-BoxUsage:p5.48xlarge", quantity, unit, quantity, unit)


AWS = ("x_UsageType", "ConsumedQuantity", "ConsumedUnit", "PricingQuantity", "PricingUnit")


def cur_bill(rows: list[tuple]) -> str:
    """A legacy CUR CSV: each row (cost, usage start, end, instance, UsageAmount, pricing/unit)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("identity/LineItemId", "identity/TimeInterval", "bill/BillingPeriodStartDate",
                     "bill/BillingPeriodEndDate", "lineItem/LineItemType", "lineItem/UsageStartDate",
                     "lineItem/UsageEndDate", "lineItem/UsageType", "lineItem/ResourceId", "lineItem/UsageAmount",
                     "lineItem/CurrencyCode", "lineItem/UnblendedCost", "product/instanceType", "pricing/unit"))
    for n, (cost, start, end, instance, quantity, unit) in enumerate(rows):
        writer.writerow((f"li{n}", f"{start}/{end}", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", "Usage", start,
                         end, "USE1-BoxUsage:p5.48xlarge", instance, quantity, "USD", cost, "p5.48xlarge", unit))
    return out.getvalue()


def allocate(tmp_path, bill: str, jobs: str, clusters: dict | None = None, kind: str = "focus") -> dict:
    """Ingest `bill` (a file of source `kind`) and the jobs file `jobs`; the cost of each run and
    idle, checked to tie out to the bill."""
    folder = tmp_path / "bill" / "2026-11"
    folder.mkdir(parents=True)
    (folder / "bill.csv").write_text(bill)
    (tmp_path / "jobs.csv").write_text(jobs)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"), "sources": [{"name": "bill", "kind": kind, "location": str(tmp_path / "bill")}],
        "inventory": [{"name": "jobs", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv")}],
        "attribution": {"clusters": clusters or {}}}))
    window = ["--since", "2026-11-01", "--until", "2026-12-01"]
    for command in (["ingest"], ["inventory"], ["attribute", "--check", *window]):
        done = CliRunner().invoke(cli, ["--config", str(path), *command])
        assert done.exit_code == 0, done.output
    shown = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--by", "run", *window, "--format", "json"])
    assert shown.exit_code == 0, shown.output
    costs = {row["run"]: D(str(row["cost"])) for row in json.loads(shown.stdout)["rows"]}
    runs = CliRunner().invoke(cli, ["--config", str(path), "runs", *window, "--format", "json"])
    assert runs.exit_code == 0, runs.output
    for row in json.loads(runs.stdout)["rows"]:  # `runs` tells the same cost as `attribute --by run`
        assert D(str(row["cost"])) == costs[row["run"]], row
    return {run: cost for run, cost in costs.items() if cost}


def jobs_file(*jobs: tuple[str, str, str, int, str]) -> str:
    """(run, start (hour:minute on 2026-11-02, or a time), end, GPUs, instance ids or '' for a pool job of `nd`)."""
    def time(value: str) -> str:
        return value if "T" in value else f"2026-11-02T{value}:00Z"
    rows = [f"j{n},{run},{time(start)},{time(end)},{gpus},{ids},nd" for n, (run, start, end, gpus, ids) in enumerate(jobs)]
    return "job_id,run_id,start_time,end_time,gpus,instance_ids,cluster\n" + "\n".join(rows) + "\n"


def test_a_daily_line_of_a_node_up_three_hours_goes_to_the_run_that_held_it_all(tmp_path):
    # break53b s4: one AWS line for the day, 3 Hrs, $294.96 (3 x $98.32); r1 holds the 8 GPUs
    # 10:00-13:00, all the node ran: r1 $294.96, no idle (before: r1 $36.87 = 1/8, idle $258.09).
    bill = focus_bill(AWS, [aws_line("294.96", *DAY, "i-0day", "3")])
    assert allocate(tmp_path, bill, jobs_file(("r1", "10:00", "13:00", 8, "i-0day"))) == {"r1": D("294.96")}


def test_an_azure_daily_line_in_hours_goes_to_the_run_that_held_it_all(tmp_path):
    # break53b s5: Microsoft's FOCUS export, ConsumedQuantity 3 Hours, the job naming the VM in
    # ARM's casing: r1 $294.96 (before: $36.87, idle $258.09).
    vm = "/subscriptions/5f1b/resourcegroups/train/providers/microsoft.compute/virtualmachines/nd-01"
    bill = focus_bill(("x_SkuDetails", "ConsumedQuantity", "ConsumedUnit"), [("294.96", *DAY, vm, ND_H100, "3", "Hours")])
    arm = "/subscriptions/5f1b/resourceGroups/train/providers/Microsoft.Compute/virtualMachines/nd-01"
    assert allocate(tmp_path, bill, jobs_file(("r1", "10:00", "13:00", 8, arm))) == {"r1": D("294.96")}


def test_a_part_hour_at_launch_goes_to_the_run_that_held_it(tmp_path):
    # break53b s3: i-0late launched 10:40, its 10:00 line bills 0.333333333333 Hrs ($32.773333333333),
    # then a whole hour ($98.32); r1 holds its 8 GPUs 10:40-12:00: all $131.093333333333 (before:
    # $109.24, idle $21.85: the 10:00 line spread over the whole hour).
    bill = focus_bill(AWS, [
        aws_line("32.773333333333", "2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z", "i-0late", "0.333333333333"),
        aws_line("98.32", "2026-11-02T11:00:00Z", "2026-11-02T12:00:00Z", "i-0late", "1")])
    jobs = jobs_file(("r1", "10:40", "12:00", 8, "i-0late"))
    assert allocate(tmp_path, bill, jobs) == {"r1": D("131.093333333333")}


def test_a_scale_set_line_of_four_nodes_gives_a_one_node_job_a_quarter(tmp_path):
    # break53b s8: an AKS scale set's daily line, 96 Hours = 4 nodes x 24 h, $9,437.76; a pool job
    # holds 8 GPUs all day: 8 of 32 GPUs, r1 $2,359.44, idle $7,078.32 (before: r1 all of it).
    bill = focus_bill(("x_SkuDetails", "ConsumedQuantity", "ConsumedUnit", "Tags"),
                      [("9437.76", *DAY, VMSS, ND_H100, "96", "Hours", json.dumps({"cluster": "nd"}))])
    jobs = jobs_file(("r1", *DAY, 8, ""))
    assert allocate(tmp_path, bill, jobs, {"cluster_tag": "cluster"}) == {"r1": D("2359.44"), "idle": D("7078.32")}


def test_a_cur_daily_line_of_usage_hours_goes_to_the_run_that_held_it(tmp_path):
    # A legacy CUR's daily line: lineItem/UsageAmount 3, pricing/unit Hrs: as s4, r1 all $294.96.
    bill = cur_bill([("294.96", *DAY, "i-0day", "3", "Hrs")])
    jobs = jobs_file(("r1", "10:00", "13:00", 8, "i-0day"))
    assert allocate(tmp_path, bill, jobs, kind="aws-cur") == {"r1": D("294.96")}


@pytest.mark.parametrize("cost, quantity, gpus, end, expected", [
    # up 5 h, r1 holds 8 GPUs for 3 of them: 3/5 of $491.60 to r1, the 2 h left over idle
    ("491.60", "5", 8, "13:00", {"r1": D("294.96"), "idle": D("196.64")}),
    # up 3 h, r1 holds 4 of the 8 GPUs all the while: half to r1, half idle (as an hourly bill)
    ("295.20", "3", 4, "13:00", {"r1": D("147.60"), "idle": D("147.60")}),
    # r1 holds the node 4 h where the bill says 3: the 4 h are its up time, all of it r1's
    ("491.60", "3", 8, "14:00", {"r1": D("491.60")}),
])
def test_a_daily_lines_up_hours_are_its_jobs_time_first_then_idle(tmp_path, cost, quantity, gpus, end, expected):
    bill = focus_bill(AWS, [aws_line(cost, *DAY, "i-0day", quantity)])
    costs = allocate(tmp_path, bill, jobs_file(("r1", "10:00", end, gpus, "i-0day")))
    # to the cent: the idle hours' parts leave a remainder of 1e-12s to the line's first largest slot (r1's)
    assert {run: cost.quantize(D("0.01")) for run, cost in costs.items()} == expected
    assert sum(costs.values()) == D(cost)


@pytest.mark.parametrize("quantity, unit", [("", ""), ("3", "10 Hours"), ("3", "GB")])
def test_a_daily_line_without_a_quantity_in_hours_is_spread_over_its_day_as_before(tmp_path, quantity, unit):
    # No quantity, Azure's block of 10 hours (its quantity may count blocks) or a unit of other
    # things: one instance all day, r1's 3 hours of 24 are 1/8 (as before this rule).
    bill = focus_bill(AWS, [aws_line("294.96", *DAY, "i-0day", quantity, unit)])
    assert allocate(tmp_path, bill, jobs_file(("r1", "10:00", "13:00", 8, "i-0day"))) == {
        "r1": D("36.87"), "idle": D("258.09")}


@pytest.mark.parametrize("how", ["pool", "node"])
def test_a_daily_line_of_a_pool_or_node_instance_is_up_while_its_jobs_ran(tmp_path, how):
    # As s4, the job reaching the instance through its cluster's pool (no ids, no nodes) or its
    # node name (`node_tag`): its 3 hours are the node's up time, r1 all $294.96.
    tags = json.dumps({"cluster": "nd", "node": "gpu-001"})
    bill = focus_bill((*AWS, "Tags"), [(*aws_line("294.96", *DAY, "i-0day", "3"), tags)])
    jobs = jobs_file(("r1", "10:00", "13:00", 8, ""))
    if how == "node":
        jobs = jobs.replace("instance_ids,cluster", "nodes,cluster").replace(",8,,nd", ",8,gpu-001,nd")
    clusters = {"cluster_tag": "cluster", "node_tag": "node"}
    assert allocate(tmp_path, bill, jobs, clusters) == {"r1": D("294.96")}
