"""The rules read what the inventory connectors write: local inventory files → lake →
rules, so a column renamed on either side fails here."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from service.core.config import parse_config
from service.core.lake import Lake
from service.findings.run import run_rules
from service.ingest.inventory import run_inventory
from tests.rules_lake import build_lake

INVENTORY = Path(__file__).parent / "data" / "inventory"
NOW = datetime(2026, 11, 21, tzinfo=timezone.utc)


@pytest.mark.slow
def test_rules_run_on_inventory_written_by_the_connectors(tmp_path):
    config = parse_config({
        "lake": str(tmp_path / "lake"),
        "sources": [{"name": "test", "kind": "focus", "location": str(tmp_path / "bill")}],  # build_lake's
        "inventory": [
            {"name": "gpus", "kind": "gpu-metrics", "path": str(INVENTORY / "gpu")},
            {"name": "objects", "kind": "s3-objects", "path": str(INVENTORY / "s3" / "listing.csv"),
             "lifecycle_path": str(INVENTORY / "s3" / "lifecycle.json")},
            {"name": "logs", "kind": "cloudwatch-logs", "path": str(INVENTORY / "logs" / "describe-log-groups.json")},
        ],
        "rules": {"idle-gpu": {"min_idle_hours": 1}},
    })
    assert all(outcome.error is None for outcome in run_inventory(config, now=NOW))
    build_lake(Lake(config.lake), {"costs": [
        {"ResourceId": "i-0ddd", "x_instance_type": "p5.48xlarge", "BilledCost": "98.32",
         "ChargePeriodStart": "2026-11-20 10:00:00", "ChargePeriodEnd": "2026-11-20 11:00:00"}]}, NOW.date())

    result = run_rules(config, dry_run=True, now=NOW).result
    assert {o.rule: o.status for o in result.outcomes} == {
        "idle-gpu": "ok", "checkpoint-sprawl": "ok", "duplicate-datasets": "ok", "unbounded-logs": "ok",
        "budget": "ok", "spend-anomaly": "ok", "unallocated-spend": "ok", "commitment-unused": "ok",
        "capacity-unused": "ok", "failed-reruns": "ok"}
    found = {(f.rule, f.resource_id) for f in result.seen}
    assert ("idle-gpu", "i-0ddd") in found  # SM active 1% and 3% → 2% < 5%
    assert ("duplicate-datasets", "s3://team-b-data/copies/") in found  # same size and SHA256
    assert ("unbounded-logs", "/aws/sagemaker/TrainingJobs") in found  # 920 GiB, never expires
