"""A rules run reads one state of the lake: the rules' SQL and the lookups they ask (owners,
direct spend, budgets) open their own connections, and a commit replaces a partition's file in
place, so only reading again makes them agree when an ingest commits during the run, however
long the run has read."""

from __future__ import annotations

from decimal import Decimal

from attribution_helpers import declared_sources, line, make_lake

import service.core.snapshot as snapshot_module
import service.findings.run as run_module
from service.core.config import parse_config
from service.findings.run import run_rules


def lines(team: str, cost: str) -> list[dict]:
    return [line(f"2026-11-2{d} 00:00", cost, tags={"team": team}, resource="i-1") for d in (5, 6)]


def test_an_ingest_committing_during_a_rules_run_longer_than_the_read_patience_is_read_again(tmp_path, monkeypatch):
    """i-1 of team a cost $20 when the run began; an ingest then committed its corrected bill (team b,
    $60). A run that had read for over 10 s (READ_PATIENCE) kept its answer: the rule's SQL had read
    $20 while the owner lookup said team b and the direct spend summed $60, a finding's dollars of one
    state under another state's owner. It now reads again once, and every part sees the new bill."""
    lake = make_lake(tmp_path, lines("a", "10"))
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake),
                           "budgets": [{"name": "a-monthly", "dimension": "team", "value": "a", "amount": "100"}]})
    monkeypatch.setattr(snapshot_module, "READ_PATIENCE", 0.0)  # as after 10 s of rules on a large lake
    original, seen, reads = run_module.rule_context, {}, []

    def hooked(lake_, config_, window, con, snapshot):
        ctx = original(lake_, config_, window, con, snapshot)
        seen["rule"] = con.execute("SELECT sum(BilledCost) FROM costs").fetchone()[0]
        if not reads:
            make_lake(tmp_path, lines("b", "30"), delivery="d2")  # the ingest commits now, once
        reads.append(1)
        seen["owner"] = ctx.owner_of(["i-1"])["i-1"].team
        seen["direct"] = sum((d.cost for d in ctx.direct_daily("team", ctx.since, ctx.until)), Decimal(0))
        seen["budget"] = ctx.budget_outlooks()[0].outlook.actual
        return ctx

    monkeypatch.setattr(run_module, "rule_context", hooked)
    run_rules(config, only=["unallocated-spend"], dry_run=True)
    assert len(reads) == 2 and lake.ledger()[0].delivery_id == "d2"
    assert seen == {"rule": Decimal(60), "owner": "b", "direct": Decimal(60), "budget": Decimal(0)}
