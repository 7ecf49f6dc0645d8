"""The engine: stable ids, first/last seen, resolution, acknowledgements, crashing rules."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
import yaml

from rules.base import Rule, configure, finding_id, registered
from rules.context import DailySpend, RuleContext
from rules.engine import run
from service.core.errors import ConfigError
from service.core.lake import Lake
from service.core.timewindow import Window

T0 = datetime(2026, 11, 8, tzinfo=timezone.utc)


class Scripted(Rule):
    """A test rule that reports the resources it is told to."""

    name = "scripted"
    category = "waste"
    inputs = {}

    def __init__(self, resources=(), *, crash=False):
        super().__init__()
        self.resources, self.crash = list(resources), crash

    def evaluate(self, ctx):
        if self.crash:
            raise RuntimeError("boom")
        return [self.finding(resource_id=r, key="k", severity="warning", impact_usd=Decimal("12.345"),
                             summary=f"{r} wastes.", evidence={"when": ctx.now}) for r in self.resources]


class Other(Scripted):
    name = "other"


def ctx_at(tmp_path, when):
    return RuleContext(con=Lake(tmp_path / "lake").query(), window=Window(when - timedelta(days=7), when))


def test_ids_stay_stable_and_life_cycle_is_tracked(tmp_path):
    first = run([Scripted(["a", "b"])], ctx_at(tmp_path, T0), [])
    assert [f.id for f in first.findings] == sorted([finding_id("scripted", "a", "k"), finding_id("scripted", "b", "k")])
    assert all(f.first_seen == f.last_seen == T0 and f.status == "open" for f in first.findings)
    assert first.findings[0].monthly_waste_usd == Decimal("12.35")
    assert first.findings[0].evidence == {"when": T0.isoformat()}

    t1 = T0 + timedelta(days=1)
    second = run([Scripted(["a"])], ctx_at(tmp_path, t1), first.findings)
    by_resource = {f.resource_id: f for f in second.findings}
    assert by_resource["a"].first_seen == T0 and by_resource["a"].last_seen == t1
    assert by_resource["b"].status == "resolved" and by_resource["b"].last_seen == T0
    assert [f.resource_id for f in second.seen] == ["a"]

    t2 = t1 + timedelta(days=1)
    third = run([Scripted(["a", "b"])], ctx_at(tmp_path, t2), second.findings)
    assert {f.resource_id: f.status for f in third.findings} == {"a": "open", "b": "open"}
    assert {f.resource_id: f.first_seen for f in third.findings}["b"] == T0


def test_a_first_seen_after_this_run_becomes_this_runs_time_never_after_last_seen(tmp_path):
    """A run at a clock 40 days ahead (a lake without a bill runs at the wall clock) stored
    first_seen 2026-12-18; the clock set right, every later run kept it: last seen on the 8th,
    first seen on the 18th, and the report's `since` (first_seen) after the report's day."""
    ahead = run([Scripted(["a"])], ctx_at(tmp_path, T0 + timedelta(days=40)), [])
    later = run([Scripted(["a"])], ctx_at(tmp_path, T0), ahead.findings)
    [finding] = later.findings
    assert finding.first_seen == finding.last_seen == T0
    assert run([Scripted(["a"])], ctx_at(tmp_path, T0 + timedelta(days=1)), later.findings).findings[0].first_seen == T0


def test_an_acknowledgement_lasts_while_seen_and_a_return_opens_again(tmp_path):
    """An acknowledged waste that stopped and came back stayed acknowledged for ever, so its
    team never heard of the return; the acknowledgement now ends when the finding resolves (the
    return opens, first_seen kept), and one given to a resolved finding covers its next return."""
    first = run([Scripted(["a"])], ctx_at(tmp_path, T0), [])
    from dataclasses import replace

    acked = [replace(first.findings[0], status="acknowledged", acknowledged_at=T0, ack_reason="planned")]
    seen = run([Scripted(["a"])], ctx_at(tmp_path, T0 + timedelta(hours=1)), acked)
    assert seen.findings[0].status == "acknowledged" and seen.findings[0].ack_reason == "planned"
    gone = run([Scripted([])], ctx_at(tmp_path, T0 + timedelta(hours=2)), seen.findings)
    assert (gone.findings[0].status, gone.findings[0].acknowledged_at, gone.findings[0].ack_reason) == \
        ("resolved", None, None)
    back = run([Scripted(["a"])], ctx_at(tmp_path, T0 + timedelta(hours=3)), gone.findings)
    assert (back.findings[0].status, back.findings[0].first_seen) == ("open", T0)
    gone_again = run([Scripted([])], ctx_at(tmp_path, T0 + timedelta(hours=4)), back.findings)
    expected = [replace(gone_again.findings[0], acknowledged_at=T0 + timedelta(hours=5), ack_reason="weekly")]
    returns = run([Scripted(["a"])], ctx_at(tmp_path, T0 + timedelta(hours=6)), expected)
    assert (returns.findings[0].status, returns.findings[0].ack_reason) == ("acknowledged", "weekly")


def test_a_crashing_rule_is_recorded_and_keeps_its_findings(tmp_path):
    first = run([Scripted(["a"]), Other(["x"])], ctx_at(tmp_path, T0), [])
    later = T0 + timedelta(days=1)
    result = run([Scripted(crash=True), Other([])], ctx_at(tmp_path, later), first.findings)
    outcomes = {o.rule: o for o in result.outcomes}
    assert outcomes["scripted"].status == "error" and outcomes["scripted"].message == "RuntimeError: boom"
    assert outcomes["other"].status == "ok"
    status = {f.rule: f.status for f in result.findings}
    assert status == {"scripted": "open", "other": "resolved"}  # nothing resolved on a crashed rule's word


def test_disabling_a_rule_resolves_its_findings_and_leaving_it_out_does_not(tmp_path):
    first = run([Scripted(["a"]), Other(["x"])], ctx_at(tmp_path, T0), [])
    off = Scripted(["a"])
    off.config = off.config.model_copy(update={"enabled": False})
    result = run([off], ctx_at(tmp_path, T0 + timedelta(days=1)), first.findings)
    assert {f.rule: f.status for f in result.findings} == {"scripted": "resolved", "other": "open"}
    assert [o.status for o in result.outcomes] == ["disabled"]


def test_duplicate_ids_and_missing_inputs_are_reported(tmp_path):
    twice = run([Scripted(["a", "a"])], ctx_at(tmp_path, T0), [])
    assert twice.outcomes[0].status == "error" and "two findings" in twice.outcomes[0].message

    class NeedsLogs(Scripted):
        name = "needs-logs"
        inputs = {"log_groups": ("name",)}

    skipped = run([NeedsLogs(["a"])], ctx_at(tmp_path, T0), [])
    assert skipped.outcomes[0].status == "skipped" and "log_groups" in skipped.outcomes[0].message
    assert skipped.findings == []


def test_config_errors_carry_dotted_paths_and_unknown_rules_are_rejected():
    with pytest.raises(ConfigError) as err:
        configure({"idle-gpu": {"sm_active_max_pct": 150, "colour": "red"}, "idle-cpu": {}})
    message = str(err.value)
    assert "rules.idle-gpu.sm_active_max_pct: must be at most 100, not 150" in message
    assert "rules.idle-gpu.colour: unknown key" in message
    assert "rules.idle-cpu: unknown rule" in message
    rules = {r.name: r for r in configure({"idle-gpu": {"enabled": False}})}
    assert rules["idle-gpu"].config.enabled is False


@pytest.mark.parametrize("rule", ["spend-anomaly", "unallocated-spend"])
def test_a_rules_currency_not_written_as_the_bills_write_it_is_refused(rule):
    """`currency: usd` matched no line (the bills write USD): the rule ran clean and never found
    anything; now it is a config error naming the rule's dotted path, as a budget's currency is."""
    with pytest.raises(ConfigError) as err:
        configure({rule: {"currency": "usd"}})
    assert f"rules.{rule}.currency: must be a three-letter currency code in capitals" in str(err.value)
    assert {r.name: r for r in configure({rule: {"currency": "EUR"}})}[rule].config.currency == "EUR"


@pytest.mark.parametrize("rule", ["spend-anomaly", "unallocated-spend"])
def test_excluded_charge_categories_are_read_in_focus_spelling(rule):
    """`exclude_charge_categories: [credit]` compared exactly with the lake's `Credit`, so it
    excluded nothing; it is read in FOCUS's spelling, and a value FOCUS has not is exit 2."""
    config = {r.name: r for r in configure({rule: {"exclude_charge_categories": ["credit", " TAX"]}})}[rule].config
    assert config.exclude_charge_categories == ("Credit", "Tax")
    with pytest.raises(ConfigError) as err:
        configure({rule: {"exclude_charge_categories": ["Credits"]}})
    assert err.value.exit_code == 2
    assert (f"rules.{rule}.exclude_charge_categories: 'Credits' is not a FOCUS charge category; "
            "use some of Usage, Purchase, Tax, Credit, Adjustment") in str(err.value)


def test_excluded_line_item_types_match_in_any_case():
    """Line item types are each provider's own (no list to check them against): `refund`
    excludes the lines the bill writes `Refund`."""
    config = {r.name: r for r in configure({"unallocated-spend": {"exclude_line_item_types": ["refund"]}})}[
        "unallocated-spend"].config
    line = dict(value="nlp", project="", experiment="", service="EC2", account=None, region=None, usage_type=None,
                resource=None, charge_category="Usage", uncovered_tag_keys=(), day=datetime(2026, 11, 2).date(),
                currency="USD", cost=Decimal("5"))
    refund, usage = DailySpend(**line, line_item_type="Refund"), DailySpend(**line, line_item_type="Usage")
    assert config.counted([refund, usage]) == [usage]


@pytest.mark.parametrize("name", sorted(registered()))
def test_every_rule_documents_what_it_flags_ignores_and_a_config_that_loads(name):
    cls = registered()[name]
    doc = __import__(cls.__module__, fromlist=["_"]).__doc__
    assert doc.startswith(f"{name}: ") and "Ignores" in doc
    example = doc.split("```yaml", 1)[1].split("```", 1)[0]
    section = yaml.safe_load(example)["rules"]
    (rule,) = [r for r in configure(section) if r.name == name]
    assert rule.config == cls.config_model(), "the docstring's example should show the defaults"
