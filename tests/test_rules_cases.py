"""Every rule's YAML cases (tests/rules/<rule>.yml): input rows per table, the rule's
config, and the findings expected — all run by this one parametrised test."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from rules.base import configure, finding_id
from rules.engine import evaluate
from rules.base import RuleContext
from service.core.lake import Lake
from service.core.timewindow import parse_instant, parse_window
from tests.rules_lake import build_lake

CASES = Path(__file__).resolve().parent / "rules"


def cases():
    for path in sorted(CASES.glob("*.yml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in doc["cases"]:
            yield pytest.param(doc["rule"], case, id=f"{path.stem}: {case['name']}")


@pytest.mark.parametrize(("rule_name", "case"), list(cases()))
def test_rule_case(tmp_path, capsys, rule_name, case):
    now = parse_instant(str(case["now"]))
    lake = Lake(tmp_path / "lake")
    build_lake(lake, case.get("tables", {}), now.date())
    (rule,) = [r for r in configure({rule_name: case.get("config") or {}}) if r.name == rule_name]
    ctx = RuleContext(con=lake.query(), window=parse_window(case.get("window", "7d"), now=now))

    files_before = sorted(p for p in lake.root.rglob("*") if p.is_file())
    fresh, (outcome,) = evaluate([rule], ctx)
    assert capsys.readouterr() == ("", ""), "rules never print"
    assert sorted(p for p in lake.root.rglob("*") if p.is_file()) == files_before, "rules never write"
    assert outcome.status == case.get("outcome", "ok"), outcome.message
    found = {f.id: f for f in fresh.get(rule_name, [])}
    expected = {finding_id(rule_name, str(e["resource_id"]), e["key"]): e for e in case.get("expected", [])}
    assert sorted((f.resource_id, f.summary) for i, f in found.items() if i not in expected) == [], "unexpected"
    assert sorted((e["resource_id"], e["key"]) for i, e in expected.items() if i not in found) == [], "missing"
    for fid, want in expected.items():
        got = found[fid]
        assert got.severity == want["severity"], got.summary
        assert got.monthly_waste_usd == Decimal(str(want["monthly_waste_usd"])), got.summary
        if "summary" in want:
            assert got.summary == want["summary"]
        for key, value in (want.get("evidence") or {}).items():
            assert got.evidence[key] == value, f"evidence.{key} of {got.resource_id}"
