"""A query rolls up in memory only the dimensions and cost measure it reads (service/attribution/needs.py):
the answers stay those of the full rollup, dimensions that rules read included. A query that does
not explain reads no `p_<dim>` columns: they stay NULL and a period's lines group by their values
alone (a cluster's job parts by run and hour, not by job: bench/README.md, runs_bench)."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

from service.attribution.api import attribute
from service.attribution.reconciliation import reconcile
from service.attribution.compute import ROLLUP_VIEW, RollupSession
from service.attribution.needs import Needs, needed_dimensions
from service.core.timewindow import Window
from tests.attribution_helpers import config, line, make_lake

NOV = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
DAY = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 2, tzinfo=timezone.utc))
RULES = {
    "dimensions": {"team": {"rules": [{"match": {"project": "llama"}, "value": "LLM"}]},
                   "run": {"tags": ["run"]}},
    "shared": [{"match": {"service": "AWS Support (Business)", "team": "ops"}, "split": "proportional",
                "by": "experiment"}],
}


def test_needed_dimensions_follow_rules_and_shared_rules():
    cfg = config(RULES).attribution
    assert set(needed_dimensions(cfg, ("run",))) == {"run", "experiment", "team", "project"}
    assert needed_dimensions(cfg, ("team",)).index("project") < needed_dimensions(cfg, ("team",)).index("team")
    assert needed_dimensions(cfg, None) == cfg.dimension_order()


def test_a_query_over_some_dimensions_and_one_measure_answers_as_the_full_rollup(tmp_path):
    lake = make_lake(tmp_path, [
        line("2026-11-02 00:00", "6", effective="4", tags={"project": "Llama", "experiment": "a", "run": "r1"}),
        line("2026-11-02 00:00", "3", effective="3", tags={"experiment": "b", "team": "ops"}),
        line("2026-11-02 00:00", "1", effective="0.5", service="AWS Support (Business)", tags={"team": "ops"}),
    ])
    cfg = config(RULES)
    by_team = attribute(lake, cfg, NOV, by=["team"], where={"team": ["llm"]}, cost="effective")
    assert [(r["team"], Decimal(r["cost"])) for r in by_team.to_json()["rows"]] == [("LLM", Decimal(4))]
    # the support line is split by the experiments' direct effective spend (4 : 3), and keeps its run
    by_experiment = attribute(lake, cfg, NOV, by=["experiment", "run"], cost="effective")
    assert {(r["experiment"], r["run"]): Decimal(r["cost"]) for r in by_experiment.to_json()["rows"]} == {
        ("a", "r1"): Decimal(4), ("a", "unallocated"): Decimal("0.285714285714"),
        ("b", "unallocated"): Decimal(3) + Decimal("0.214285714286")}
    assert all(r.ok for r in reconcile(lake, cfg))


EXPLAINED = {"dimensions": {"team": {"tags": ["team"], "rules": [{"match": {"service": "Amazon S3"}, "value": "data"}]},
                            "project": {"tags": ["project"]}}}


def explained_lines() -> list[dict]:
    return [line("2026-11-01 00:00", "2", tags={"team": "nlp", "project": "llm"}, resource="i-1"),
            line("2026-11-01 00:00", "3", tags={"user:team": "NLP"}, resource="i-2"),
            line("2026-11-01 01:00", "0.25", service="Amazon S3", resource="bucket-x"),
            line("2026-11-01 02:00", "0.5", resource="i-3")]


def test_a_rollup_without_hows_leaves_them_null_and_groups_by_value(tmp_path):
    lake = make_lake(tmp_path, [*explained_lines(),
                                line("2026-11-01 00:00", "1", tags={"Team": "nlp"}, resource="i-4")])
    attribution = config(EXPLAINED, lake).attribution
    counts = {}
    for hows in (True, False):
        session = RollupSession(lake, attribution, needs=Needs(("team",), ("billed",), hows=hows))
        try:
            counts[hows] = session.con.execute(
                f"SELECT count(*), count(p_team), sum(billed) FROM {ROLLUP_VIEW} WHERE lower(d_team) = 'nlp' "
                "AND cp_start = TIMESTAMP '2026-11-01 00:00'").fetchall()[0]
        finally:
            session.con.close()
    assert counts[True][:2] == (3, 3)  # by tag:team, tag:user:team and tag:Team: one row each
    assert counts[False][:2] == (2, 0)  # nlp and NLP spelled apart (spellings count them), no how
    assert counts[True][2] == counts[False][2]


def test_the_answer_without_explain_is_the_explained_ones(tmp_path):
    lake = make_lake(tmp_path, explained_lines())
    cfg = config(EXPLAINED, lake)
    for by in (("team",), ("team", "project")):
        plain = attribute(lake, cfg, DAY, by=by)
        explained = attribute(lake, cfg, DAY, by=by, explain=True)
        assert [(r.values, r.cost) for r in plain.rows] == [(r.values, r.cost) for r in explained.rows]
        assert plain.totals == explained.totals
        assert all(r.explain for r in explained.rows) and not any(r.explain for r in plain.rows)
