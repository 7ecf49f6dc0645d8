"""A query that does not explain reads no `p_<dim>` columns, so a period rolled up in memory
for it leaves them NULL and groups its lines by their values alone (a cluster's job parts then
group by run and hour, not by job: bench/README.md, runs_bench). Its answer is the explained
answer's, row for row."""

from __future__ import annotations

from datetime import datetime, timezone

from service.attribution.api import attribute
from service.attribution.compute import ROLLUP_VIEW, RollupSession
from service.attribution.needs import Needs
from service.core.timewindow import Window
from tests.attribution_helpers import config, line, make_lake

WINDOW = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 2, tzinfo=timezone.utc))
ATTRIBUTION = {"dimensions": {"team": {"tags": ["team"], "rules": [{"match": {"service": "Amazon S3"}, "value": "data"}]},
                              "project": {"tags": ["project"]}}}


def lines() -> list[dict]:
    return [line("2026-11-01 00:00", "2", tags={"team": "nlp", "project": "llm"}, resource="i-1"),
            line("2026-11-01 00:00", "3", tags={"user:team": "NLP"}, resource="i-2"),
            line("2026-11-01 01:00", "0.25", service="Amazon S3", resource="bucket-x"),
            line("2026-11-01 02:00", "0.5", resource="i-3")]


def test_a_rollup_without_hows_leaves_them_null_and_groups_by_value(tmp_path):
    lake = make_lake(tmp_path, [*lines(), line("2026-11-01 00:00", "1", tags={"Team": "nlp"}, resource="i-4")])
    attribution = config(ATTRIBUTION, lake).attribution
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
    lake = make_lake(tmp_path, lines())
    cfg = config(ATTRIBUTION, lake)
    for by in (("team",), ("team", "project")):
        plain = attribute(lake, cfg, WINDOW, by=by)
        explained = attribute(lake, cfg, WINDOW, by=by, explain=True)
        assert [(r.values, r.cost) for r in plain.rows] == [(r.values, r.cost) for r in explained.rows]
        assert plain.totals == explained.totals
        assert all(r.explain for r in explained.rows) and not any(r.explain for r in plain.rows)
