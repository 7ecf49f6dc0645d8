"""unallocated-spend: the unallocated share per dimension, its top causes and the tag keys
no alias reads, over a real lake through the service."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from attribution_helpers import line, make_lake
from service.attribution import attribute
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.core.timewindow import Window
from service.findings.run import run_rules
from tests.attribution_helpers import declared_sources, query_memory_limits, readers_memory_limit

TODAY = date(2026, 11, 20)
NOW = datetime(2026, 11, 20, 0, tzinfo=timezone.utc)


def day_line(n: int, cost: str, **kwargs) -> dict:
    day = TODAY - timedelta(n)
    return line(f"{day} 00:00:00", cost, end=f"{day + timedelta(1)} 00:00:00", **kwargs)


def lake_with(tmp_path, untagged_per_day: str):
    lines = []
    for n in range(1, 8):  # the 7-day window
        lines.append(day_line(n, "100", tags={"team": "vision", "project": "detr"}, resource="i-1"))
        lines.append(day_line(n, untagged_per_day, tags={"Owner": "alice", "cost-center": "42"},
                              service="Amazon S3", resource="bucket-x", account="222222222222"))
        lines.append(day_line(n, "3", tags={"team": "nlp"}, service="AWS Lambda", resource="fn-a"))
        lines.append(day_line(n, "-50", category="Credit", service="Amazon S3"))  # credits are no one's spend
    return make_lake(tmp_path, lines)


def config_for(lake, **rule):
    return parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": {"dimensions": {"team": {"tags": ["team"]},
                                                                                  "project": {"tags": ["project"]}}},
                         "rules": {"unallocated-spend": {"dimensions": ["team", "project"], **rule}}})


def test_unallocated_share_above_the_threshold_names_its_causes(tmp_path):
    lake = lake_with(tmp_path, "10")
    found = {f.resource_id: f for f in run_rules(config_for(lake), only=["unallocated-spend"], now=NOW).result.seen}
    team = found["unallocated:team"]
    # team: 7 × 10 unallocated of 7 × 113 = 8.85%; the credits are left out
    assert team.evidence["unallocated_usd"] == "70.00" and team.evidence["total_usd"] == "791.00"
    assert team.evidence["unallocated_pct"] == "8.8"
    assert team.evidence["top_services"] == [{"value": "Amazon S3", "cost_usd": "70.00"}]
    assert team.evidence["top_accounts"] == [{"value": "222222222222", "cost_usd": "70.00"}]
    assert team.evidence["top_resources"] == [{"value": "bucket-x", "cost_usd": "70.00"}]
    assert team.evidence["uncovered_tag_keys"] == [{"key": "Owner", "cost_usd": "70.00"},
                                                   {"key": "cost-center", "cost_usd": "70.00"}]
    assert team.impact_usd == Decimal("70.00")  # the unallocated spend of the window
    assert team.category == "ownership" and team.monthly_waste_usd is None  # unowned spend is not waste
    assert team.evidence["monthly_unallocated_usd"] == "304.17"  # 70 × 730 / 168, what severity compares
    assert team.summary.startswith("8.8% of spend ($70.00 of $791.00) has no team; most on service Amazon S3")
    # project: the S3 lines and nlp's Lambda lines have none: (70 + 21) / 791 = 11.5%
    assert found["unallocated:project"].evidence["unallocated_usd"] == "91.00"


def test_a_dimension_with_its_own_default_is_watched_by_it(tmp_path):
    """`attribution.dimensions.team.default: no-team` left every unplaced line on `no-team`, which
    the rule (looking for `unallocated`) never counted: 8.8% of spend with no team, no finding."""
    lake = lake_with(tmp_path, "10")
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake),
                           "attribution": {"dimensions": {"team": {"tags": ["team"], "default": "No-Team"}}},
                           "rules": {"unallocated-spend": {"dimensions": ["team"]}}})
    [team] = run_rules(config, only=["unallocated-spend"], now=NOW).result.seen
    assert (team.resource_id, team.evidence["unallocated_usd"], team.evidence["total_usd"]) == \
        ("unallocated:team", "70.00", "791.00")
    # the finding has no owner, named as the other unowned findings are: the team default, not `unallocated`
    assert (team.team, team.project) == ("No-Team", "unallocated")


def test_below_the_threshold_or_aliased_there_is_no_finding(tmp_path):
    lake = lake_with(tmp_path, "4")  # 28 of 749 = 3.7% unallocated on team
    seen = run_rules(config_for(lake, dimensions=["team"]), only=["unallocated-spend"], now=NOW).result.seen
    assert seen == []
    lake = lake_with(tmp_path / "aliased", "10")
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": {"dimensions": {"team": {"tags": ["team", "owner"]}}},
                           "rules": {"unallocated-spend": {"dimensions": ["team"]}}})
    assert run_rules(config, only=["unallocated-spend"], now=NOW).result.seen == []  # Owner now names the team


def test_spend_a_shared_rule_splits_over_the_dimension_is_not_unallocated(tmp_path):
    """Rules read direct spend (service/attribution/lines.py): lines the config shares out over
    team are left out of team's series and keep their own value on the other dimensions."""
    lake = lake_with(tmp_path, "10")
    config = parse_config({
        "lake": str(lake.root),
        "attribution": {"dimensions": {"team": {"tags": ["team"]}, "project": {"tags": ["project"]}},
                        "shared": [{"match": {"service": "Amazon S3"}, "split": "proportional", "by": "team"}]},
        "rules": {"unallocated-spend": {"dimensions": ["team", "project"]}}})
    window = Window(NOW - timedelta(days=7), NOW)
    assert {r.values["team"] for r in attribute(lake, config, window).rows} == {"vision", "nlp"}
    found = {f.resource_id: f for f in run_rules(config, only=["unallocated-spend"], now=NOW).result.seen}
    assert "unallocated:team" not in found
    project = found["unallocated:project"]  # the S3 lines have no project, shared or not
    assert (project.evidence["unallocated_usd"], project.evidence["total_usd"]) == ("91.00", "791.00")


def test_61_direct_daily_spend_keeps_project_and_experiment_only_where_a_plan_names_them(tmp_path):
    """A million experiments must not become a million rows per day held in Python: rules read
    experiments and projects only to take planned runs out (RELIABILITY 61, the service's RSS)."""
    from rules.context import PlannedWindow
    from service.attribution import direct_daily_lookup

    lines = [day_line(1, "1", tags={"team": "nlp", "project": project, "experiment": f"exp-{n}"})
             for project in ("llm", "rl") for n in range(50)]
    lake = make_lake(tmp_path, lines)
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake)})
    since, until = datetime(2026, 11, 1), datetime(2026, 11, 21)
    plain = direct_daily_lookup(lake, config)("team", since, until)
    assert [(r.value, r.project, r.experiment, r.cost) for r in plain] == [("nlp", "", "", Decimal(100))]
    plans = [PlannedWindow("sweep", "LLM", "Exp-7", since, until, Decimal(1000)),
             PlannedWindow("rl-all", "rl", None, since, until, Decimal(1000))]
    planned = direct_daily_lookup(lake, config, plans)("team", since, until)
    assert sorted((r.project, r.experiment, r.cost) for r in planned) == [
        ("llm", "", Decimal(49)), ("llm", "exp-7", Decimal(1)), ("rl", "", Decimal(50))]



def test_direct_daily_spend_comes_back_grouped_only_by_what_the_rule_asks_for(tmp_path):
    """unallocated-spend read a row per day, resource and tag-key list of the window (528k at 10M
    lines, 2.2 GB) to sum it over the window; `by` names the fields a rule reads, the others
    come back None and group nothing, with the same sums."""
    from service.attribution import direct_daily_lookup

    lines = [day_line(n, "2", resource=f"i-{k}", tags={"team": "nlp", f"owner-{k}": "x"})
             for n in (1, 2, 3) for k in (1, 2)]
    lake = make_lake(tmp_path, lines)
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake)})
    daily = direct_daily_lookup(lake, config)
    since, until = datetime(2026, 11, 1), datetime(2026, 11, 21)
    assert len(daily("team", since, until)) == 6
    by_resource = daily("team", since, until, ("resource",))
    assert sorted((r.resource, r.day, r.service, r.uncovered_tag_keys, r.cost) for r in by_resource) == [
        ("i-1", None, None, (), Decimal(6)), ("i-2", None, None, (), Decimal(6))]
    (by_day_keys,) = {(r.resource, r.day) for r in daily("team", since, until, ("day", "uncovered_tag_keys"))
                      if r.uncovered_tag_keys == ("owner-1",) and r.day == TODAY - timedelta(1)}
    assert by_day_keys == (None, TODAY - timedelta(1))


def test_direct_daily_spend_holds_only_its_last_querys_answers(tmp_path, monkeypatch):
    """The lookup kept every answer for the whole `rules run`: spend-anomaly's rows by resource and
    day (~500k at 10M lines) stayed held while unallocated-spend attributed the window again,
    its DuckDB memory on top (1,354 MB peak). No rule reads another's fields and window: a call
    that queries drops the earlier answers; a call repeating the last one is still answered
    from them."""
    from service.attribution import lines as lines_module

    lake = make_lake(tmp_path, [day_line(n, "2", resource=f"i-{n}", tags={"team": "nlp"}) for n in (1, 2)])
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake)})
    queried = []
    query = lines_module._query

    def counted(*args):
        queried.append(args[-2])  # the fields summed by (before the snapshot)
        return query(*args)

    monkeypatch.setattr(lines_module, "_query", counted)
    daily = lines_module.direct_daily_lookup(lake, config)
    since, until = datetime(2026, 11, 1), datetime(2026, 11, 21)
    by_day = sorted((r.day, r.cost) for r in daily("team", since, until, ("day",)))  # a group-by's rows, in no order
    assert sorted((r.day, r.cost) for r in daily("team", since, until, ("day",))) == by_day and len(queried) == 1
    assert sorted((r.resource, r.cost) for r in daily("team", since, until, ("resource",))) == [
        ("i-1", Decimal(2)), ("i-2", Decimal(2))]
    assert sorted((r.day, r.cost) for r in daily("team", since, until, ("day",))) == by_day
    assert queried == [("day",), ("resource",), ("day",)]


def test_direct_daily_spend_attributes_the_window_within_a_readers_memory(tmp_path, monkeypatch):
    """The window's lines are attributed and allocated in memory as `attribute` does from raw lines,
    which spills beyond READER_MEMORY_LIMIT; the rules' lookup had no limit (DuckDB held 1.2 GB of
    the 10M-line month for one dimension, the `rules run` process 2.1 GB), then the writer's 600 MB
    (1,308 MB: spend-anomaly's query over what the rules before it left in the process)."""
    from service.attribution import direct_daily_lookup

    lake = make_lake(tmp_path, [day_line(1, "2", tags={"team": "nlp"})])
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake)})
    limits = query_memory_limits(monkeypatch)
    direct_daily_lookup(lake, config)("team", datetime(2026, 11, 1), datetime(2026, 11, 21))
    assert limits and set(limits) == {readers_memory_limit()}


def test_direct_daily_spend_keeps_one_copy_of_each_name_its_rows_repeat(tmp_path):
    """DuckDB returns each row's own copy of a service's, an account's or a value's name: at 10M lines
    spend-anomaly's half a million rows held them all (1.1 GB peak RSS with the fetched rows)."""
    from service.attribution import direct_daily_lookup

    lake = make_lake(tmp_path, [day_line(n, "2", resource=f"i-{n}", tags={"team": "nlp"}) for n in (1, 2, 3)])
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake)})
    rows = direct_daily_lookup(lake, config)("team", datetime(2026, 11, 1), datetime(2026, 11, 21))
    assert len(rows) == 3
    for field in ("value", "service", "account", "region", "charge_category", "currency"):
        assert len({id(getattr(row, field)) for row in rows}) == 1, field

def test_a_rule_dimension_no_attribution_declares_is_a_config_error_naming_its_path():
    """`unallocated-spend.dimensions: [teem]` passed the config and failed every run: exit 3 with a
    traceback and `rules.*.dimension`; now the config check names the rule's own dotted path."""
    attribution = {"dimensions": {"team": {"tags": ["team"]}, "project": {"tags": ["project"]}}}
    for rules, path in (({"unallocated-spend": {"dimensions": ["team", "Team"]}}, "rules.unallocated-spend.dimensions[1]"),
                        ({"spend-anomaly": {"dimension": "projekt"}}, "rules.spend-anomaly.dimension")):
        with pytest.raises(ConfigError) as error:
            parse_config({"attribution": attribution, "rules": rules})
        assert f"{path}: unknown dimension" in str(error.value) and "declared: team, project" in str(error.value)
    assert parse_config({"attribution": attribution, "rules": {"unallocated-spend": {"dimensions": ["project"]}}})


def test_unallocated_spend_attributes_the_window_once_for_all_its_dimensions(tmp_path, monkeypatch):
    """unallocated-spend attributed (with `clusters:`, allocated) the window once per dimension: two
    by default, 7-10 CPU s each at 10M lines. The first call sums every dimension of `along` in one
    pass; each dimension's rows are those of a lookup of it alone."""
    import service.attribution.lines as lines
    from service.attribution import direct_daily_lookup

    lake = lake_with(tmp_path, "10")
    config = config_for(lake)
    passes = []
    attributed = lines.attributed_sql
    monkeypatch.setattr(lines, "attributed_sql", lambda *a, **k: passes.append(1) or attributed(*a, **k))
    found = {f.resource_id for f in run_rules(config, only=["unallocated-spend"], now=NOW).result.seen}
    assert found == {"unallocated:team", "unallocated:project"} and len(passes) == 1
    since, until = datetime(2026, 11, 13), datetime(2026, 11, 20)
    both = direct_daily_lookup(lake, config)
    together = {d: both(d, since, until, ("resource",), along=("team", "project")) for d in ("team", "project")}
    assert len(passes) == 2  # the second dimension came from the first call's pass
    for dimension in ("team", "project"):
        alone = direct_daily_lookup(lake, config)(dimension, since, until, ("resource",))
        assert sorted(map(repr, together[dimension])) == sorted(map(repr, alone)) and alone


def test_the_finding_says_which_lines_it_leaves_out_that_attribute_counts(tmp_path):
    """On the demo lake the team finding said $72,946.39 while `attribute --since 7d` showed $86,722.64
    unallocated, with nothing saying why: the rule leaves out a Savings Plan's recurring fee (a
    Purchase, $16,692.48) and the window's share of monthly credits (-$2,916.23), which attribute
    counts. The finding now names what it leaves out, so the two figures can be tied."""
    lines = []
    for n in range(1, 8):
        lines.append(day_line(n, "100", tags={"team": "vision"}, resource="i-1"))
        lines.append(day_line(n, "10", tags={"Owner": "alice"}, service="Amazon S3", resource="bucket-x"))
        lines.append(day_line(n, "-50", category="Credit", service="Amazon S3"))
        lines.append(day_line(n, "20", category="Purchase", service="Savings Plans"))  # no tags: no team
    lake = make_lake(tmp_path, lines)
    config = config_for(lake, dimensions=["team"])
    [team] = run_rules(config, only=["unallocated-spend"], now=NOW).result.seen
    window = Window(NOW - timedelta(days=7), NOW)
    attributed = sum(r.cost for r in attribute(lake, config, window).rows if r.values["team"] == "unallocated")
    # attribute: the S3 lines (70), the fee (140) and the credits (-350); the rule: the S3 lines only
    assert (attributed, team.evidence["unallocated_usd"]) == (Decimal(70 + 140 - 350), "70.00")
    assert team.evidence["not_counted"] == [
        "charge categories Credit (save SavingsPlanNegation lines, which net the usage they cover on its values), Adjustment, Tax, Purchase",
        "line item types Credit, Refund, Tax, SavingsPlanUpfrontFee, RIFee",
        "other currencies than USD", "lines a shared-cost rule splits over team", "lines longer than a day"]
    assert team.summary.endswith(
        " Not counted, as `spendlake attribute` counts them: charge categories Credit (save SavingsPlanNegation lines, which net the usage they cover on its values), Adjustment, Tax, Purchase; "
        "line item types Credit, Refund, Tax, SavingsPlanUpfrontFee, RIFee; other currencies than USD; "
        "lines a shared-cost rule splits over team; lines longer than a day.")


def test_a_negation_nets_its_covered_usage_whatever_team_its_own_line_gets(tmp_path):
    """A CUR whose virtual-tag rule gives EC2 `charge_category: Usage` lines to pretrain: the covered
    instance's $500 went to pretrain, its SavingsPlanNegation (a Credit, untagged) to unallocated as
    -$500, so the untagged bucket's $600 showed as $100 of $700 (14.3%). The negation nets its own
    covered usage; attribute still places each line by its own tags and rules (the bill's $700)."""
    from service.ingest.billing import ingest
    from service.core.lake import Lake
    from tests.aws_exports import legacy_csv
    from tests.aws_exports import line as cur_line

    rows = [cur_line(cost="100", team="vision", lineItem__ResourceId="i-vision", identity__LineItemId="a"),
            cur_line(cost="600", lineItem__ProductCode="AmazonS3", product__ProductName="Amazon S3",
                     lineItem__ResourceId="bucket-x", identity__LineItemId="b"),
            cur_line(cost="500", kind="SavingsPlanCoveredUsage", savingsPlan__SavingsPlanEffectiveCost="300"),
            cur_line(cost="-500", kind="SavingsPlanNegation")]  # both on i-0abc, 2026-10-02 03:00
    (tmp_path / "cur.csv").write_bytes(legacy_csv(rows))
    ec2_usage = {"charge_category": "Usage", "service": "Amazon Elastic Compute Cloud"}
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "cur", "kind": "aws-cur", "location": str(tmp_path / "cur.csv")}],
                           "attribution": {"dimensions": {"team": {"tags": ["team"], "rules": [
                               {"match": ec2_usage, "value": "pretrain"}]}}},
                           "rules": {"unallocated-spend": {"dimensions": ["team"]}}})
    assert [o.status for o in ingest(config).outcomes] == ["committed"]
    [team] = run_rules(config, only=["unallocated-spend"], now=datetime(2026, 10, 3, tzinfo=timezone.utc)).result.seen
    assert (team.evidence["unallocated_usd"], team.evidence["total_usd"], team.evidence["unallocated_pct"]) == \
        ("600.00", "700.00", "85.7")
    assert team.evidence["top_accounts"] == [{"value": "000123456789", "cost_usd": "600.00"}]
    window = Window(datetime(2026, 10, 1), datetime(2026, 10, 3))
    placed = {r.values["team"]: r.cost for r in attribute(Lake(config.lake), config, window).rows}
    assert placed == {"pretrain": 500, "unallocated": 600 - 500, "vision": 100}


def test_what_a_negation_leaves_of_its_covered_usage_stays_on_the_usages_values_in_proportion():
    """A CUR's negation ties its covered usage to 0; where the rows tell less (-$90 against $100 of
    one instance, on two teams 3:1), the $10 left stays on the usage's teams, 7.50 and 2.50."""
    from rules.context import DailySpend
    from rules.counted_spend import CountedSpendConfig

    def row(value, cost, kind, category="Usage"):
        return DailySpend(value, "", "", "EC2", "1", None, None, "i-1", category, kind, (), None, "USD", Decimal(cost))

    rows = [row("pretrain", "75", "SavingsPlanCoveredUsage"), row("nlp", "25", "SavingsPlanCoveredUsage"),
            row("unallocated", "-90", "SavingsPlanNegation", "Credit"), row("nlp", "3", "Usage")]
    counted = CountedSpendConfig().counted(rows, netted=True)
    assert sorted((r.value, r.line_item_type, r.cost) for r in counted) == [
        ("nlp", "SavingsPlanCoveredUsage", Decimal("2.5")), ("nlp", "Usage", Decimal(3)),
        ("pretrain", "SavingsPlanCoveredUsage", Decimal("7.5"))]


def test_a_clusters_idle_and_its_unlabelled_jobs_are_named_as_such_not_as_tag_keys_no_alias_reads(tmp_path):
    """break51b: on a cluster's nodes (tagged slurm-node and cluster) the idle hours, no job's, have no project by
    nature, and the finding blamed 'tag keys no alias reads: slurm-node', a fix that places nothing; nor does it
    for a job's part, which takes the job's values. p5's i-a ($80 an hour) ran llm's job from 10:00 to 11:00 and
    nothing after: its $80 of idle is named as cluster p5's idle; i-b ran a job carrying no project from 10:00 to
    11:00: its $80 is named as jobs to label; the untagged bucket's Owner key is still named, as the cause it is."""
    from tests.test_clusters_allocation import gpu_line, job, setup
    from tests.test_runs import whole_config

    lines = [gpu_line("i-a", start=s, **{"slurm-node": "n1"}) for s in ("2026-11-02T10:00:00", "2026-11-02T11:00:00")]
    lines.append(gpu_line("i-b", **{"slurm-node": "n2"}))
    lines.append(line("2026-11-02 10:00:00", "20", tags={"Owner": "alice"}, service="Amazon S3", resource="bucket-x"))
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], project="llm"),
            job("2", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-b"], team="nlp")]
    lake, _ = setup(tmp_path, lines, jobs)
    config = parse_config({**whole_config(tmp_path, lake), "rules": {"unallocated-spend": {"dimensions": ["project"]}}})
    [finding] = run_rules(config, only=["unallocated-spend"], dry_run=True).result.seen
    assert (finding.evidence["unallocated_usd"], finding.evidence["total_usd"]) == ("180.00", "260.00")
    assert finding.evidence["idle_clusters"] == [{"value": "p5", "cost_usd": "80.00"}]
    assert finding.evidence["unlabelled_jobs_usd"] == "80.00"
    assert finding.evidence["uncovered_tag_keys"] == [{"key": "Owner", "cost_usd": "20.00"}]
    assert ("; of it cluster p5's idle ($80.00): GPU hours no job used, which no tag places; $80.00 on cluster jobs "
            "that carry no project: label the jobs (the scheduler's comment or the pod's label it reads, or a rule of "
            "attribution.dimensions.project); tag keys no alias reads: Owner.") in finding.summary, finding.summary
