"""spend-anomaly: hand-computed baselines and episodes, and the rule over a real lake
(attribution, exclusions, root causes, stable ids, acknowledgements, planned runs)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from attribution_helpers import line, make_lake
from rules.spend_anomaly import Thresholds, detect, expected_spend, noise_scale
from service.core.config import parse_config
from service.findings.run import run_rules
from service.findings.store import acknowledge, load_findings
from service.planning.plans import Plan, register_plan
from service.planning.estimate import Span
from tests.attribution_helpers import declared_sources

DEFAULTS = Thresholds(Decimal(100), Decimal(20), Decimal(50))
FIRST = date(2026, 10, 1)


def series(days: int, value) -> dict[date, Decimal]:
    return {FIRST + timedelta(n): Decimal(value(n, FIRST + timedelta(n))) for n in range(days)}


def test_expected_spend_knows_weekends():
    # weekdays 100, weekends 20: a Saturday expects 20, a Monday 100
    spend = series(40, lambda n, d: 20 if d.weekday() >= 5 else 100)
    saturday = next(d for d in sorted(spend)[30:] if d.weekday() == 5)
    assert expected_spend(spend, saturday, FIRST) == Decimal(20)
    assert expected_spend(spend, saturday + timedelta(2), FIRST) == Decimal(100)


def test_expected_spend_follows_a_linear_trend_exactly():
    spend = series(40, lambda n, d: 100 + 2 * n)
    day = FIRST + timedelta(35)
    # same-weekday median 100 + 2×17.5 back; trend (7-day − 28-day median) = 2×10.5, × 17.5/10.5
    assert expected_spend(spend, day, FIRST) == Decimal(100 + 2 * 35)


def test_expected_spend_needs_seven_known_days():
    spend = series(10, lambda n, d: 100)
    assert expected_spend(spend, FIRST + timedelta(6), FIRST) is None
    assert expected_spend(spend, FIRST + timedelta(7), FIRST) == Decimal(100)


def test_all_three_thresholds_must_hold():
    assert DEFAULTS.anomalous(Decimal(400), Decimal(100))
    assert not DEFAULTS.anomalous(Decimal(199), Decimal(100))  # impact 99 < $100
    assert not DEFAULTS.anomalous(Decimal(1150), Decimal(1000))  # impact 150 = 15% < 20%
    assert not DEFAULTS.anomalous(Decimal(49), Decimal(0))  # actual below $50 a day
    assert not Thresholds(Decimal(0), Decimal(0), Decimal(0)).anomalous(Decimal(5), Decimal(5))  # no impact


def test_consecutive_days_make_one_episode_and_a_spike_does_not_lift_the_baseline():
    spend = series(40, lambda n, d: 100)
    spend[FIRST + timedelta(30)] = Decimal(500)
    spend[FIRST + timedelta(31)] = Decimal(450)
    spend[FIRST + timedelta(36)] = Decimal(400)
    days = [FIRST + timedelta(n) for n in range(28, 40)]
    episodes = detect(spend, days, FIRST, DEFAULTS)
    assert [(e.start, len(e.days), e.impact, e.ongoing) for e in episodes] == [
        (FIRST + timedelta(30), 2, Decimal(750), False), (FIRST + timedelta(36), 1, Decimal(300), False)]


def test_planned_spend_is_taken_out_before_testing():
    spend = series(40, lambda n, d: 100)
    spend[FIRST + timedelta(39)] = Decimal(600)
    days = [FIRST + timedelta(39)]
    (episode,) = detect(spend, days, FIRST, DEFAULTS, {FIRST + timedelta(39): Decimal(450)})
    assert episode.planned_only and episode.ongoing
    (episode,) = detect(spend, days, FIRST, DEFAULTS, {FIRST + timedelta(39): Decimal(100)})
    assert not episode.planned_only  # 600 − 100 planned is still 400 over 100


# ---- the rule over a lake ------------------------------------------------------------------

TODAY = date(2026, 11, 20)
NOW = datetime(2026, 11, 20, 6, tzinfo=timezone.utc)


def daily_line(day: date, cost: str, **kwargs) -> dict:
    return line(f"{day} 00:00:00", cost, end=f"{day + timedelta(1)} 00:00:00", **kwargs)


def anomaly_lake(tmp_path):
    lines = []
    for n in range(1, 50):
        day = TODAY - timedelta(n)
        lines.append(daily_line(day, "200", tags={"team": "vision"}, resource="i-base", usage_type="BoxUsage:p4d"))
        lines.append(daily_line(day, "80", tags={"team": "nlp"}, service="Amazon S3", resource="bucket-a"))
    for n in (1, 2):  # vision's EC2 jumps the last two days: a new resource in us-west-2
        day = TODAY - timedelta(n)
        lines.append(daily_line(day, "900", tags={"team": "vision"}, resource="i-new", usage_type="BoxUsage:p5",
                                region="us-west-2"))
    # a big credit and tax on nlp's S3 yesterday are not spend
    lines.append(daily_line(TODAY - timedelta(1), "5000", tags={"team": "nlp"}, service="Amazon S3",
                            category="Tax"))
    lines.append(daily_line(TODAY - timedelta(1), "-700", tags={"team": "nlp"}, service="Amazon S3",
                            category="Credit"))
    return make_lake(tmp_path, lines)


def anomaly_config(lake):
    return parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": {"dimensions": {"team": {"tags": ["team"]}}},
                         "rules": {"spend-anomaly": {}}})


@pytest.mark.slow
def test_rule_finds_the_jump_with_owner_root_causes_and_a_stable_id(tmp_path):
    lake = anomaly_lake(tmp_path)
    config = anomaly_config(lake)
    report = run_rules(config, only=["spend-anomaly"], now=NOW)
    (finding,) = report.result.seen
    assert finding.team == "vision" and finding.severity == "critical"  # 1800 ≥ $1000 critical line
    assert finding.impact_usd == Decimal("1800.00")  # the episode's excess: 2 days × (1100 − 200)
    assert finding.category == "overspend" and finding.monthly_waste_usd is None
    assert finding.evidence["start"] == str(TODAY - timedelta(2)) and finding.evidence["ongoing"] is True
    assert finding.evidence["expected_usd"] == "200.00" and finding.evidence["actual_usd"] == "1100.00"
    causes = {(c["dimension"], c["value"]): c["impact_usd"] for c in finding.evidence["root_causes"]}
    assert causes == {("resource", "i-new"): "900.00", ("usage_type", "BoxUsage:p5"): "900.00",
                      ("region", "us-west-2"): "900.00"}
    # the next day's run sees the same episode under the same id, not a new alert
    later = run_rules(config, only=["spend-anomaly"], now=NOW + timedelta(hours=3))
    assert [f.id for f in later.result.seen] == [finding.id]
    assert later.result.seen[0].first_seen == report.result.seen[0].first_seen


def test_54_a_window_from_year_1_finds_the_same_episode_not_an_overflow(tmp_path):
    """`rules run --since 0001-01-02`: the rule looked back from the window's start and failed
    with an OverflowError traceback; it scans from the data's first day, as any long window."""
    config = anomaly_config(anomaly_lake(tmp_path))
    report = run_rules(config, only=["spend-anomaly"], since="0001-01-02", dry_run=True, now=NOW)
    assert report.result.errors == []
    assert [(f.team, f.evidence["start"]) for f in report.result.seen] == [("vision", str(TODAY - timedelta(2)))]


@pytest.mark.slow
def test_acknowledged_anomaly_is_not_raised_again(tmp_path):
    lake = anomaly_lake(tmp_path)
    config = anomaly_config(lake)
    (finding,) = run_rules(config, only=["spend-anomaly"], now=NOW).result.seen
    acknowledge(lake, finding.id, "expected", now=NOW)
    (again,) = run_rules(config, only=["spend-anomaly"], now=NOW + timedelta(hours=1)).result.seen
    assert again.id == finding.id and again.status == "acknowledged"
    assert [f.status for f in load_findings(lake, rule="spend-anomaly")] == ["acknowledged"]


def test_spend_inside_a_planned_run_is_annotated_not_raised(tmp_path):
    # the new instance belongs to project llm, planned for 2000 over the last three days
    lake = make_lake(tmp_path, [
        *[daily_line(TODAY - timedelta(n), "200", tags={"team": "vision"}, resource="i-base") for n in range(1, 50)],
        *[daily_line(TODAY - timedelta(n), "900", tags={"team": "vision", "project": "llm"}, resource="i-new")
          for n in (1, 2)]])
    register_plan(lake, Plan(name="llm-run", project="llm", experiment=None,
                             start=datetime.combine(TODAY - timedelta(3), datetime.min.time(), timezone.utc),
                             run_hours=Span(Decimal(96), Decimal(96)), retention_days=0,
                             compute_cost=Span(Decimal(1500), Decimal(2000)), storage_cost=Span(Decimal(0), Decimal(0)),
                             inputs={}))
    (finding,) = run_rules(anomaly_config(lake), only=["spend-anomaly"], now=NOW).result.seen
    assert finding.severity == "info" and finding.impact_usd == 0
    assert finding.evidence["planned"] == {"planned_usd": "1800.00", "plans": ["llm-run"]}


def test_two_plans_on_one_project_count_its_spend_once(tmp_path):
    # as above with a second plan on llm over the same days: the 1800 the project spent is expected once,
    # not 3600 (taken off the team's series twice, it would hide another project's spike in it)
    lake = make_lake(tmp_path, [
        *[daily_line(TODAY - timedelta(n), "200", tags={"team": "vision"}, resource="i-base") for n in range(1, 50)],
        *[daily_line(TODAY - timedelta(n), "900", tags={"team": "vision", "project": "llm"}, resource="i-new")
          for n in (1, 2)],
        *[daily_line(TODAY - timedelta(n), "700", tags={"team": "vision", "project": "cv"}, resource="i-cv")
          for n in (1, 2)]])
    for name in ("llm-r1", "llm-r2"):
        register_plan(lake, Plan(name=name, project="llm", experiment=None,
                                 start=datetime.combine(TODAY - timedelta(3), datetime.min.time(), timezone.utc),
                                 run_hours=Span(Decimal(96), Decimal(96)), retention_days=0,
                                 compute_cost=Span(Decimal(1500), Decimal(2000)),
                                 storage_cost=Span(Decimal(0), Decimal(0)), inputs={}))
    (finding,) = run_rules(anomaly_config(lake), only=["spend-anomaly"], now=NOW).result.seen
    # cv's 700 a day is not planned: 1800 counted twice would cover it and read "info, expected"
    assert finding.severity != "info" and finding.impact_usd > 0
    assert finding.evidence["planned"] == {"planned_usd": "1800.00", "plans": ["llm-r1", "llm-r2"]}


@pytest.mark.slow
def test_metrics_show_the_open_anomaly_impact_by_team_and_service(tmp_path):
    from service.serve.families import findings_families

    lake = anomaly_lake(tmp_path)
    config = anomaly_config(lake)
    run_rules(config, only=["spend-anomaly"], now=NOW)
    (family,) = [f for f in findings_families(config, lake) if f.name == "spendlake_anomaly_impact_usd"]
    assert [(s.labels, s.value) for s in family.samples] == [
        ({"team": "vision", "service": "Amazon Elastic Compute Cloud"}, 1800.0)]


def test_a_noisy_series_needs_a_jump_beyond_its_band():
    # week-over-week changes 0, ±10, ±20 … ±100 over the 21 days before `day`:
    # median 0, MAD 50 → σ = 50 × 1.4826 / √2 ≈ 52.42
    changes = [0] + [sign * step for step in range(10, 101, 10) for sign in (1, -1)]
    spend = {FIRST + timedelta(n): Decimal(1000) for n in range(7)}
    for n, change in enumerate(changes):
        spend[FIRST + timedelta(7 + n)] = spend[FIRST + timedelta(n)] + change
    day = FIRST + timedelta(28)
    noise = noise_scale(spend, day, FIRST)
    assert noise.quantize(Decimal("0.01")) == Decimal("52.42")
    banded = Thresholds(Decimal(100), Decimal(20), Decimal(50), Decimal(5))
    assert DEFAULTS.anomalous(Decimal(1250), Decimal(1000))
    assert not banded.anomalous(Decimal(1250), Decimal(1000), noise)  # 250 < 5σ ≈ 262
    assert banded.anomalous(Decimal(1270), Decimal(1000), noise)


def test_a_plan_on_a_run_expects_that_runs_spend_not_its_projects_other_runs(tmp_path):
    """Project llm's runs r1 (on i-a) and r2 (on i-b) each hold 8 GPUs at $80 an hour the last two days: $1,920 a day
    each on team vision's EC2, beside its $200 a day. A plan on run r1 (up to $10,000) expects r1's $1,920 a day; the
    day's $4,040 less that is still $2,120 against $200 expected: an anomaly (r2 unplanned), where the plan read as
    its project's window expected both runs' $3,840 and called it 'inside a planned run', info."""
    from tests.attribution_helpers import add_jobs
    from tests.test_clusters_allocation import gpu_line, job

    days = [TODAY - timedelta(n) for n in (2, 1)]
    hours = [f"{day}T{h:02d}:00:00" for day in days for h in range(24)]
    lake = make_lake(tmp_path, [
        *[daily_line(TODAY - timedelta(n), "200", tags={"team": "vision"}, resource="i-base") for n in range(1, 50)],
        *[gpu_line(instance, start=hour, team="vision") for instance in ("i-a", "i-b") for hour in hours]])
    owner = {"team": "vision", "project": "llm"}
    add_jobs(lake, [job("1", 8, f"{days[0]}T00:00:00", f"{TODAY}T00:00:00", instance_ids=["i-a"], run_id="r1", **owner),
                    job("2", 8, f"{days[0]}T00:00:00", f"{TODAY}T00:00:00", instance_ids=["i-b"], run_id="r2", **owner)],
             snapshot=str(TODAY))
    register_plan(lake, Plan(name="r1-plan", project="llm", experiment=None, run="r1",
                             start=datetime.combine(days[0], datetime.min.time(), timezone.utc),
                             run_hours=Span(Decimal(96), Decimal(96)), retention_days=0,
                             compute_cost=Span(Decimal(8000), Decimal(10000)), storage_cost=Span(Decimal(0), Decimal(0)),
                             inputs={}))
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake),
                           "inventory": [{"name": "slurm", "kind": "jobs-file", "path": str(tmp_path / "jobs")}],
                           "attribution": {"dimensions": {"team": {"tags": ["team"]}}, "clusters": {}},
                           "rules": {"spend-anomaly": {}}})
    (finding,) = run_rules(config, only=["spend-anomaly"], now=NOW).result.seen
    assert (finding.team, finding.severity != "info", finding.impact_usd) == ("vision", True, Decimal("7680.00"))
    assert finding.evidence["planned"] == {"planned_usd": "3840.00", "plans": ["r1-plan"]}, finding.evidence
