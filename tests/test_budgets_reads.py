"""How often `spendlake budgets` reads the raw lines: each read rolls a period without a stored
rollup up from them (a 10M-line month: ~11 CPU s each), so every budget's attributions (the
days, and both months at once, per dimension) share one read."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import service.attribution.rollup as rollup
import service.findings.budgets as budgets
from service.attribution import attribute
from service.core.config import load_config
from service.core.timewindow import Window
from tests.attribution_helpers import declared_sources, line, make_lake


def test_budgets_of_two_dimensions_roll_each_period_up_from_its_raw_lines_once(tmp_path, monkeypatch):
    # a shared Tax line split proportionally: the month's split (nlp 400 of 500 direct: 80) is
    # not the days' (1 Nov 50/50): each month keeps its own, as `attribute` over it gives
    lines = []
    for month in ("2026-10", "2026-11"):
        lines += [line(f"{month}-01 00:00", "100", end=f"{month}-02 00:00", tags={"team": "nlp", "project": "a"}),
                  line(f"{month}-01 00:00", "100", end=f"{month}-02 00:00", tags={"team": "cv", "project": "b"}),
                  line(f"{month}-01 00:00", "100", end=f"{month}-02 00:00", category="Tax"),
                  line(f"{month}-02 00:00", "300", end=f"{month}-03 00:00", tags={"team": "nlp", "project": "a"})]
    lake = make_lake(tmp_path, lines)
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({
        "lake": str(lake.root), "sources": declared_sources(lake),
        "attribution": {"dimensions": {"team": {"tags": ["team"]}, "project": {"tags": ["project"]}},
                        "shared": [{"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"}]},
        "budgets": [{"name": "nlp", "value": "nlp", "amount": 400}, {"name": "cv", "value": "cv", "amount": 200},
                    {"name": "a", "dimension": "project", "value": "a", "amount": 1000}]}))
    config = load_config(path)
    rolled = []  # (source, period) of each roll-up from the raw lines: the lake stores no rollup
    relation = rollup.rollup_relation
    monkeypatch.setattr(rollup, "rollup_relation",
                        lambda lake, config, con, part, *rest: rolled.append((part.source, part.period))
                        or relation(lake, config, con, part, *rest))
    statuses = {s.budget.name: s for s in budgets.budget_status(lake, config)}
    assert sorted(rolled) == sorted(set(rolled)) and len(rolled) == 2, rolled  # October and November, once each
    for name, dim, expected in (("nlp", "team", 480), ("cv", "team", 120), ("a", "project", 400)):
        for since, until, got in ((datetime(2026, 11, 1), datetime(2026, 11, 3), statuses[name].outlook.actual),
                                  (datetime(2026, 10, 1), datetime(2026, 11, 1), statuses[name].last_month.actual)):
            alone = attribute(lake, config, Window(since.replace(tzinfo=timezone.utc), until.replace(tzinfo=timezone.utc)),
                              by=(dim,), where={dim: [statuses[name].budget.value]})
            assert got == alone.totals[0][1] == Decimal(expected), (name, since)
