"""Attribution with hand-computed expectations (issue 3, item 5)."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest

from service.attribution.api import attribute
from service.attribution.reconciliation import reconcile
from service.attribution.resources import attribute_resources
from service.attribution.compute import split_exactly
from service.attribution.tag_keys import normalise_key
from service.core.timewindow import Window
from tests.attribution_helpers import config, line, make_lake

NOV = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def costs(result, *dims) -> dict:
    """{(dim values..., currency): cost} from a result's JSON contract."""
    return {tuple(row[d] for d in dims) + (row["currency"],): Decimal(row["cost"])
            for row in result.to_json()["rows"]}


@pytest.mark.parametrize("key", ["team", "Team", "TEAM", "owner_team", "owner-team", "user:team", "user_team",
                                 "resource_tags_user_team", " team", "user:Owner-Team"])
def test_tag_keys_normalise_case_and_separator_insensitively(key):
    assert normalise_key(key) in ("team", "ownerteam")


def test_aliases_collisions_empty_values_and_untagged(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-11-02 00:00", "10", tags={"Team": "NLP", "owner-team": "vision"}),  # first alias wins
        line("2026-11-02 01:00", "4", tags={"team": "  ", "owner_team": "vision"}),  # empty = absent
        line("2026-11-02 02:00", "2", tags={"user:team": "nlp "}),  # CUR-style key, padded value
        line("2026-11-02 03:00", "1", tags={"Team": "", "team": "Nlp"}),  # same alias twice: the non-empty one
        line("2026-11-02 04:00", "3"),  # untagged
        line("2026-11-02 05:00", "5", tags={"project": "x"}),  # tagged, but not with a team key
    ])
    cfg = config({"dimensions": {"team": {"tags": ["team", "owner-team"]}}})
    result = attribute(lake, cfg, NOV, by=["team"])
    # nlp: 10 + 2 + 1, most common spelling of nlp/NLP/Nlp: "nlp" (one line each, byte order: "NLP")
    assert costs(result, "team") == {("NLP", "USD"): Decimal(13), ("vision", "USD"): Decimal(4),
                                     ("unallocated", "USD"): Decimal(8)}
    assert result.to_json()["totals"] == [{"currency": "USD", "cost": "25.000000000000"}]


def test_rules_first_match_wins_and_can_read_another_dimension(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-11-02 00:00", "7", account="111122223333"),
        line("2026-11-02 00:00", "5", resource="arn:aws:s3:::ckpt-run1", service="Amazon Simple Storage Service"),
        line("2026-11-02 00:00", "3", resource="arn:aws:s3:::ckpt-run2", service="Amazon EC2"),
        line("2026-11-02 00:00", "2", tags={"project": "Llama"}),
        line("2026-11-02 00:00", "1", tags={"team": "ops"}, account="111122223333"),  # the tag beats the rule
    ])
    cfg = config({"dimensions": {
        "team": {"rules": [
            {"match": {"account": "111122223333"}, "value": "research"},
            {"match": {"resource_id": "^arn:aws:s3:::ckpt-", "service": "Amazon Simple Storage Service"},
             "value": "pretrain"},
            {"match": {"project": "llama"}, "value": "LLM"},
        ]},
    }})
    result = attribute(lake, cfg, NOV, by=["team"], explain=True)
    assert costs(result, "team") == {("research", "USD"): Decimal(7), ("pretrain", "USD"): Decimal(5),
                                     ("unallocated", "USD"): Decimal(3), ("LLM", "USD"): Decimal(2),
                                     ("ops", "USD"): Decimal(1)}
    explained = {row["team"]: row["explain"] for row in result.to_json()["rows"]}
    assert explained["pretrain"] == [{"dimension": "team", "cost": "5.000000000000", "how":
                                      "rule:1 (resource_id=^arn:aws:s3:::ckpt-, service=Amazon Simple Storage Service)"}]
    assert explained["ops"][0]["how"] == "tag:team"


def test_resource_tagged_part_of_the_month_and_negative_lines(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-11-01 00:00", "6", resource="i-1", end="2026-11-02 00:00"),  # untagged on day 1
        line("2026-11-02 00:00", "6", resource="i-1", end="2026-11-03 00:00", tags={"team": "nlp"}),
        line("2026-11-02 00:00", "-2.5", resource="i-1", end="2026-11-03 00:00", tags={"team": "nlp"},
             category="Credit"),
        line("2026-11-03 00:00", "-1", resource="sp", category="Usage", tags={"team": "nlp"}),  # SP negation
        line("2026-11-10 00:00", "-0.75", category="Adjustment"),  # refund, untagged
    ])
    cfg = config()
    result = attribute(lake, cfg, NOV, by=["team"])
    assert costs(result, "team") == {("nlp", "USD"): Decimal("2.5"), ("unallocated", "USD"): Decimal("5.25")}
    assert attribute_resources(lake, cfg, ["i-1"]) == {"i-1": {"team": "nlp", "project": "unallocated",
                                                               "experiment": "unallocated"}}


def test_currencies_are_never_summed(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-11-02 00:00", "10", tags={"team": "nlp"}),
        line("2026-11-02 00:00", "20", currency="EUR", tags={"team": "nlp"}),
        line("2026-11-02 00:00", "1", currency="EUR", category="Tax"),
    ])
    cfg = config({"shared": [{"match": {"charge_category": "Tax"}, "split": "even"}]})
    result = attribute(lake, cfg, NOV, by=["team"])
    assert costs(result, "team") == {("nlp", "USD"): Decimal(10), ("nlp", "EUR"): Decimal(21)}
    assert result.to_json()["totals"] == [{"currency": "EUR", "cost": "21.000000000000"},
                                          {"currency": "USD", "cost": "10.000000000000"}]


def test_split_exactly_gives_the_remainder_to_the_largest_share():
    parts = split_exactly(Decimal("0.000000000010"), {"a": Decimal(1), "b": Decimal(1), "c": Decimal(1)})
    assert sum(parts.values()) == Decimal("0.000000000010")
    assert parts == {"a": Decimal("0.000000000004"), "b": Decimal("0.000000000003"), "c": Decimal("0.000000000003")}
    parts = split_exactly(Decimal("100"), {"x": Decimal(2), "y": Decimal(1)})
    assert parts == {"x": Decimal("66.666666666667"), "y": Decimal("33.333333333333")}


@pytest.mark.parametrize("split, extra, expected", [
    # 1.00 over nlp (7) and cv (3); ops has only credits, `unallocated` takes no share
    ("even", {}, {"nlp": "7.5", "cv": "3.5"}),
    ("proportional", {}, {"nlp": "7.7", "cv": "3.3"}),
    ("fixed", {"weights": {"nlp": 0.6, "cv": 0.3, "Research": 0.1}}, {"nlp": "7.6", "cv": "3.3", "Research": "0.1"}),
])
def test_shared_splits(tmp_path, split, extra, expected):
    lake = make_lake(tmp_path, [
        line("2026-11-02 00:00", "7", tags={"team": "nlp"}),
        line("2026-11-02 00:00", "3", tags={"team": "cv"}),
        line("2026-11-02 00:00", "-2", tags={"team": "ops"}),
        line("2026-11-02 00:00", "2"),
        line("2026-11-02 00:00", "1", service="AWS Support (Business)", tags={"team": "ops"}),
    ])
    cfg = config({"shared": [{"match": {"service": "AWS Support (Business)"}, "split": split, **extra}]})
    result = attribute(lake, cfg, NOV, by=["team"])
    want = {(k, "USD"): Decimal(v) for k, v in expected.items()}
    want.update({("ops", "USD"): Decimal(-2), ("unallocated", "USD"): Decimal(2)})
    assert costs(result, "team") == want


def test_awkward_fractions_lose_no_cent(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-11-02 00:00", "1", tags={"team": "a"}),
        line("2026-11-02 00:00", "1", tags={"team": "b"}),
        line("2026-11-02 00:00", "1", tags={"team": "c"}),
        line("2026-11-02 00:00", "0.000000000001", category="Tax"),
        line("2026-11-02 00:00", "100.01", category="Tax", currency="EUR"),
        line("2026-11-02 00:00", "7", tags={"team": "a"}, currency="EUR"),
        line("2026-11-02 00:00", "3", tags={"team": "b"}, currency="EUR"),
    ])
    cfg = config({"shared": [{"match": {"charge_category": "tax"}, "split": "proportional"}]})
    result = attribute(lake, cfg, NOV, by=["team"])
    got = costs(result, "team")
    # USD: 1e-12 over three equal shares: all of it to the first in byte order
    assert got[("a", "USD")] == Decimal("1.000000000001") and got[("b", "USD")] == 1 and got[("c", "USD")] == 1
    # EUR: 100.01 × 7/10 = 70.007, × 3/10 = 30.003
    assert got[("a", "EUR")] == Decimal("77.007") and got[("b", "EUR")] == Decimal("33.003")
    assert all(r.ok for r in reconcile(lake, cfg))


def test_windows_cut_a_charge_period_and_prorate_it(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-11-02 00:00", "24", end="2026-11-03 00:00", tags={"team": "nlp"}),  # daily line
        line("2026-11-02 11:00", "1", tags={"team": "nlp"}),  # hourly line, cut at 11:20
        line("2026-11-02 13:00", "1", tags={"team": "cv"}),  # hourly line after the window
        line("2026-11-01 00:00", "30", end="2026-12-01 00:00", category="Tax"),  # monthly line
    ])
    window = Window(utc(2026, 11, 2, 6), utc(2026, 11, 2, 11, 20))
    result = attribute(lake, config(), window, by=["team"], granularity="day")
    # 24 × 5h20m/24h = 5.333333333333; 1 × 20/60 = 0.333333333333; 30 × 320 min / 43200 min = 0.222222222222
    assert costs(result, "team", "period") == {("nlp", "2026-11-02", "USD"): Decimal("5.666666666666"),
                                               ("unallocated", "2026-11-02", "USD"): Decimal("0.222222222222")}


def test_compare_across_a_month_boundary(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-10-31 12:00", "4", end="2026-11-01 12:00", tags={"team": "nlp"}),  # spans the boundary
        line("2026-10-30 00:00", "8", tags={"team": "nlp"}),
        line("2026-11-01 13:00", "3", tags={"team": "nlp"}),
        line("2026-11-02 00:00", "5", end="2026-11-03 00:00", tags={"team": "cv"}),  # the data runs to the window's end
    ])
    window = Window(utc(2026, 11, 1), utc(2026, 11, 3))
    result = attribute(lake, config(), window, by=["team"], compare=True)
    rows = {r["team"]: r for r in result.to_json()["rows"]}
    # current: nlp 2 (half of the 4) + 3; previous (Oct 30 - Nov 1): nlp 8 + 2
    assert Decimal(rows["nlp"]["cost"]) == 5 and Decimal(rows["nlp"]["previous_cost"]) == 10
    assert Decimal(rows["nlp"]["change"]) == -5 and rows["nlp"]["change_pct"] == "-50.00"
    assert Decimal(rows["cv"]["previous_cost"]) == 0 and rows["cv"]["change_pct"] is None


def test_reconciliation_holds_per_source_period_and_currency(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-10-15 00:00", "1e16", tags={"team": "a"}),
        line("2026-10-15 01:00", "1", tags={"team": "b"}),
        line("2026-10-15 02:00", "-1e16", tags={"team": "a"}),
        line("2026-11-15 00:00", "0.333333333333", category="Tax"),
        line("2026-11-15 00:00", "2", tags={"team": "b"}, currency="EUR"),
    ])
    cfg = config({"shared": [{"match": {"charge_category": "Tax"}, "split": "fixed",
                              "weights": {"a": 0.5, "b": 0.5}}]})
    checks = reconcile(lake, cfg)
    assert {(r.billing_period, r.currency, r.cost) for r in checks} == {
        (p, c, m) for p, c in [("2026-10", "USD"), ("2026-11", "USD"), ("2026-11", "EUR")]
        for m in ("billed", "effective", "list")}
    assert all(r.ok for r in checks)
    october = next(r for r in checks if r.billing_period == "2026-10" and r.cost == "billed")
    assert october.attributed_total == 1


def test_config_change_reattributes_history_without_reingest(tmp_path):
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "5", tags={"cost-center": "nlp"})])
    assert costs(attribute(lake, config(), NOV), "team") == {("unallocated", "USD"): Decimal(5)}
    cfg = config({"dimensions": {"team": {"tags": ["team", "cost_center"]}}})
    assert costs(attribute(lake, cfg, NOV), "team") == {("nlp", "USD"): Decimal(5)}


def test_empty_lake_has_no_rows(tmp_path):
    from service.core.lake import Lake

    result = attribute(Lake(tmp_path / "lake"), config(), NOV)
    assert result.lake_empty and result.to_json()["rows"] == [] and result.to_json()["totals"] == []


def test_queries_write_nothing_and_rollups_follow_the_delivery_and_the_config(tmp_path):
    from datetime import timedelta

    from service.attribution import materialise
    from service.core.lake import Lake
    from tests.attribution_helpers import relation

    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "5", tags={"team": "nlp"})])
    rollups = lake.root / "attribution_rollup"
    assert costs(attribute(lake, config(), NOV), "team") == {("nlp", "USD"): Decimal(5)}
    assert not rollups.exists()  # rolled up in memory: a query writes nothing
    assert materialise(lake, config()).built == 1
    first = sorted(rollups.rglob("*.parquet"))
    assert len(first) == 1
    con = Lake(lake.root).connect()  # a restated November: a new version, the old one kept for its grace
    lake.commit_costs(con, relation(con, [line("2026-11-02 00:00", "7", tags={"team": "nlp"})]),
                      source="cur", delivery_id="d2", periods=("2026-11",))
    assert costs(attribute(lake, config(), NOV), "team") == {("nlp", "USD"): Decimal(7)}
    assert materialise(lake, config()).built == 1 and len(list(rollups.rglob("*.parquet"))) == 2
    assert materialise(lake, config(), grace=timedelta(0)).removed == 1
    second = sorted(rollups.rglob("*.parquet"))
    assert len(second) == 1 and second != first
    other = config({"dimensions": {"team": {"default": "nobody"}}})
    assert costs(attribute(lake, other, NOV), "team") == {("nlp", "USD"): Decimal(7)}
    materialise(lake, other, grace=timedelta(0))  # another config's current version is not superseded
    third = sorted(rollups.rglob("*.parquet"))
    assert len(third) == 2 and second[0] in third and third[0].parent == second[0].parent
    assert "attribution_rollup" not in {r[0] for r in lake.query().execute("SHOW TABLES").fetchall()}


def test_a_clock_stepped_forward_during_an_ingest_removes_no_rollup_a_reader_may_hold(tmp_path):
    """A superseded rollup version goes after its grace, and only when an earlier build already
    found it superseded: the build right after a re-delivery, its clock stepped 2 hours forward
    (NTP, a VM resumed), keeps the version the readers that began before the commit hold; the
    next build removes it. A clock stepped back keeps it until the clock passes its commit."""
    from datetime import timedelta

    from service.attribution import materialise
    from service.core.lake import Lake
    from tests.attribution_helpers import relation

    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "5", tags={"team": "nlp"})])
    assert materialise(lake, config()).built == 1
    [held] = (lake.root / "attribution_rollup").rglob("*.parquet")
    con = Lake(lake.root).connect()  # a restated November
    lake.commit_costs(con, relation(con, [line("2026-11-02 00:00", "7", tags={"team": "nlp"})]),
                      source="cur", delivery_id="d2", periods=("2026-11",))
    ahead = datetime.now(timezone.utc) + timedelta(hours=2)
    assert materialise(lake, config(), now=ahead).removed == 0 and held.exists()
    assert costs(attribute(lake, config(), NOV), "team") == {("nlp", "USD"): Decimal(7)}
    assert materialise(lake, config(), now=ahead).removed == 1 and not held.exists()
    [held] = (lake.root / "attribution_rollup").rglob("*.parquet")
    lake.commit_costs(con, relation(con, [line("2026-11-02 00:00", "8", tags={"team": "nlp"})]),
                      source="cur", delivery_id="d3", periods=("2026-11",))
    behind = datetime.now(timezone.utc) - timedelta(hours=2)
    for _ in range(2):
        assert materialise(lake, config(), now=behind).removed == 0 and held.exists()
    assert materialise(lake, config(), grace=timedelta(0)).removed == 1 and not held.exists()


def test_a_rollup_superseded_by_a_delivery_stamped_ahead_goes_a_grace_after_it_was_found(tmp_path, monkeypatch):
    """A re-delivery committed by a clock 40 days ahead, set right before the build: the version
    it superseded was kept until the calendar reached that stamp plus the grace (40 days of a
    month's rollup on disk); a stamp after now counts as when a build first found it superseded."""
    from datetime import timedelta

    from service.attribution import materialise
    from service.core import commit
    from service.core.lake import Lake
    from tests.attribution_helpers import relation

    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "5", tags={"team": "nlp"})])
    assert materialise(lake, config()).built == 1
    [held] = (lake.root / "attribution_rollup").rglob("*.parquet")
    now = datetime.now(timezone.utc)
    monkeypatch.setattr(commit, "utc_now_iso", lambda: f"{now + timedelta(days=40):%Y-%m-%dT%H:%M:%SZ}")
    con = Lake(lake.root).connect()  # a restated November
    lake.commit_costs(con, relation(con, [line("2026-11-02 00:00", "7", tags={"team": "nlp"})]),
                      source="cur", delivery_id="d2", periods=("2026-11",))
    assert materialise(lake, config(), now=now).removed == 0 and held.exists()  # readers may hold it
    assert materialise(lake, config(), now=now + timedelta(minutes=59)).removed == 0 and held.exists()
    assert materialise(lake, config(), now=now + timedelta(hours=1)).removed == 1 and not held.exists()


def test_the_rollups_stored_before_the_first_inventory_go_once_it_arrives(tmp_path):
    """A lake's first ingest comes before its first inventory (the demo, a new service): the
    rollups stored then are this config's with no inventory, superseded once tags arrive and
    removed like any superseded version (main: kept as another config's, for ever in a month no
    longer delivered: 35% of the demo lake's rollup bytes)."""
    from datetime import timedelta

    from service.attribution import materialise
    from tests.test_snapshot_digest import tags_snapshot

    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "5", resource="i-1")])
    assert materialise(lake, config()).built == 1
    [first] = (lake.root / "attribution_rollup").rglob("*.parquet")
    tags_snapshot(lake, "2026-11-03", "nlp")
    assert materialise(lake, config(), grace=timedelta(0)).built == 1 and first.exists()  # found superseded
    assert materialise(lake, config(), grace=timedelta(0)).removed == 1 and not first.exists()
    assert costs(attribute(lake, config(), NOV), "team") == {("nlp", "USD"): Decimal(5)}


@pytest.mark.parametrize("granularity, expected", [
    ("day", {"2026-11-01": 5, "2026-11-02": 7, "2026-11-09": 11, "2026-12-01": 13}),
    ("week", {"2026-10-26": 5, "2026-11-02": 7, "2026-11-09": 11, "2026-11-30": 13}),  # weeks start on Monday
    ("month", {"2026-11-01": 23, "2026-12-01": 13}),
])
def test_granularity_buckets(tmp_path, granularity, expected):
    lake = make_lake(tmp_path, [
        line("2026-11-01 23:00", "5", tags={"team": "nlp"}),  # a Sunday
        line("2026-11-02 00:00", "7", tags={"team": "nlp"}),
        line("2026-11-09 12:00", "11", tags={"team": "nlp"}),
        line("2026-12-01 00:00", "13", tags={"team": "nlp"}),
    ])
    window = Window(utc(2026, 11, 1), utc(2026, 12, 2))
    result = attribute(lake, config(), window, granularity=granularity)
    assert {r["period"]: Decimal(r["cost"]) for r in result.to_json()["rows"]} == expected


def test_cost_measures(tmp_path):
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", effective="6.5", list_cost="12", tags={"team": "a"})])
    got = {cost: attribute(lake, config(), NOV, cost=cost).to_json()["rows"][0]["cost"]
           for cost in ("billed", "effective", "list")}
    assert got == {"billed": "10.000000000000", "effective": "6.500000000000", "list": "12.000000000000"}


def test_resource_owners_use_the_spelling_attribute_shows(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-11-01 00:00:00", "1", tags={"team": "eval"}, resource="i-1"),
        line("2026-11-01 01:00:00", "1", tags={"team": "eval"}, resource="i-2"),
        line("2026-11-01 02:00:00", "1", tags={"team": " Eval"}, resource="i-1"),  # latest line, rarer spelling
    ])
    cfg = config(lake=lake)
    assert attribute_resources(lake, cfg, ["i-1"])["i-1"]["team"] == "eval"
    shown = attribute(lake, cfg, Window(datetime(2026, 11, 1, tzinfo=timezone.utc),
                                        datetime(2026, 11, 2, tzinfo=timezone.utc)))
    assert [row.values["team"] for row in shown.rows] == ["eval"]
