"""Findings through the service and the CLI: stored in the lake, listed, acknowledged,
dry runs store nothing, --fail-on sets exit 1, a crashing rule exit 3."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import yaml
from click.testing import CliRunner

from rules.idle_gpu import IdleGpu
from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.findings.owners import bill_ids, owner_lookup
from service.findings.run import run_rules
from service.findings.store import JSON_KEYS, load_findings
from tests.rules_lake import build_lake
from tests.attribution_helpers import declared_sources

NOW = datetime(2026, 11, 8, tzinfo=timezone.utc)


def hourly(resource, instance_type, cost, hours, tags=None):
    return [{"ResourceId": resource, "x_instance_type": instance_type, "BilledCost": cost, "Tags": tags,
             "ChargePeriodStart": f"2026-11-07 {h:02d}:00:00", "ChargePeriodEnd": f"2026-11-07 {h + 1:02d}:00:00"}
            for h in hours]


@pytest.fixture
def setup(tmp_path, monkeypatch):
    lake = Lake(tmp_path / "lake")
    build_lake(lake, {
        "costs": hourly("i-idle", "p5.48xlarge", "98.32", range(4), {"Team": "Vision", "project": "llm-7b"}) + hourly("i-dark", "g5.xlarge", "1.006", range(2)),
        "gpu_utilization": [{"resource_id": "i-idle", "hour": f"2026-11-07 {h:02d}:00:00", "util_pct": 0.5,
                             "metric": "DCGM_FI_PROF_SM_ACTIVE"} for h in range(4)],
    }, NOW.date())
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake), "rules": {"idle-gpu": {"min_idle_hours": 2}}}))
    monkeypatch.setattr("service.findings.run.utc_now", lambda: NOW)
    return lake, config_file


def spendlake(config_file, *args):
    return CliRunner().invoke(cli, ["--config", str(config_file), *args])


@pytest.mark.slow
def test_run_stores_findings_and_rerun_keeps_them(setup):
    lake, config_file = setup
    config = parse_config(yaml.safe_load(config_file.read_text()), str(config_file))
    report = run_rules(config, now=NOW)
    assert {f.evidence.get("idle_hours") for f in report.result.seen} == {4, None}
    stored = load_findings(lake)
    assert sorted((f.rule, f.resource_id, f.status, f.team) for f in stored) == [
        ("idle-gpu", "i-dark", "open", "unallocated"), ("idle-gpu", "i-idle", "open", "Vision")]
    assert {f.resource_id: f.project for f in stored} == {"i-dark": "unallocated", "i-idle": "llm-7b"}
    again = run_rules(config, now=NOW.replace(hour=6))
    assert {f.id for f in again.result.findings} == {f.id for f in stored}
    # seen as of the data's end (the rules' window ends there), whatever the clock said
    assert all(f.first_seen == datetime(2026, 11, 7, 4, tzinfo=timezone.utc) for f in load_findings(lake))
    columns = [c for (c,) in lake.query().execute("SELECT column_name FROM (DESCRIBE findings)").fetchall()]
    assert columns[:len(JSON_KEYS)] == JSON_KEYS


@pytest.mark.slow
def test_cli_dry_run_fail_on_list_and_ack(setup):
    lake, config_file = setup
    dry = spendlake(config_file, "rules", "run", "--dry-run", "--format", "json", "--fail-on", "critical")
    assert dry.exit_code == 1, dry.output  # 4 idle hours × 98.32 × 730 / 168 = $1,708.90 a month: critical
    assert not lake.has_table("findings")

    ran = spendlake(config_file, "rules", "run", "--format", "json", "--fail-on", "critical")
    assert ran.exit_code == 1
    assert spendlake(config_file, "rules", "run", "--format", "json").exit_code == 0

    listed = spendlake(config_file, "findings", "--format", "json")
    rows = json.loads(listed.output)
    assert [r["monthly_waste_usd"] for r in rows] == ["1708.90", "0.00"] and set(JSON_KEYS) <= set(rows[0])
    idle_id = rows[0]["id"]

    assert idle_id != idle_id.upper()  # typed in capitals, it is the same finding
    acked = spendlake(config_file, "findings", "ack", idle_id.upper(), "--reason", "planned")
    assert acked.exit_code == 0 and idle_id in acked.output
    assert spendlake(config_file, "rules", "run", "--format", "json", "--fail-on", "warning").exit_code == 0
    acknowledged = json.loads(spendlake(config_file, "findings", "--status", "acknowledged", "--format", "json").output)
    assert [(r["id"], r["ack_reason"]) for r in acknowledged] == [(idle_id, "planned")]
    csv_out = spendlake(config_file, "findings", "--status", "all", "--format", "csv", "--rule", "idle-gpu").output
    assert csv_out.splitlines()[0].startswith("id,rule,category,severity") and len(csv_out.splitlines()) == 3

    missing = spendlake(config_file, "findings", "ack", "nope", "--reason", "x")
    assert missing.exit_code == 2 and "no finding with id 'nope'" in missing.output


def test_a_crashing_rule_exits_3_and_is_recorded(setup, monkeypatch):
    lake, config_file = setup
    monkeypatch.setattr(IdleGpu, "evaluate", lambda self, ctx: 1 / 0)
    result = spendlake(config_file, "rules", "run", "--format", "json")
    assert result.exit_code == 3
    assert "idle-gpu: error — ZeroDivisionError" in result.output
    assert lake.read_state("rules")["rules"]["idle-gpu"]["status"] == "error"


def test_config_validate_checks_rule_sections(tmp_path):
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text("rules:\n  idle-gpu:\n    min_idle_hours: 0\n")
    result = spendlake(config_file, "config", "validate")
    assert result.exit_code == 2 and "rules.idle-gpu.min_idle_hours: must be at least 1, not 0" \
        in result.output
    assert spendlake(config_file, "rules", "run", "--rule", "idle-gpu").exit_code == 2


def test_bill_ids_map_prefixes_and_arns_to_what_the_bill_names():
    assert bill_ids("s3://corpus/shared/c4/") == ["s3://corpus/shared/c4/", "corpus", "arn:aws:s3:::corpus"]
    assert bill_ids("arn:aws:ec2:us-east-1:1:instance/i-0a") == ["arn:aws:ec2:us-east-1:1:instance/i-0a", "i-0a"]
    assert bill_ids("i-0a") == ["i-0a"]


def test_log_groups_and_buckets_get_owners_from_their_cost_lines(tmp_path):
    lake = Lake(tmp_path / "lake")
    line = {"ChargePeriodStart": "2026-11-07 00:00:00", "ChargePeriodEnd": "2026-11-07 01:00:00", "BilledCost": "1"}
    build_lake(lake, {"costs": [
        {**line, "ResourceId": "arn:aws:logs:us-east-1:123456789012:log-group:/train/llm", "Tags": {"team": "nlp"}},
        {**line, "ResourceId": "corpus", "Tags": {"team": "data", "experiment": "c4"}},
    ]}, NOW.date())
    owner_of = owner_lookup(lake, parse_config({"lake": str(lake.root), "sources": declared_sources(lake)}))
    owners = owner_of(["/train/llm", "s3://corpus/shared/", "s3://elsewhere/x/"])
    assert owners["/train/llm"].team == "nlp"
    assert (owners["s3://corpus/shared/"].team, owners["s3://corpus/shared/"].experiment) == ("data", "c4")
    assert "s3://elsewhere/x/" not in owners


def test_owners_are_attributed_only_for_ids_some_cost_line_carries(tmp_path, monkeypatch):
    """fill_owners attributed the lake for every finding's resource id, `series:...` and
    `unallocated:team` too, which no line carries (0.7 CPU s a rule at 10M lines, for nothing):
    attribution is asked only about ids in the bill, and the owners are the same."""
    import service.findings.owners as owners_module

    lake = Lake(tmp_path / "lake")
    line = {"ChargePeriodStart": "2026-11-07 00:00:00", "ChargePeriodEnd": "2026-11-07 01:00:00", "BilledCost": "1"}
    build_lake(lake, {"costs": [
        {**line, "ResourceId": "arn:aws:logs:us-east-1:123456789012:log-group:/train/llm", "Tags": {"team": "nlp"}},
        {**line, "ResourceId": "i-0a", "Tags": {"team": "vision"}},
    ]}, NOW.date())
    asked = []
    attribute = owners_module.attribute_resources
    monkeypatch.setattr(owners_module, "attribute_resources", lambda lake, config, ids, snapshot: asked.append(ids) or
                        attribute(lake, config, ids))
    owner_of = owner_lookup(lake, parse_config({"lake": str(lake.root), "sources": declared_sources(lake)}))
    assert owner_of(["series:team=nlp|service=Amazon EC2", "unallocated:team", "budget:q4"]) == {} and asked == []
    owners = owner_of(["unallocated:team", "/train/llm", "arn:aws:ec2:us-east-1:1:instance/i-0a"])
    assert {rid: owner.team for rid, owner in owners.items()} == {
        "/train/llm": "nlp", "arn:aws:ec2:us-east-1:1:instance/i-0a": "vision"}
    assert asked == [["arn:aws:logs:us-east-1:123456789012:log-group:/train/llm", "i-0a"]]


def test_owners_read_the_cost_lines_alone_a_damaged_metrics_snapshot_stops_none(tmp_path):
    """_in_bill opened a view on every inventory table (each snapshot checked against its record)
    to read the cost lines' resource ids: a finding's owner waited on, and failed with, a GPU
    metrics file it never reads (65 against 106 ms a lookup on the demo's lake)."""
    lake = Lake(tmp_path / "lake")
    line = {"ChargePeriodStart": "2026-11-07 00:00:00", "ChargePeriodEnd": "2026-11-07 01:00:00", "BilledCost": "1"}
    build_lake(lake, {"costs": [{**line, "ResourceId": "i-0a", "Tags": {"team": "vision"}}],
                      "gpu_utilization": [{"resource_id": "i-0a", "gpu": 0, "hour": "2026-11-07 00:00:00",
                                           "util_pct": 3.0}]}, NOW.date())
    snapshot = lake.partition_file("gpu_utilization", [("source", "test"), ("day", "2026-11-07")])
    snapshot.write_bytes(snapshot.read_bytes()[:-20])  # cut short: every read of the table names it
    owner_of = owner_lookup(lake, parse_config({"lake": str(lake.root), "sources": declared_sources(lake)}))
    assert {rid: owner.team for rid, owner in owner_of(["i-0a", "i-gone"]).items()} == {"i-0a": "vision"}


def test_a_shared_cluster_node_without_a_team_belongs_to_the_clusters_owner(tmp_path):
    """An idle-gpu finding on a Slurm node (tagged with its cluster, no team: jobs of many teams run
    there) went to `unallocated` while the cluster's idle alert went to `clusters.owners`' team;
    a node with its own team tag keeps it, and a cluster without an owner stays unallocated."""
    lake = Lake(tmp_path / "lake")
    line = {"ChargePeriodStart": "2026-11-07 00:00:00", "ChargePeriodEnd": "2026-11-07 01:00:00", "BilledCost": "1"}
    build_lake(lake, {"costs": [
        {**line, "ResourceId": "i-node1", "Tags": {"cluster": "GPU-West"}},
        {**line, "ResourceId": "i-node2", "Tags": {"cluster": "gpu-west", "team": "vision"}},
        {**line, "ResourceId": "i-node3", "Tags": {"cluster": "gpu-east"}},
    ]}, NOW.date())
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": {
        "clusters": {"cluster_tag": "cluster", "owners": {"gpu-west": "nlp"}}}})
    owners = owner_lookup(lake, config)(["i-node1", "i-node2", "i-node3"])
    assert {rid: owner.team for rid, owner in owners.items()} == {
        "i-node1": "nlp", "i-node2": "vision", "i-node3": "unallocated"}
    assert owners["i-node1"].project == "unallocated"
    # a team dimension with its own default (no-team) is no team either: the node is still the cluster's
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": {
        "dimensions": {"team": {"tags": ["team"], "default": "No-Team"}},
        "clusters": {"cluster_tag": "cluster", "owners": {"gpu-west": "nlp"}}}})
    owners = owner_lookup(lake, config)(["i-node1", "i-node2", "i-node3"])
    assert {rid: owner.team for rid, owner in owners.items()} == {
        "i-node1": "nlp", "i-node2": "vision", "i-node3": "No-Team"}


@pytest.mark.slow
def test_the_service_runs_rules_as_a_job_and_refuses_a_bad_rules_section(setup, monkeypatch, tmp_path):
    from service.core.errors import ConfigError, SpendlakeError
    from service.serve.service import default_tasks

    lake, config_file = setup
    config = parse_config(yaml.safe_load(config_file.read_text()), str(config_file))
    default_tasks(config).rules()
    assert {f.resource_id for f in load_findings(lake)} == {"i-idle", "i-dark"}
    monkeypatch.setattr(IdleGpu, "evaluate", lambda self, ctx: 1 / 0)
    with pytest.raises(SpendlakeError, match="rule idle-gpu: ZeroDivisionError"):
        default_tasks(config).rules()
    with pytest.raises(ConfigError, match="rules.idle-gpu.keep_last: unknown key"):
        default_tasks(parse_config({"lake": str(tmp_path / "x"), "rules": {"idle-gpu": {"keep_last": 3}}}))
