"""A past day's report and the findings: the store keeps each finding's latest state only, so the
report says what its findings are as of, and leaves out of a past day those that began after it."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from decimal import Decimal

from attribution_helpers import config as lake_config, line, make_lake

from rules.base import Finding
from service.findings.store import load_findings, store_findings
from service.report.write import write_report

JUDGED = datetime(2026, 11, 29, tzinfo=timezone.utc)  # the data's end the last rules run judged to


def report(lake, day: date, out) -> dict:
    write_report(lake_config(lake=lake), day, str(out))
    data = json.loads((out / day.isoformat() / "report.json").read_text())
    return {s["key"]: s for s in data["sections"]}


def judged_lake(tmp_path):
    """A month of spend, and findings the last rules run stored judging to 29 November: an
    anomaly that began on the 25th, an idle GPU measured from the 1st."""
    lake = make_lake(tmp_path, [line(f"2026-11-{d:02d}T00:00:00", "100", end=f"2026-11-{d + 1:02d}T00:00:00",
                                     tags={"team": "pretrain"}) for d in range(1, 29)])
    seen = {"first_seen": JUDGED, "last_seen": JUDGED}
    store_findings(lake, [
        Finding(id="a1", rule="spend-anomaly", severity="warning", resource_id="team=pretrain/service=EC2",
                team="pretrain", category="overspend", impact_usd=Decimal("300"), summary="EC2 spend 40% above",
                evidence={"start": "2026-11-25", "impact_usd": "300", "currency": "USD"}, **seen),
        Finding(id="w1", rule="idle-gpu", severity="warning", resource_id="i-1", team="pretrain", category="waste",
                impact_usd=Decimal("500"), monthly_waste_usd=Decimal("500"), summary="i-1 sat idle",
                evidence={"window_start": "2026-11-01T00:00:00"}, **seen)])
    return lake


def test_a_past_days_report_leaves_out_findings_that_began_after_it_and_says_they_are_current(tmp_path):
    """The report of 20 November listed the anomaly of an episode that began on the 25th (found by
    a later rules run) as if it were that day's, and said nothing of when its findings were from."""
    lake = judged_lake(tmp_path)
    latest = report(lake, date(2026, 11, 28), tmp_path / "out")  # the run judged to this day's end
    assert [r["resource_id"] for t in latest["anomalies"]["tables"] for r in t["rows"]] == ["team=pretrain/service=EC2"]
    assert latest["anomalies"]["note"].startswith("As of the last rules run (data to 2026-11-29 00:00 UTC). ")
    assert latest["waste"]["note"].startswith("As of the last rules run (data to 2026-11-29 00:00 UTC). ")

    past = report(lake, date(2026, 11, 20), tmp_path / "out")
    assert past["anomalies"]["tables"] == []
    assert past["anomalies"]["note"] == (
        "As of the last rules run (data to 2026-11-29 00:00 UTC), not as of 2026-11-20: findings keep their latest "
        "state only (one resolved since is not listed, figures are the latest); 1 that began or were first seen after "
        "2026-11-20 are left out.")
    waste = next(t for t in past["waste"]["tables"] if t["key"] == "open_findings")
    assert [r["id"] for r in waste["rows"]] == ["w1"]  # measured from 1 November: the day's too
    assert past["waste"]["note"].startswith("As of the last rules run (data to 2026-11-29 00:00 UTC), not as of "
                                            "2026-11-20: findings keep their latest state only")


def test_a_past_days_summary_says_its_findings_are_not_as_of_the_day(tmp_path):
    """summary.md of 20 November listed the open findings under no note, as if they were that day's,
    while the page and report.json said they are the last rules run's; the latest day's adds none."""
    lake = judged_lake(tmp_path)
    past_note = ("_As of the last rules run (data to 2026-11-29 00:00 UTC), not as of 2026-11-20: findings keep "
                 "their latest state only")
    write_report(lake_config(lake=lake), date(2026, 11, 20), str(tmp_path / "out"))
    past = (tmp_path / "out" / "2026-11-20" / "summary.md").read_text()
    listed = past.index("*Top 10 open findings by monthly waste*")
    assert past.rfind(past_note, 0, listed) > past.rfind("\n\n*", 0, listed)  # the sentence just above the list
    assert past.count(past_note) == 1  # the anomaly of the 25th is left out: no list, no note

    write_report(lake_config(lake=lake), date(2026, 11, 28), str(tmp_path / "out"))
    assert "not as of" not in (tmp_path / "out" / "2026-11-28" / "summary.md").read_text()


def test_a_past_days_report_leaves_out_storage_findings_first_seen_after_it(tmp_path):
    """Storage findings (checkpoints, log groups) come from the latest inventory snapshot and carry no
    window: the report of 20 November listed those a rules run first saw on the 29th, in a snapshot of
    the 27th, as if they were that day's. Their earliest sight (the run that first saw them, the
    snapshot they were read from) bounds when they began: those seen by the 20th stay."""
    lake = judged_lake(tmp_path)
    early = datetime(2026, 11, 15, tzinfo=timezone.utc)

    def storage(id_: str, rule: str, first_seen: datetime, **evidence) -> Finding:
        return Finding(id=id_, rule=rule, severity="warning", resource_id=f"s3://b/{id_}", team="pretrain",
                       category="waste", impact_usd=Decimal("40"), monthly_waste_usd=Decimal("40"),
                       summary=f"{id_} keeps too much", evidence=evidence, first_seen=first_seen, last_seen=JUDGED)

    store_findings(lake, [
        *load_findings(lake),
        storage("late-checkpoints", "checkpoint-sprawl", JUDGED, checkpoints=12),
        storage("old-checkpoints", "checkpoint-sprawl", early, checkpoints=9),
        storage("logs-read-before", "unbounded-logs", JUDGED, snapshot_date="2026-11-18"),
        storage("logs-read-after", "unbounded-logs", JUDGED, snapshot_date="2026-11-27")])
    past = report(lake, date(2026, 11, 20), tmp_path / "out")
    waste = next(t for t in past["waste"]["tables"] if t["key"] == "open_findings")
    assert sorted(r["id"] for r in waste["rows"]) == ["logs-read-before", "old-checkpoints", "w1"]
    assert "2 that began or were first seen after 2026-11-20 are left out" in past["waste"]["note"], past["waste"]["note"]
    latest = report(lake, date(2026, 11, 28), tmp_path / "out")
    assert len(next(t for t in latest["waste"]["tables"] if t["key"] == "open_findings")["rows"]) == 5


def test_a_storage_findings_since_is_the_earliest_sight_the_past_day_filter_uses(tmp_path):
    """A log group read from a snapshot of the 18th, first seen by the rules run of the 29th, was kept
    in the report of the 20th (seen by then) while its `since` said 2026-11-29: after the day it was listed in."""
    lake = judged_lake(tmp_path)
    store_findings(lake, [*load_findings(lake), Finding(
        id="logs", rule="unbounded-logs", severity="warning", resource_id="/aws/logs/train", team="pretrain",
        category="waste", impact_usd=Decimal("40"), monthly_waste_usd=Decimal("40"), summary="logs kept forever",
        evidence={"snapshot_date": "2026-11-18"}, first_seen=JUDGED, last_seen=JUDGED), Finding(
        id="ckpt", rule="checkpoint-sprawl", severity="warning", resource_id="s3://b/ckpt", team="pretrain",
        category="waste", impact_usd=Decimal("30"), monthly_waste_usd=Decimal("30"), summary="checkpoints kept",
        evidence={"snapshot_date": "2026-11-27"}, first_seen=datetime(2026, 11, 16, tzinfo=timezone.utc),
        last_seen=JUDGED)])
    past = report(lake, date(2026, 11, 20), tmp_path / "out")
    rows = {r["id"]: r for r in next(t for t in past["waste"]["tables"] if t["key"] == "open_findings")["rows"]}
    assert rows["logs"]["since"] == "2026-11-18T00:00:00Z"  # the snapshot, earlier than the run that saw it
    assert rows["ckpt"]["since"] == "2026-11-16T00:00:00Z"  # the run, earlier than the snapshot it read


def test_summary_lists_the_top_causes_of_unallocated_spend_as_the_page_does(tmp_path):
    """summary.md had the unallocated shares but not the table of their top causes the page and
    report.json have (no line of it): it lists them as its other tables, each cause with its
    unallocated $, and, for a past day, says above them they are the last rules run's."""
    lake = judged_lake(tmp_path)  # no line carries a project: November's $2,800, measured from the 1st, is unallocated
    store_findings(lake, [*load_findings(lake), Finding(
        id="u1", rule="unallocated-spend", severity="warning", resource_id="unallocated:project", category="ownership",
        impact_usd=Decimal("2800"), summary="100.0% of spend ($2,800.00 of $2,800.00) has no project; most on service EC2",
        evidence={"dimension": "project", "window_start": "2026-11-01T00:00:00", "unallocated_usd": "2800"},
        first_seen=JUDGED, last_seen=JUDGED)])
    sections = report(lake, date(2026, 11, 28), tmp_path / "out")
    (cause,) = next(t for t in sections["unallocated"]["tables"] if t["key"] == "unallocated_causes")["rows"]
    summary = (tmp_path / "out" / "2026-11-28" / "summary.md").read_text()
    listed = summary.split("*Top causes of unallocated spend* — unallocated $\n", 1)[1].split("\n\n", 1)[0]
    assert listed == f"- unallocated:project / {cause['summary']}: ${Decimal(cause['impact_usd']):,.2f}"
    (share,) = [r for t in sections["unallocated"]["tables"] if t["key"] == "unallocated" for r in t["rows"]
                if r["dimension"] == "project"]
    assert Decimal(cause["impact_usd"]) == Decimal(share["unallocated_cost"]) == 2800  # the month the rule measured

    write_report(lake_config(lake=lake), date(2026, 11, 20), str(tmp_path / "out"))
    past = (tmp_path / "out" / "2026-11-20" / "summary.md").read_text()
    causes = past.index("*Top causes of unallocated spend*")
    assert past.rfind("not as of 2026-11-20", 0, causes) > past.rfind("\n\n*", 0, causes)  # just above the list
