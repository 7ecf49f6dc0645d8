"""The synthetic organisation's inventory: files the inventory connectors read, with ids that
match the organisation's bill, idle stretches and unmonitored nodes; the demo lake shows waste of all four rules."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from connectors.synthetic.inventory import write_inventory
from connectors.synthetic.org import build_organisation
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.inventory import run_inventory

START, DAYS = date(2026, 10, 1), 21


def query(lake: Lake, sql: str):
    con = lake.query()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_same_organisation_same_files(tmp_path):
    org = build_organisation(7, START, DAYS)
    first, second = write_inventory(org, tmp_path / "a"), write_inventory(org, tmp_path / "b")
    for a, b in zip(first.sources(), second.sources()):
        for key in ("path", "lifecycle_path"):
            if key in a:
                assert open(a[key], "rb").read() == open(b[key], "rb").read(), a[key]


@pytest.fixture(scope="module")
def inventory_lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    org = build_organisation(7, START, DAYS)
    files = write_inventory(org, root / "inventory")
    config = parse_config({"lake": str(root / "lake"), "inventory": files.sources()})
    end = datetime.combine(START + timedelta(days=DAYS), datetime.min.time(), tzinfo=timezone.utc)
    outcomes = run_inventory(config, now=end)
    assert [o.error for o in outcomes] == [None] * 4
    return Lake(config.lake), org


@pytest.mark.slow
def test_inventory_ids_match_the_bill(inventory_lake):
    lake, org = inventory_lake
    billed = {s.resource_id for s in org.streams}
    gpu_ids = {rid for (rid,) in query(lake, "SELECT DISTINCT resource_id FROM gpu_utilization")}
    assert gpu_ids and gpu_ids <= billed
    long_context = {i for e in org.experiments if e.project == "long-context-eval" for i in e.instances}
    assert long_context and not long_context & gpu_ids  # left unmonitored on purpose
    buckets = {b for (b,) in query(lake, "SELECT DISTINCT bucket FROM s3_objects")}
    assert buckets <= billed
    [(never, total)] = query(lake, "SELECT count(*) FILTER (WHERE retention_days IS NULL), count(*) FROM log_groups")
    assert total == len(org.log_groups) and never > total / 2
    # nodes untagged on the bill are tagged in the inventory, bar a few with empty tag lists
    untagged = {s.resource_id for s in org.streams if s.resource_id.startswith("i-") and not s.tags}
    inventory_tagged = {rid.rsplit("/", 1)[-1] for (rid,) in query(
        lake, "SELECT DISTINCT resource_id FROM resource_tags WHERE key = 'Team'")}
    assert untagged & inventory_tagged
    assert query(lake, "SELECT count(*) FROM resource_tags WHERE key IS NULL")[0][0] > 0


def test_idle_stretches_and_busy_hours(inventory_lake):
    lake, _ = inventory_lake
    rows = dict(query(lake, "SELECT metric, count(*) FILTER (WHERE util_pct < 5) / count(*) FROM gpu_utilization "
                            "WHERE gpu IS NULL GROUP BY metric"))
    assert set(rows) == {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"}
    assert all(0 < share < 0.5 for share in rows.values())  # mostly busy, with idle stretches


@pytest.mark.slow
def test_demo_lake_shows_waste_of_all_four_rules(demo_run):
    from conftest import DEMO_DAYS
    from rules.base import finding_id
    from service.findings.run import run_rules

    demo = demo_run
    assert not demo.ingest.failed and not any(o.failed for o in demo.inventory)
    report = run_rules(demo.config, since=f"{DEMO_DAYS}d", now=demo.as_of, dry_run=True)
    assert [o.message for o in report.result.outcomes if o.status == "error"] == []
    waste: dict[str, float] = {}
    for finding in report.result.findings:
        if finding.category == "waste":
            waste[finding.rule] = waste.get(finding.rule, 0) + float(finding.monthly_waste_usd)
    assert all(waste.get(rule, 0) > 0 for rule in ("idle-gpu", "checkpoint-sprawl", "duplicate-datasets",
                                                   "unbounded-logs", "commitment-unused", "capacity-unused",
                                                   "failed-reruns")), waste
    long_context = {i for e in demo.generation.organisation.experiments if e.project == "long-context-eval"
                    for i in e.instances}
    assert {finding_id("idle-gpu", i, "unmonitored") for i in long_context} <= {f.id for f in report.result.findings}
