"""Differential: `attribute --where D=X` from raw lines narrowed to the lines that can hold X
(rollup.py `narrowed_to`) gives what every line gives, what the stored rollups give, and the
rollup of lines summed before their dimensions are computed (sql.py `_grouped_steps`) is the
line-by-line one. Small seeded lakes with hostile variety: tags differing in case, spaces or
key spelling, empty tags, aliases, rules (regex, account, service, region, another dimension)
whose values or defaults spell a tag's value otherwise, shared rules, inventory tags, clusters
with jobs, credits, two currencies, lines spanning billing periods."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from service.attribution import attribute, materialise, reconcile
from service.attribution import rollup as rollup_module
from service.attribution import sql as sql_module
from service.attribution.compute import ROLLUP_VIEW, RollupSession
from service.attribution.needs import Needs
from service.core.timewindow import Window
from tests.attribution_helpers import add_jobs, config, line, make_lake
from tests.test_clusters_narrowed import lines_and_jobs

WINDOW = Window(datetime(2026, 10, 20, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
TEAM_TAGS = [{"team": "NLP"}, {"team": " nlp "}, {"Team": "nlp"}, {"owner": "Vision"}, {"team": ""}, {"team": "  "},
             {"team": "vision", "owner": "NLP"}, {"user:team": "Nlp"}, {"TEAM": "vision "}, {"team": "Unowned"},
             {"team": "data"}, {"team": "\tvision"}, {"team": "Istanbul"}, {"owner": "ΣΑΣ"},
             {"team": "nlp", "Team": "Vision"}, {}, {}, {}]
PROJECT_TAGS = [{"project": "Alpha"}, {"project": "alpha "}, {"project": ""}, {}, {}]
RESOURCES = ["", "i-0aaa", "db-prod-1", "bucket-x", "arn:aws:ec2:us-east-1:111111111111:instance/i-0bbb"]
SERVICES = ["Amazon Elastic Compute Cloud", "AWS Support", "Amazon Simple Storage Service"]

DIMENSIONS = {
    "team": {"tags": ["team", "owner"], "default": "Unowned", "rules": [
        {"match": {"resource_id": "^db-"}, "value": "Data"},
        {"match": {"account": "222222222222"}, "value": "NLP"},  # a tag's value, spelled otherwise
        {"match": {"region": "us-west-2", "service": "Amazon Simple Storage Service"}, "value": "storage "},
        {"match": {"service": "AWS Support", "account": "111111111111"}, "value": "İSTANBUL"}]},  # SQL: istanbul
    "env": {"rules": [{"match": {"region": "us-west-2"}, "value": "West"},
                      {"match": {"service": "AWS Support"}, "value": "west"},
                      {"match": {"charge_category": "credit"}, "value": "Refunds"},
                      {"match": {"usage_type": "BoxUsage"}, "value": "boxes"}], "default": "east"},
    "cc": {"rules": [{"match": {"team": "nlp"}, "value": "research"}], "default": "Research"},
    "site": {"rules": [{"match": {"region": "us-west-2"}, "value": "Istanbul"},
                       {"match": {"team": "σας"}, "value": "ΣΑΣ"}], "default": "İSTANBUL"},
}
SHARED = [{"match": {"service": "AWS Support"}, "split": "proportional", "by": "team"},
          {"match": {"service": "Amazon Simple Storage Service", "region": "us-west-2"}, "split": "even",
           "by": "project"}]


def hostile_lines(seed: int, count: int = 70) -> list[dict]:
    rng = random.Random(seed)
    lines = []
    for n in range(count):
        day, hour = rng.randint(1, 28), rng.randint(0, 23)
        start, end = f"2026-11-{day:02d}T{hour:02d}:00:00", None
        if n % 9 == 0:  # spans October and November (billed in October)
            start, end = f"2026-10-31T{hour:02d}:00:00", f"2026-11-01T{hour:02d}:30:00"
        elif n % 7 == 0:  # a day long
            end = f"2026-11-{day + 1:02d}T{hour:02d}:00:00"
        cost = Decimal(rng.randint(-500, 3000)) / Decimal(rng.choice([1, 100, 10000]))
        lines.append(line(start, str(cost), end=end, currency=rng.choice(["USD", "USD", "EUR"]),
                          tags={**rng.choice(TEAM_TAGS), **rng.choice(PROJECT_TAGS)},
                          account=rng.choice(["111111111111", "222222222222"]), service=rng.choice(SERVICES),
                          resource=rng.choice(RESOURCES), region=rng.choice(["us-east-1", "us-west-2"]),
                          category="Credit" if cost < 0 else "Usage", usage_type=rng.choice(["", "BoxUsage"])))
    # always: a tag and a rule's value SQL lowercases alike (Istanbul, İSTANBUL), team vision
    # where site is the rule's `Istanbul` and the default `İSTANBUL`
    fixed = [line("2026-11-05T00:00:00", "2.5", tags={"team": "Istanbul"}),
             line("2026-11-05T01:00:00", "4", service="AWS Support"),
             *(line(f"2026-11-05T0{h}:00:00", "1", region="us-west-2", tags={"team": "vision"}) for h in (2, 3))]
    return [*lines, *fixed]


def answers(lake, cfg, queries) -> list:
    out = []
    for by, where, kwargs in queries:
        result = attribute(lake, cfg, WINDOW, by=by, where=where, **kwargs)
        out.append((by, where, kwargs, result.to_json(), result.unmatched))
    return out


def rollup_rows(lake, cfg) -> list:
    session = RollupSession(lake, cfg.attribution, needs=Needs())
    try:
        rows = session.con.execute(f"SELECT * FROM {ROLLUP_VIEW}").fetchall()
    finally:
        session.con.close()
    return sorted(rows, key=repr)


def line_by_line(monkeypatch) -> None:
    """The rollup SQL computing every line's dimensions, not their groups' (before 028015e):
    each line counts 1 in `a_lines`."""
    original = sql_module.attributed_sql

    def ungrouped(*args, **kwargs):
        sql = original(*args, **{**kwargs, "grouped": False})
        assert sql.text.count("AS shared FROM") == 1
        return replace(sql, text=sql.text.replace("AS shared FROM", "AS shared, 1 AS a_lines FROM"))
    monkeypatch.setattr(sql_module, "attributed_sql", ungrouped)


def check(tmp_path, lake, cfg, queries, narrowed_at_least: int) -> None:
    narrowed = []
    original = rollup_module.narrowed_to

    def spy(*args):
        narrow = original(*args)
        narrowed.append(narrow)
        return narrow
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rollup_module, "narrowed_to", spy)
        fast = answers(lake, cfg, queries)
    assert sum(n is not None for n in narrowed) >= narrowed_at_least  # the optimisation was exercised
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rollup_module, "narrowed_to", lambda *a: None)
        every_line = answers(lake, cfg, queries)
    with pytest.MonkeyPatch.context() as mp:
        line_by_line(mp)
        ungrouped = answers(lake, cfg, queries)
        ungrouped_rollup = rollup_rows(lake, cfg)
    assert rollup_rows(lake, cfg) == ungrouped_rollup
    materialise(lake, cfg)
    stored = answers(lake, cfg, queries)
    for a, b, c, d in zip(fast, every_line, ungrouped, stored):
        assert a == b, ("narrowed", a[:3])
        assert a == c, ("ungrouped", a[:3])
        assert a == d, ("stored", a[:3])
    assert all(r.ok for r in reconcile(lake, cfg))


def sampled(seed: int, count: int, wheres, bys, kwargs=({},)) -> list:
    """`count` (by, where, options) of the product, the same for a seed."""
    every = [(by, where, options) for where in wheres for by in bys for options in kwargs]
    return random.Random(seed).sample(every, min(count, len(every)))


TEAM_WHERES = [{"team": (v,)} for v in ("vision", "VISION", " Vision ", "nlp", "Nlp", "unowned", "data", "storage",
                                       "ghost", "visio", "unallocated", "istanbul", "İSTANBUL", "σας")] + [
    {"team": ("vision", "nlp")}, {"team": ("vision", "ghost")}, {"project": ("alpha",)}, {"project": ("Misc",)},
    {"env": ("West",)}, {"env": ("wset",)}, {"cc": ("research",)}, {"cc": ("reserch",)}]
BYS = [("env",), ("cc",), ("env", "cc"), ("team",), ("project", "env"), ("experiment",), ("cc", "team"), ("site",)]
OPTIONS = ({}, {"explain": True, "granularity": "day"}, {"compare": True}, {"top": 1}, {"cost": "effective"})
# what the fast lane asks: narrowed with constants spelled like the shown ones, a typo, the
# default, a rule's value spelled as a tag's, several values, a dimension with rules only
CORE = [(("env", "cc"), {"team": ("vision",)}, {}), (("cc",), {"team": (" Vision ",)}, {"explain": True}),
        (("env",), {"team": ("visio",)}, {}), (("team",), {"team": ("unowned",)}, {}),
        (("cc",), {"team": ("Nlp",)}, {}), (("env",), {"team": ("vision", "ghost")}, {}),
        (("experiment",), {"env": ("wset",)}, {}), (("team",), {"project": ("alpha",)}, {"compare": True}),
        (("env", "cc"), {"project": ("ALPHA",)}, {"granularity": "day"}), (("cc",), {"cc": ("reserch",)}, {}),
        (("site",), {"team": ("vision",)}, {}), (("site", "env"), {"team": ("istanbul",)}, {}),
        (("site",), {"team": ("σας",)}, {})]


def rules_lake(tmp_path, seed: int):
    # a second source whose lines carry no project tag: its period is narrowed where the first's is not
    untagged = [{**item, "tags": {k: v for k, v in item["tags"].items() if k != "project"}}
                for item in hostile_lines(seed + 100, 25)]
    make_lake(tmp_path, untagged, source="azure", delivery="a1")
    lake = make_lake(tmp_path, hostile_lines(seed))
    return lake, config({"dimensions": {**DIMENSIONS, "project": {"default": "Misc"}}}, lake)


def test_rules_and_defaults_narrowed_stored_and_grouped_agree(tmp_path):
    lake, cfg = rules_lake(tmp_path, 1)
    check(tmp_path, lake, cfg, CORE, 5)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_many_queries_narrowed_stored_and_grouped_agree(tmp_path, seed):
    lake, cfg = rules_lake(tmp_path, seed)
    check(tmp_path, lake, cfg, sampled(seed, 60, TEAM_WHERES, BYS, OPTIONS), 10)


def test_shared_rules_stored_and_grouped_agree(tmp_path):
    lake = make_lake(tmp_path, hostile_lines(5))
    cfg = config({"dimensions": DIMENSIONS, "shared": SHARED}, lake)
    check(tmp_path, lake, cfg, sampled(5, 6, TEAM_WHERES, BYS, OPTIONS), 0)


def test_clusters_with_jobs_narrowed_stored_and_grouped_agree(tmp_path):
    inside, jobs = lines_and_jobs()
    rng = random.Random(4)
    extra = [line(f"2026-11-0{d}T0{h}:00:00", str(rng.randint(-3, 9)), resource=rng.choice(RESOURCES),
                  currency=rng.choice(["USD", "EUR"]),
                  tags={"cluster": rng.choice(["p5", "P5 ", "gpu-east", "", "idle"]), **rng.choice(TEAM_TAGS)})
             for d in range(1, 6) for h in range(4)]
    lake = make_lake(tmp_path, [*inside, *extra])
    add_jobs(lake, jobs)
    cfg = config({"clusters": {"cluster_tag": "cluster"},
                  "dimensions": {**DIMENSIONS, "run": {"tags": ["run"], "default": "Unassigned"},
                                 "user": {"rules": [{"match": {"job_name": "^train"}, "value": "Trainer"}],
                                          "default": "trainer"}}}, lake)
    wheres = [{"cluster": (v,)} for v in ("p5", "P5", "gpu-east", "ghost", "idle", "unallocated")] + [
        {"run": ("unassigned",)}, {"run": ("idle",)}, {"team": ("vision",)}]
    check(tmp_path, lake, cfg, sampled(6, 8, wheres, [("run",), ("job_type",), ("user", "run"), ("env", "cc")],
                                       OPTIONS), 3)


def test_inventory_tags_narrowed_stored_and_grouped_agree(tmp_path):
    from tests.test_inventory_attribution import ARN, snapshot_tags, tags

    lake, cfg = rules_lake(tmp_path, 7)
    snapshot_tags(tmp_path, lake, [
        {"ResourceARN": f"{ARN}i-0aaa", "Tags": tags(team="Vision", project="beta")},
        {"ResourceARN": f"{ARN}i-0bbb", "Tags": tags(Team="NLP ")},  # the bill names it by ARN
        {"ResourceARN": "arn:aws:s3:::bucket-x", "Tags": tags(owner="vision ")},
        {"ResourceARN": f"{ARN}db-prod-1", "Tags": tags(team="")}], day=20)
    assert "inventory-tag:owner" in str(attribute(lake, cfg, WINDOW, by=("team",), explain=True).to_json())
    wheres = [{"team": (v,)} for v in ("vision", "nlp", "NLP", "istanbul", "ghost")] + [{"project": ("beta",)}]
    check(tmp_path, lake, cfg, sampled(7, 10, wheres, [("env",), ("site",), ("project",), ("cc", "team")], OPTIONS),
          3)
