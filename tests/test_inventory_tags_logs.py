"""aws-tags and cloudwatch-logs connectors: moto pagination, throttling, local files, the CLI."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner
from moto import mock_aws

import connectors.aws_client as aws_client
import service.core.snapshot_ledger as snapshot_ledger
from inventory_support import no_retry_wait, throttle_first  # noqa: F401 (fixture)
from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.core.lake import Lake
from service.ingest.inventory import run_inventory

DATA = Path(__file__).parent / "data" / "inventory"
NOW = datetime(2026, 11, 28, 9, 30, tzinfo=timezone.utc)


def config_for(tmp_path: Path, *inventory: dict):
    return parse_config({"lake": str(tmp_path / "lake"), "inventory": list(inventory)})


def query(tmp_path: Path, sql: str, params=()):
    con = Lake(tmp_path / "lake").query()
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def make_tagged_resources(region: str = "us-east-1") -> None:
    """100 EC2 instances and 20 buckets; casing of the team key varies on purpose."""
    ec2 = boto3.client("ec2", region_name=region)
    for batch in range(4):
        key = "Team" if batch % 2 == 0 else "team"
        ec2.run_instances(ImageId="ami-12c6146b", MinCount=25, MaxCount=25, InstanceType="p4d.24xlarge",
                          TagSpecifications=[{"ResourceType": "instance",
                                              "Tags": [{"Key": key, "Value": f"team-{batch}"},
                                                       {"Key": "project", "Value": "llm"}]}])
    s3 = boto3.client("s3", region_name=region)
    for n in range(20):
        s3.create_bucket(Bucket=f"data-{n:03d}")
        s3.put_bucket_tagging(Bucket=f"data-{n:03d}", Tagging={"TagSet": [{"Key": "team", "Value": "data"}]})


@pytest.mark.slow  # 120 resources through moto
@mock_aws
def test_tags_paginate_all_120_resources_and_keep_casing(tmp_path):
    make_tagged_resources()
    config = config_for(tmp_path, {"name": "tags", "kind": "aws-tags", "regions": ["us-east-1"]})
    [outcome] = run_inventory(config, now=NOW)
    assert outcome.error is None, outcome.error
    assert query(tmp_path, "SELECT count(DISTINCT resource_id) FROM resource_tags") == [(120,)]
    by_key = dict(query(tmp_path, "SELECT key, count(*) FROM resource_tags GROUP BY key"))
    assert by_key == {"Team": 50, "team": 70, "project": 100}
    assert query(tmp_path, "SELECT DISTINCT source, snapshot_date FROM resource_tags") == [("tags", "2026-11-28")]
    ec2_arn = query(tmp_path, "SELECT resource_id, region FROM resource_tags WHERE key = 'Team' LIMIT 1")[0]
    assert ec2_arn[0].startswith("arn:aws:ec2:us-east-1:") and ":instance/i-" in ec2_arn[0]
    assert ec2_arn[1] == "us-east-1"


@pytest.mark.slow  # two snapshots through moto
@mock_aws
def test_tags_rerun_same_day_replaces_snapshot(tmp_path):
    make_tagged_resources()
    config = config_for(tmp_path, {"name": "tags", "kind": "aws-tags"})
    run_inventory(config, now=NOW)
    run_inventory(config, now=NOW)
    assert query(tmp_path, "SELECT count(*) FROM resource_tags") == [(220,)]
    run_inventory(config, now=NOW.replace(day=29))
    assert query(tmp_path, "SELECT snapshot_date, count(*) FROM resource_tags GROUP BY 1 ORDER BY 1") == [
        ("2026-11-28", 220), ("2026-11-29", 220)]


@pytest.mark.slow  # retries through moto
@mock_aws
def test_throttled_past_max_attempts_fails_and_names_the_action(tmp_path, monkeypatch, no_retry_wait):
    make_tagged_resources()
    throttle_first(aws_client, monkeypatch, "GetResources", times=100)
    config = config_for(tmp_path, {"name": "tags", "kind": "aws-tags", "max_attempts": 3})
    [outcome] = run_inventory(config, now=NOW)
    assert "tag:GetResources" in str(outcome.error) and "max_attempts" in str(outcome.error)
    assert not Lake(tmp_path / "lake").has_table("resource_tags")
    state = Lake(tmp_path / "lake").read_state("sources")["tags"]
    assert state["failures_total"] == 1 and "last_success" not in state


def make_log_groups(region: str = "us-east-1") -> None:
    logs = boto3.client("logs", region_name=region)
    for n in range(120):
        name = f"/aws/training/run-{n:03d}"
        logs.create_log_group(logGroupName=name)
        if n % 3 == 0:
            logs.put_retention_policy(logGroupName=name, retentionInDays=30)
    logs.create_log_stream(logGroupName="/aws/training/run-001", logStreamName="s")
    logs.put_log_events(logGroupName="/aws/training/run-001", logStreamName="s",
                        logEvents=[{"timestamp": int(NOW.timestamp() * 1000), "message": "x" * 1000}])


@pytest.mark.slow
@mock_aws
def test_log_groups_paginate_all_120_with_retention_and_size(tmp_path):
    make_log_groups()
    [outcome] = run_inventory(config_for(tmp_path, {"name": "logs", "kind": "cloudwatch-logs"}), now=NOW)
    assert outcome.error is None, outcome.error
    assert query(tmp_path, "SELECT count(*), count(retention_days), count(*) - count(retention_days) "
                           "FROM log_groups") == [(120, 40, 80)]
    [(size, created, region)] = query(tmp_path, "SELECT stored_bytes, created_at, region FROM log_groups "
                                               "WHERE name = '/aws/training/run-001'")
    assert size > 0 and region == "us-east-1"
    assert abs((created - datetime.now(timezone.utc).replace(tzinfo=None)).total_seconds()) < 600


@pytest.mark.slow  # retries through moto
@pytest.mark.parametrize(("kind", "make", "operation", "count"), [
    ("aws-tags", make_tagged_resources, "GetResources", "SELECT count(DISTINCT resource_id) FROM resource_tags"),
    ("cloudwatch-logs", make_log_groups, "DescribeLogGroups", "SELECT count(*) FROM log_groups"),
])
@mock_aws
def test_throttling_is_retried_then_succeeds(tmp_path, monkeypatch, no_retry_wait, kind, make, operation, count):
    make()
    calls = throttle_first(aws_client, monkeypatch, operation, times=2)
    [outcome] = run_inventory(config_for(tmp_path, {"name": "listing", "kind": kind}), now=NOW)
    assert outcome.error is None, outcome.error
    assert len(calls) == 2 + 3  # two throttled, then three pages of at most 50 (moto's page size)
    assert query(tmp_path, count) == [(120,)]


def test_local_tag_files_keep_casing_and_empty_tag_lists(tmp_path):
    config = config_for(tmp_path, {"name": "tags", "kind": "aws-tags", "path": str(DATA / "tags")})
    [outcome] = run_inventory(config, now=NOW)
    assert outcome.error is None, outcome.error
    rows = query(tmp_path, "SELECT resource_id, region, key, value FROM resource_tags ORDER BY ALL")
    assert ("arn:aws:ec2:us-west-2:111122223333:instance/i-0aaa", "us-west-2", "Team", "Research") in rows
    assert ("arn:aws:ec2:us-west-2:111122223333:instance/i-0bbb", "us-west-2", "team", "research") in rows
    assert ("arn:aws:s3:::empty-tags-bucket", None, None, None) in rows  # kept, not dropped
    assert ("arn:aws:ec2:us-east-1:111122223333:volume/vol-0ccc", "us-east-1", "owner-team", "infra") in rows  # CSV
    assert ("arn:aws:ec2:us-west-2:111122223333:instance/i-0bbb", "us-west-2", "experiment", "") in rows


def test_a_snapshot_taken_by_a_clock_ahead_is_replaced_by_the_next_one_read(tmp_path, caplog, monkeypatch):
    """A run under a clock 40 days ahead filed its snapshot under that date; every later run
    (the clock set right) filed its own under an earlier date, so the stale one stayed the
    source's newest, read as its state, until the calendar caught up."""
    tags = tmp_path / "tags.json"

    def write_tags(team: str) -> None:
        tags.write_text(json.dumps({"ResourceTagMappingList": [
            {"ResourceARN": "arn:aws:ec2:us-east-1:111122223333:instance/i-0aaa",
             "Tags": [{"Key": "team", "Value": team}]}]}))

    config = config_for(tmp_path, {"name": "tags", "kind": "aws-tags", "path": str(tags)})
    write_tags("before")
    run_inventory(config, now=NOW)
    write_tags("ahead")
    with monkeypatch.context() as clock_ahead:  # the snapshot's record stamped by the same clock
        clock_ahead.setattr(snapshot_ledger, "utc_now_iso", lambda: "2099-01-01T00:00:00Z")
        run_inventory(config, now=NOW.replace(month=12, day=28))
    write_tags("now")
    [outcome] = run_inventory(config, now=NOW.replace(day=29))
    assert outcome.error is None, outcome.error
    assert outcome.rows == {"resource_tags snapshot_date=2026-12-28": 1}
    assert query(tmp_path, "SELECT snapshot_date, value FROM resource_tags ORDER BY 1") == [
        ("2026-11-28", "before"), ("2026-12-28", "now")]
    [warning] = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "dated 2026-12-28, after this run's date 2026-11-29" in warning.getMessage()
    caplog.clear()
    run_inventory(config, now=NOW.replace(day=30))  # filed there again, said once: not a warning every run
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_local_log_group_files(tmp_path):
    config = config_for(tmp_path, {"name": "logs", "kind": "cloudwatch-logs", "path": str(DATA / "logs")})
    [outcome] = run_inventory(config, now=NOW)
    assert outcome.error is None, outcome.error
    rows = query(tmp_path, "SELECT region, name, retention_days, stored_bytes, created_at FROM log_groups ORDER BY name")
    assert rows == [
        ("eu-west-1", "/aws/sagemaker/TrainingJobs", None, 987654321012, datetime(2025, 2, 3, 4, 5, 6)),
        ("us-east-1", "/ml/train/llama", 14, 5000, datetime(2026, 1, 1, 0, 0)),
    ]


def test_bad_local_file_fails_alone_and_names_the_file(tmp_path):
    bad = tmp_path / "tags.json"
    bad.write_text('{"wrong": []}')
    config = config_for(tmp_path, {"name": "bad", "kind": "aws-tags", "path": str(bad)},
                        {"name": "logs", "kind": "cloudwatch-logs", "path": str(DATA / "logs")})
    bad_outcome, good = run_inventory(config, now=NOW)
    assert str(bad) in str(bad_outcome.error) and "ResourceTagMappingList" in str(bad_outcome.error)
    assert good.error is None and query(tmp_path, "SELECT count(*) FROM log_groups") == [(2,)]


def test_cli_inventory_commits_and_reports(tmp_path):
    (tmp_path / "spendlake.yaml").write_text(json.dumps({
        "lake": str(tmp_path / "lake"),
        "inventory": [{"name": "logs", "kind": "cloudwatch-logs", "path": str(DATA / "logs")}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory", "--source", "logs"])
    assert result.exit_code == 0, result.output
    assert "logs (cloudwatch-logs) log_groups snapshot_date=" in result.output and "2 rows stored" in result.output
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory", "--source", "nope"])
    assert result.exit_code == 2 and "no inventory source named 'nope'" in result.output


def test_a_full_disk_when_recording_a_source_still_tells_each_sources_lines(tmp_path, monkeypatch):
    """Each source's snapshot is committed, then its success recorded in _state/sources.json: a
    full disk there failed the whole command with '... what was committed above is in the lake'
    and nothing above it (the lines come after the run), nor any later source tried. Now each
    source says what it stored, then that its record failed; exit 3."""
    import errno

    write_state = Lake.write_state

    def full(self, name, data):
        if name == "sources":
            raise OSError(errno.ENOSPC, "No space left on device", str(self.state_file(name)))
        write_state(self, name, data)

    monkeypatch.setattr(Lake, "write_state", full)
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": name, "kind": "cloudwatch-logs", "path": str(DATA / "logs")} for name in ("logs", "logs2")]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])
    assert result.exit_code == 3, result.output
    for name in ("logs", "logs2"):
        stored, failed = [line for line in result.output.splitlines() if line.startswith(f"{name} (")]
        assert stored.endswith("2 rows stored") and "log_groups snapshot_date=" in stored, result.output
        assert failed.startswith(f"{name} (cloudwatch-logs): FAILED: {tmp_path / 'lake' / '_state' / 'sources.json'}: "
                                 "disk full") and "what was committed above is in the lake" in failed
    assert query(tmp_path, "SELECT count(*) FROM log_groups") == [(4,)]


def test_config_rejects_misplaced_keys_and_duplicate_names():
    with pytest.raises(ConfigError, match=r"inventory\[0\]\.buckets: kind aws-tags takes no such key"):
        parse_config({"inventory": [{"name": "t", "kind": "aws-tags", "buckets": []}]})
    with pytest.raises(ConfigError, match="exactly one of prometheus_url"):
        parse_config({"inventory": [{"name": "g", "kind": "gpu-metrics"}]})
    with pytest.raises(ConfigError, match="'x' is used twice"):
        parse_config({"sources": [{"name": "x", "kind": "focus", "location": "/tmp"}],
                      "inventory": [{"name": "x", "kind": "cloudwatch-logs"}]})
