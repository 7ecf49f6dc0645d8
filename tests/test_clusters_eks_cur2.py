"""EKS split cost allocation data (SCAD) in a CUR 2.0 export shaped as Data Exports writes it:
Parquet (where a row lacks a value: null, or empty text and a zero cost) and CSV.gz (text, empty
cells), hourly, typed columns, `resource_tags` and `product` maps, every `split_line_item_*` column. The rows follow AWS's documentation (Data Exports user
guide):

- "Split line item columns" (table-dictionary-cur2-split-line-item.html): `split_line_item_
  parent_resource_id` the EC2 instance a pod ran on; `split_cost` its share of the instance's
  amortized cost, `unused_cost` its share of what nobody used, `public_on_demand_split_cost` and
  `_unused_cost` the same at on-demand prices, `net_split_cost` / `net_unused_cost` after discounts
  ("included only when your account has a discount in the billing period"); the columns apply to
  `Usage` line items and are absent when the feature is off;
- "Understanding split cost allocation data" (split-cost-allocation-data.html): new usage records
  per pod and hour (vCPU and memory: `EKSPod-EC2`, product AmazonEKS, resource the pod's ARN),
  costed from the instance's amortized cost; the instance's own line keeps the money;
- "Example of split cost allocation data for accelerated instances" (example-accelerated-
  instances.html): a GPU record too, GPU:(CPU:memory) weighted 9:1, so a 4-GPU pod on a
  p5.48xlarge takes half of the instance;
- "Understanding Savings Plans" / "Understanding your reservations": the p5 is covered by a
  Compute Savings Plan (SavingsPlanCoveredUsage at on-demand, SavingsPlanNegation, the plan's
  SavingsPlanRecurringFee), the g5 by a reservation (DiscountedUsage at 0, RIFee).

What must hold: the bill's totals do not move; the parents' dollars move to their pods in
proportion to AWS's split cost (amortized: a pod's effective cost is its split cost, its list cost
its public on-demand split cost), the unused part to the cluster's idle; `--check` passes,
`--explain` names each pod's part and the idle.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from service.attribution import attribute, reconcile
from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.core.timewindow import Window
from service.ingest.billing import ingest

D = Decimal
ACCOUNT = "111122223333"
SP = f"arn:aws:savingsplans::{ACCOUNT}:savingsplan/3f2d5c1e-sp"
RI = f"arn:aws:ec2:us-east-1:{ACCOUNT}:reserved-instances/7c1e0b2a-ri"
P5, G5 = "i-0p5a000000000001", "i-0g5b000000000002"
NODE_TAGS = {"user_team": "platform", "user_cluster": "llm-eks", "aws_eks_cluster_name": "llm-eks"}
ON_DEMAND = {P5: (D("98.32"), D("60.00")), G5: (D("5.672"), D("3.50"))}  # instance → (on-demand, amortized) an hour
NOVEMBER = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
# pod → namespace, parent, labels, {hour: [(resource, usage, split cost, unused cost)]}; each hour's
# split + unused over the instance's pods is the instance's amortized cost
PODS = {
    "llama-w0": ("train", P5, {"user_team": "nlp", "user_run": "llama-70b-r3", "aws_eks_workload_name": "llama-70b"},
                 {10: [("GPU", 4, "16.00", "3.00"), ("vCPU", 96, "11.52", "2.80"), ("GB", 1024, "2.48", "1.20")]}),
    "eval-0": ("eval", P5, {"user_team": "eval", "aws_eks_workload_name": "eval-harness"},
               {10: [("GPU", 2, "8.00", "1.50"), ("vCPU", 48, "5.76", "1.40"), ("GB", 512, "1.24", "0.60")]}),
    "aws-node-7x2k": ("kube-system", P5, {"aws_eks_workload_name": "aws-node"},
                      {10: [("vCPU", 0.5, "0.06", "2.90"), ("GB", 0.5, "0.0067", "1.5333")],
                       11: [("vCPU", 0.5, "0.06", "53.94"), ("GB", 0.5, "0.0067", "5.9933")]}),
    "vllm-0": ("serve", G5, {"user_team": "inference", "aws_eks_workload_name": "vllm"},
               {h: [("GPU", 4, "2.20", "0.30"), ("vCPU", 48, "0.60", "0.15"), ("GB", 192, "0.20", "0.05")]
                for h in (10, 11)}),
}
MONEY = ("line_item_unblended_cost", "pricing_public_on_demand_cost", "savings_plan_savings_plan_effective_cost",
         "savings_plan_total_commitment_to_date", "savings_plan_used_commitment", "reservation_effective_cost",
         "reservation_unused_amortized_upfront_fee_for_billing_period", "reservation_unused_recurring_fee",
         "line_item_usage_amount", "split_line_item_reserved_usage", "split_line_item_actual_usage",
         "split_line_item_split_usage", "split_line_item_split_usage_ratio", "split_line_item_split_cost",
         "split_line_item_unused_cost", "split_line_item_public_on_demand_split_cost",
         "split_line_item_public_on_demand_unused_cost", "split_line_item_net_split_cost",
         "split_line_item_net_unused_cost")


def hour(h: int) -> tuple[str, str]:
    return f"2026-11-02T{h:02d}:00:00Z", f"2026-11-02T{h + 1:02d}:00:00Z"


def add_to(out: list[dict], interval: tuple[str, str], kind: str, code: str, usage_type: str, resource: str,
           cost: str, on_demand: str, **more) -> None:
    """One export row, as Data Exports writes it, appended to `out`."""
    out.append({"identity_line_item_id": f"li-{len(out):03d}", "identity_time_interval": "/".join(interval),
                "bill_billing_period_start_date": "2026-11-01T00:00:00Z",
                "bill_billing_period_end_date": "2026-12-01T00:00:00Z", "bill_payer_account_id": ACCOUNT,
                "line_item_usage_account_id": ACCOUNT, "line_item_line_item_type": kind,
                "line_item_usage_start_date": interval[0], "line_item_usage_end_date": interval[1],
                "line_item_product_code": code, "line_item_usage_type": usage_type,
                "line_item_operation": more.pop("operation", "RunInstances"), "line_item_resource_id": resource,
                "line_item_usage_amount": more.pop("usage", "1"), "line_item_currency_code": "USD",
                "line_item_unblended_cost": cost, "pricing_public_on_demand_cost": on_demand,
                "product_instance_type": more.pop("instance_type", ""), "product_region_code": "us-east-1",
                "product": {"product_name": more.pop("product_name", "Amazon Elastic Compute Cloud")},
                "resource_tags": more.pop("tags", {}), **more})


def rows(split: bool = True) -> list[dict]:
    """The export's rows; `split` False: as without split cost allocation data (no pod rows)."""
    out: list[dict] = []

    def add(*args, **more) -> None:
        add_to(out, *args, **more)

    for h in (10, 11):
        add(hour(h), "SavingsPlanCoveredUsage", "AmazonEC2", "USE1-BoxUsage:p5.48xlarge", P5, "98.32", "98.32",
            instance_type="p5.48xlarge", tags=NODE_TAGS, savings_plan_savings_plan_a_r_n=SP,
            savings_plan_savings_plan_effective_cost="60.00")
        add(hour(h), "SavingsPlanNegation", "AmazonEC2", "USE1-BoxUsage:p5.48xlarge", P5, "-98.32", "0",
            instance_type="p5.48xlarge", tags=NODE_TAGS, savings_plan_savings_plan_a_r_n=SP)
        add(hour(h), "SavingsPlanRecurringFee", "ComputeSavingsPlans", "ComputeSP:1yrNoUpfront", SP, "60.00", "0",
            operation="", product_name="Savings Plans for AWS Compute usage", savings_plan_savings_plan_a_r_n=SP,
            savings_plan_total_commitment_to_date="60.00", savings_plan_used_commitment="60.00")
        add(hour(h), "DiscountedUsage", "AmazonEC2", "USE1-BoxUsage:g5.12xlarge", G5, "0", "5.672",
            instance_type="g5.12xlarge", tags=NODE_TAGS, reservation_effective_cost="3.50")
        add(hour(h), "RIFee", "AmazonEC2", "HeavyUsage:g5.12xlarge", RI, "3.50", "0", instance_type="g5.12xlarge",
            reservation_unused_amortized_upfront_fee_for_billing_period="0", reservation_unused_recurring_fee="0")
        add(hour(h), "Usage", "AmazonEC2", "USE1-DataTransfer-Regional-Bytes", P5, "0.125", "0.125", usage="12.5",
            operation="InterZone-Out", tags=NODE_TAGS)  # the instance's id, but no instance hour
    for pod, (namespace, parent, labels, hours) in (PODS if split else {}).items():
        on_demand, amortized = ON_DEMAND[parent]
        for h, parts in hours.items():
            for resource, usage, split, unused in parts:
                add(hour(h), "Usage", "AmazonEKS", f"USE1-EKS-EC2-{resource}-Hours",
                    f"arn:aws:eks:us-east-1:{ACCOUNT}:pod/llm-eks/{namespace}/{pod}/{pod}-uid", "0", "0",
                    operation="EKSPod-EC2", usage=str(usage), product_name="Amazon Elastic Kubernetes Service",
                    tags={"aws_eks_cluster_name": "llm-eks", "aws_eks_namespace": namespace, **labels},
                    split_line_item_parent_resource_id=parent, split_line_item_reserved_usage=str(usage),
                    split_line_item_actual_usage=str(usage), split_line_item_split_usage=str(usage),
                    split_line_item_split_usage_ratio="0.5", split_line_item_split_cost=split,
                    split_line_item_unused_cost=unused,
                    split_line_item_public_on_demand_split_cost=str(D(split) * on_demand / amortized),
                    split_line_item_public_on_demand_unused_cost=str(D(unused) * on_demand / amortized),
                    split_line_item_net_split_cost=str(D(split) * D("0.95")),  # a 5 % private discount
                    split_line_item_net_unused_cost=str(D(unused) * D("0.95")))
    add(("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"), "Usage", "AmazonEC2", "USE1-EBS:VolumeUsage.gp3",
        "vol-0abc", "80.00", "80.00", usage="1000", operation="CreateVolume-Gp3", tags={"user_team": "data"})
    add(("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"), "Tax", "AmazonEC2", "", "", "12.34", "0", operation="")
    return out


def write_export(root: Path, fmt: str, split: bool = True, lines: list[dict] | None = None) -> Path:
    """The export as Data Exports delivers it (OVERWRITE_REPORT): one data file and its manifest.
    `fmt` "parquet blank": what a row lacks as empty text and zero cost, not null; `lines`: other
    rows than `rows(split)`."""
    lines = rows(split) if lines is None else lines
    export = root / "llm-cur2"
    data = export / "data" / "BILLING_PERIOD=2026-11"
    data.mkdir(parents=True)
    con = duckdb.connect()
    con.execute("CREATE TABLE j (j JSON)")
    con.executemany("INSERT INTO j VALUES (?)", [[json.dumps(r)] for r in lines])
    columns = [c for c in dict.fromkeys(k for r in [*lines, *rows()] for k in r)
               if split or not c.startswith("split_")]
    selects, blank = [], fmt == "parquet blank"
    for column in columns:
        text = f"NULLIF(j->>'{column}', '')"
        if fmt == "csv.gz":  # CUR 2.0 CSV: every value as text, the maps as JSON
            value = f"CAST(j->'{column}' AS VARCHAR)" if column in ("product", "resource_tags") else text
            selects.append(f"coalesce({value}, '') AS {column}")
        elif column in MONEY:
            value = f"coalesce({text}, '0')" if blank else text
            selects.append(f"CAST({value} AS DOUBLE) AS {column}")
        elif column.endswith("_date"):
            selects.append(f"CAST(CAST({text} AS TIMESTAMPTZ) AS TIMESTAMP) AS {column}")
        elif column in ("product", "resource_tags"):
            selects.append(f"CAST(j->'{column}' AS MAP(VARCHAR, VARCHAR)) AS {column}")
        else:
            selects.append(f"coalesce({text}, '') AS {column}" if blank else f"{text} AS {column}")
    name = f"llm-cur2-00001.{fmt if fmt == 'csv.gz' else 'snappy.parquet'}"
    options = "FORMAT csv, HEADER, COMPRESSION gzip" if fmt == "csv.gz" else "FORMAT parquet"
    con.execute(f"COPY (SELECT {', '.join(selects)} FROM j) TO '{data / name}' ({options})")
    con.close()
    metadata = export / "metadata" / "BILLING_PERIOD=2026-11"
    metadata.mkdir(parents=True)
    (metadata / "llm-cur2-Manifest.json").write_text(json.dumps({
        "executionId": "5d3e0c1a-exec",
        "billingPeriod": {"start": "2026-11-01T00:00:00.000Z", "end": "2026-12-01T00:00:00.000Z"},
        "dataFiles": [f"s3://billing/cur2/llm-cur2/data/BILLING_PERIOD=2026-11/{name}"]}))
    return export


def config_file(root: Path, export: Path, clusters: bool = True) -> Path:
    data = {"lake": str(root / "lake"), "sources": [{"name": "cur2", "kind": "aws-cur2", "location": str(export)}],
            "attribution": {"dimensions": {"team": {"tags": ["team"]}, "run": {"tags": ["run"]}}}}
    if clusters:
        data["attribution"]["clusters"] = {"cluster_tag": "cluster"}
    (root / "spendlake.yaml").write_text(yaml.safe_dump(data))
    return root / "spendlake.yaml"


@pytest.fixture(scope="module", params=["parquet", "csv.gz", "parquet blank"])
def exported(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param.replace(".", "-").replace(" ", "-"))
    path = config_file(root, write_export(root, request.param))
    ingest(parse_config(yaml.safe_load(path.read_text())))
    return root, path


def by(path: Path, dims: tuple[str, ...], cost: str, clusters: bool = True) -> dict:
    config = parse_config(yaml.safe_load(path.read_text()))
    if not clusters:
        config = config.model_copy(update={"attribution": config.attribution.model_copy(update={"clusters": None})})
    result = attribute(Lake(config.lake), config, NOVEMBER, by=dims, cost=cost)
    out: dict = {}
    for row in result.rows:
        key = tuple(row.values[d] for d in dims)
        out[key] = out.get(key, D(0)) + row.cost
    return {k: v for k, v in out.items() if v}


@pytest.mark.parametrize("cost, total", [("billed", D("219.59")), ("effective", D("219.59")), ("list", D("288.234"))])
def test_the_bills_totals_do_not_move_and_check_passes(exported, cost, total):
    root, path = exported
    for clusters in (True, False):
        assert sum(by(path, ("team",), cost, clusters).values()) == total, clusters
    config = parse_config(yaml.safe_load(path.read_text()))
    assert all(r.ok for r in reconcile(Lake(config.lake), config))
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--check", "--format", "json"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("fmt", ["parquet", "csv.gz"])
def test_a_pod_rows_own_public_on_demand_cost_is_not_counted_beside_its_instances(tmp_path, fmt):
    """A pod's split row restates part of its instance's usage, whose line holds the cost; AWS's
    columns give the pod's share at public prices as split_line_item_public_on_demand_split_cost.
    Should a pod row carry a pricing_public_on_demand_cost too (AWS documents none for these rows),
    counting it would add the instance's list cost twice: the lake gives pod rows ListCost 0, and
    the list total stays the bill's 288.234 (a Fargate row, on no instance, keeps its own)."""
    lines = rows()
    for line in lines:
        if line.get("split_line_item_parent_resource_id"):
            line["pricing_public_on_demand_cost"] = line["split_line_item_public_on_demand_split_cost"]
    add_to(lines, hour(10), "Usage", "AmazonEKS", "USE1-Fargate-vCPU-Hours:perCPU",
           f"arn:aws:eks:us-east-1:{ACCOUNT}:pod/llm-eks/web/web-0/web-0-uid", "0.04", "0.04",
           operation="FargatePod", product_name="Amazon Elastic Kubernetes Service")
    path = config_file(tmp_path, write_export(tmp_path, fmt, lines=lines))
    ingest(parse_config(yaml.safe_load(path.read_text())))
    assert sum(by(path, ("team",), "list").values()) == D("288.274")
    lake = Lake(parse_config(yaml.safe_load(path.read_text())).lake)
    assert lake.query().execute("SELECT DISTINCT ListCost FROM costs WHERE x_split_parent_resource_id IS NOT NULL"
                                ).fetchall() == [(D(0),)]


def test_the_focus_export_counts_an_instances_contracted_and_list_cost_once_not_again_on_its_pods(tmp_path):
    """A pod row carrying a rate (the instance's unblended or public rate per vCPU or GB hour: AWS
    documents none for these rows) gave the FOCUS export's pod rows ContractedCost = rate × their
    hours beside the instance's own line (2,176 pod hours at 0.05: 108.80 more), and unit prices
    whose product with the quantity was not their ListCost 0. A pod row restates its instance's
    usage: it contracts and lists at 0, at unit prices 0, with or without attribution, so the sums
    are the bill's, by hand: contracted 196.64 (the p5 hours) + 11.344 (the g5 hours a reservation
    covered, at On-Demand) + 120 (the plan's fee) + 7 (the RI's fee) + 80.25 (volume, transfer) + 41.76
    (the tax, 12.34 × 295.234 / 87.25) = 456.994; list 196.64 + 11.344 + 80.25 + 40.77 (12.34 × 288.234
    / 87.25) = 329.004."""
    from service.export import ExportOptions, export_focus

    lines = rows()
    for line in lines:
        if line.get("split_line_item_parent_resource_id"):
            line.update(line_item_unblended_rate="0.05", pricing_public_on_demand_rate="0.06")
    path = config_file(tmp_path, write_export(tmp_path, "parquet", lines=lines))
    config = parse_config(yaml.safe_load(path.read_text()))
    ingest(config)
    for attribution in (False, True):
        out = tmp_path / f"focus-{attribution}"
        export_focus(config, ExportOptions(str(out), attribution=attribution))
        data = f"read_parquet('{out}/2026-11/cost_and_usage.parquet')"
        assert duckdb.sql(f"SELECT sum(BilledCost), sum(ContractedCost), sum(ListCost) FROM {data}").fetchall() == [
            (D("219.59"), D("456.994"), D("329.004"))], attribution
        pods = duckdb.sql(f"SELECT DISTINCT ContractedCost, ListCost, ContractedUnitPrice, ListUnitPrice FROM {data} "
                          "WHERE x_split_parent_resource_id IS NOT NULL").fetchall()
        assert pods == [(D(0), D(0), D(0), D(0))], attribution


def test_the_parents_dollars_move_to_the_pods_by_their_split_cost_and_the_unused_to_idle(exported):
    """Effective cost: each pod's part is AWS's split cost (its amortized share), the cluster's
    idle the unused cost; list cost: the public on-demand split and unused costs; billed: the
    Savings Plan's covered usage and its negation cancel on each pod, the plan's fee stays."""
    _, path = exported
    assert by(path, ("team", "run", "cluster"), "effective") == {
        ("nlp", "llama-70b-r3", "llm-eks"): D("30.00"), ("eval", "eval-harness", "llm-eks"): D("15.00"),
        ("inference", "vllm", "llm-eks"): D("6.00"), ("unallocated", "aws-node", "llm-eks"): D("0.1334"),
        ("platform", "idle", "llm-eks"): D("75.8666"),  # 14.9333 + 59.9333 on the p5, 2 × 0.50 on the g5
        ("platform", "unallocated", "llm-eks"): D("0.25"),  # the instance's data transfer is no instance hour
        ("data", "unallocated", "unallocated"): D("80"), ("unallocated", "unallocated", "unallocated"): D("12.34")}
    listed = by(path, ("run",), "list")
    pods = {pod[2]["aws_eks_workload_name"]: pod for pod in PODS.values()}
    for run, (_, parent, _, hours) in pods.items():
        on_demand, amortized = ON_DEMAND[parent]
        split = sum(D(part[2]) for parts in hours.values() for part in parts)
        assert abs(listed[("llama-70b-r3" if run == "llama-70b" else run,)] - split * on_demand / amortized) < D("1e-9")
    billed = by(path, ("team", "run"), "billed")
    assert billed == {("unallocated", "unallocated"): D("139.34"), ("data", "unallocated"): D("80"),
                      ("platform", "unallocated"): D("0.25")}  # SP fee 120 + RI fee 7 + tax 12.34


def test_explain_names_each_pods_part_and_the_idle(exported):
    _, path = exported
    window = ["--since", "2026-11-01", "--until", "2026-12-01"]
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", *window, "--by", "run", "--cost", "effective",
                                      "--explain", "--format", "json"])
    assert result.exit_code == 0, result.output
    how = {(row["run"], part["how"]): D(part["cost"]) for row in json.loads(result.output)["rows"]
           for part in row["explain"] if D(part["cost"])}
    assert how == {("llama-70b-r3", "job:train/llama-w0"): D("30"), ("eval-harness", "job:eval/eval-0"): D("15"),
                   ("vllm", "job:serve/vllm-0"): D("6"), ("aws-node", "job:kube-system/aws-node-7x2k"): D("0.1334"),
                   ("idle", "idle:llm-eks"): D("75.8666"), ("unallocated", "default"): D("92.59")}


def test_with_the_feature_off_the_instances_are_the_clusters_idle(tmp_path):
    """An export without split cost allocation data has no split_line_item_* columns and no pod
    rows: the cluster's instances, with no job records, are its idle; the bill's totals stay."""
    export = write_export(tmp_path, "parquet", split=False)
    path = config_file(tmp_path, export)
    ingest(parse_config(yaml.safe_load(path.read_text())))
    assert by(path, ("team", "run"), "effective") == {
        ("platform", "idle"): D("127"), ("platform", "unallocated"): D("0.25"), ("data", "unallocated"): D("80"),
        ("unallocated", "unallocated"): D("12.34")}
    con = Lake(tmp_path / "lake").query()
    try:
        assert con.execute("SELECT count(*), count(x_split_cost) FROM costs").fetchone() == (len(rows(split=False)), 0)
    finally:
        con.close()


# AWS's own worked example ("Example of split cost allocation data for accelerated instances",
# example-accelerated-instances.html, Table 4): four pods in two namespaces on a p3.16xlarge
# whose amortized cost is $10 an hour; each pod's split cost and its share of the unused cost.
P3 = "i-0p3c000000000003"
P3_ON_DEMAND = D("24.48")
DOCS_PODS = {"pod-1": ("namespace-1", "1.85", "0.06"), "pod-2": ("namespace-2", "3.18", "0.09"),
             "pod-3": ("namespace-1", "2.35", "0.06"), "pod-4": ("namespace-2", "2.35", "0.06")}


def docs_example_rows() -> list[dict]:
    """The example's hour twice: at 10 a Compute Savings Plan covers the instance, at 11 a
    reservation; both at the example's $10 amortized. The pods' rows carry AWS's split and unused
    costs, their on-demand equivalents and net costs after a 3 % discount (which must not count)."""
    out: list[dict] = []
    p3 = {"instance_type": "p3.16xlarge", "tags": NODE_TAGS}
    add_to(out, hour(10), "SavingsPlanCoveredUsage", "AmazonEC2", "USE1-BoxUsage:p3.16xlarge", P3, "24.48", "24.48",
           savings_plan_savings_plan_a_r_n=SP, savings_plan_savings_plan_effective_cost="10.00", **p3)
    add_to(out, hour(10), "SavingsPlanNegation", "AmazonEC2", "USE1-BoxUsage:p3.16xlarge", P3, "-24.48", "0",
           savings_plan_savings_plan_a_r_n=SP, **p3)
    add_to(out, hour(10), "SavingsPlanRecurringFee", "ComputeSavingsPlans", "ComputeSP:1yrNoUpfront", SP, "10.00",
           "0", operation="", product_name="Savings Plans for AWS Compute usage", savings_plan_savings_plan_a_r_n=SP,
           savings_plan_total_commitment_to_date="10.00", savings_plan_used_commitment="10.00")
    add_to(out, hour(11), "DiscountedUsage", "AmazonEC2", "USE1-BoxUsage:p3.16xlarge", P3, "0", "24.48",
           reservation_effective_cost="10.00", **p3)
    add_to(out, hour(11), "RIFee", "AmazonEC2", "HeavyUsage:p3.16xlarge", RI, "10.00", "0",
           instance_type="p3.16xlarge", reservation_unused_amortized_upfront_fee_for_billing_period="0",
           reservation_unused_recurring_fee="0")
    for pod, (namespace, split, unused) in DOCS_PODS.items():
        for h in (10, 11):
            add_to(out, hour(h), "Usage", "AmazonEKS", "USE1-EKS-EC2-vCPU-Hours",
                   f"arn:aws:eks:us-east-1:{ACCOUNT}:pod/llm-eks/{namespace}/{pod}/{pod}-uid", "0", "0",
                   operation="EKSPod-EC2", product_name="Amazon Elastic Kubernetes Service",
                   tags={"aws_eks_cluster_name": "llm-eks", "aws_eks_namespace": namespace, "user_team": namespace},
                   split_line_item_parent_resource_id=P3, split_line_item_split_cost=split,
                   split_line_item_unused_cost=unused,
                   split_line_item_public_on_demand_split_cost=str(D(split) * P3_ON_DEMAND / 10),
                   split_line_item_public_on_demand_unused_cost=str(D(unused) * P3_ON_DEMAND / 10),
                   split_line_item_net_split_cost=str(D(split) * D("0.97")),
                   split_line_item_net_unused_cost=str(D(unused) * D("0.97")))
    return out


@pytest.mark.parametrize("fmt", ["parquet", "csv.gz"])
def test_the_docs_example_ties_out_for_each_cost_under_a_savings_plan_and_a_reservation(tmp_path, fmt):
    """Effective: a namespace's cost is its pods' split costs (Σ 1.85 + 2.35 = 4.20 an hour for
    namespace 1), the unused 0.27 an hour the cluster's idle, never a parent's amortized $10 plus
    the pods' split or net split costs again; list: the same shares of the instance's on-demand
    $24.48; billed: the covered hours are $0 (negated, discounted), the plan's and the
    reservation's fees stay where they are. `attribute --check` passes for every measure."""
    path = config_file(tmp_path, write_export(tmp_path, fmt, lines=docs_example_rows()))
    ingest(parse_config(yaml.safe_load(path.read_text())))
    ratio = P3_ON_DEMAND / 10
    assert by(path, ("team", "run"), "effective") == {
        ("namespace-1", "namespace-1/pod-1"): D("3.70"), ("namespace-1", "namespace-1/pod-3"): D("4.70"),
        ("namespace-2", "namespace-2/pod-2"): D("6.36"), ("namespace-2", "namespace-2/pod-4"): D("4.70"),
        ("platform", "idle"): D("0.54")}
    assert by(path, ("team",), "list") == {("namespace-1",): D("8.40") * ratio, ("namespace-2",): D("11.06") * ratio,
                                           ("platform",): D("0.54") * ratio}
    assert by(path, ("team",), "billed") == {("unallocated",): D("20.00")}
    for cost in ("billed", "effective", "list"):
        result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--check", "--cost", cost,
                                          "--format", "json"])
        assert result.exit_code == 0, (cost, result.output)
