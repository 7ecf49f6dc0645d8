"""A query rolls up in memory only the dimensions and cost measure it reads (service/attribution/needs.py):
the answers stay those of the full rollup, dimensions that rules read included."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

from service.attribution.api import attribute, reconcile
from service.attribution.needs import needed_dimensions
from service.core.timewindow import Window
from tests.attribution_helpers import config, line, make_lake

NOV = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
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
