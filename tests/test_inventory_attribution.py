"""Attribution falls back on inventory tags (`resource_tags`) when a line's own tags lack a
dimension: bill tags first, then inventory tags of the same resource, then virtual rules."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from service.attribution.api import attribute
from service.attribution.reconciliation import reconcile
from service.attribution.resources import attribute_resources
from service.core.config import parse_config
from service.core.timewindow import Window
from service.ingest.inventory import run_inventory
from tests.attribution_helpers import declared_sources, config, line, make_lake

NOV = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
ARN = "arn:aws:ec2:us-east-1:111111111111:instance/"


def snapshot_tags(tmp_path, lake, mappings: list[dict], day: int) -> None:
    path = tmp_path / f"tags-{day}.json"
    path.write_text(json.dumps({"ResourceTagMappingList": mappings}))
    cfg = parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "inventory": [{"name": "tags", "kind": "aws-tags", "path": str(path)}]})
    [outcome] = run_inventory(cfg, now=datetime(2026, 11, day, 6, tzinfo=timezone.utc))
    assert outcome.error is None, outcome.error


def tags(**pairs) -> list[dict]:
    return [{"Key": k, "Value": v} for k, v in pairs.items()]


def by_team(result) -> dict:
    return {row["team"]: Decimal(row["cost"]) for row in result.to_json()["rows"]}


@pytest.mark.slow
def test_bill_tags_then_inventory_tags_then_rules(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-11-02 00:00", "10", resource="i-0aaa", tags={"team": "nlp"}),
        line("2026-11-02 00:00", "20", resource="i-0bbb"),  # no bill tags: the inventory's Team
        line("2026-11-02 00:00", "4", resource="ckpt-bucket", service="Amazon Simple Storage Service"),
        line("2026-11-02 00:00", "3", resource="i-0ccc", tags={"team": " "}),  # empty on the bill: absent
        line("2026-11-02 00:00", "2", resource="i-0ddd", account="222222222222"),  # rule
        line("2026-11-02 00:00", "1", resource="i-0eee"),  # nothing anywhere
        line("2026-11-02 00:00", "5", resource=f"{ARN}i-0fff"),  # the bill names it by ARN
    ])
    cfg = config({"dimensions": {"team": {"tags": ["team", "owner"],
                                          "rules": [{"match": {"account": "222222222222"}, "value": "platform"}]}}})
    assert by_team(attribute(lake, cfg, NOV))["unallocated"] == Decimal(33)  # before any inventory

    snapshot_tags(tmp_path, lake, [{"ResourceARN": f"{ARN}i-0bbb", "Tags": tags(Team="stale")}], day=20)
    snapshot_tags(tmp_path, lake, [
        {"ResourceARN": f"{ARN}i-0aaa", "Tags": tags(team="vision")},  # the bill's own tag wins
        {"ResourceARN": f"{ARN}i-0bbb", "Tags": tags(Team="vision")},  # latest snapshot wins over day 20
        {"ResourceARN": "arn:aws:s3:::ckpt-bucket", "Tags": tags(owner="research")},  # second alias
        {"ResourceARN": f"{ARN}i-0ccc", "Tags": tags(team="infra")},
        {"ResourceARN": f"{ARN}i-0ddd", "Tags": []},  # listed, untagged: the rule still applies
        {"ResourceARN": f"{ARN}i-0fff", "Tags": tags(team="infra")},
    ], day=21)

    result = attribute(lake, cfg, NOV, explain=True)  # the new snapshot re-attributes the month
    assert by_team(result) == {"nlp": Decimal(10), "vision": Decimal(20), "research": Decimal(4),
                               "infra": Decimal(8), "platform": Decimal(2), "unallocated": Decimal(1)}
    how = {row["team"]: [e["how"] for e in row["explain"]] for row in result.to_json()["rows"]}
    assert how["vision"] == ["inventory-tag:Team"] and how["research"] == ["inventory-tag:owner"]
    assert how["nlp"] == ["tag:team"] and how["platform"][0].startswith("rule:0 (")
    assert all(r.ok for r in reconcile(lake, cfg))
    assert attribute_resources(lake, cfg, ["i-0bbb", "i-0aaa"]) == {
        "i-0bbb": {"team": "vision", "project": "unallocated", "experiment": "unallocated"},
        "i-0aaa": {"team": "nlp", "project": "unallocated", "experiment": "unallocated"}}


def test_no_inventory_keeps_the_sql_unchanged():
    from service.attribution.sql import attributed_sql
    from service.attribution.statement import Params

    cfg = config({}).attribution
    plain = attributed_sql(cfg, ["team"], "TRUE", Params())
    assert attributed_sql(cfg, ["team"], "TRUE", Params(), None) == plain
    with_inventory = attributed_sql(cfg, ["team"], "TRUE", Params(), ["Team", "cost-center"])
    assert "resource_tags" in with_inventory.text and "Team" in with_inventory.params.values()
    assert "cost-center" not in with_inventory.params.values()  # only keys a dimension asks for
