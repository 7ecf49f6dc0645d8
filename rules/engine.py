"""Run rules and keep their findings' life cycle: ids stable across runs, first and last
seen, resolved when no longer seen, acknowledgements kept while seen.

A rule that crashes, or whose input tables are not in the lake yet, does not stop the
others; its error is recorded in its outcome and its earlier findings stay as they were
(nothing is resolved on the word of a rule that did not run). A disabled rule's findings
are resolved; rules left out of a run (`--rule`) keep theirs. Storing is the caller's job,
so a dry run is simply not storing the result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from rules.base import SEVERITIES, Finding, Rule
from rules.context import RuleContext
from service.core.lake_file_errors import damaged_lake_file

log = logging.getLogger(__name__)

OutcomeStatus = Literal["ok", "skipped", "error", "disabled"]


@dataclass(frozen=True)
class RuleOutcome:
    rule: str
    status: OutcomeStatus
    findings: int = 0
    seconds: float = 0.0
    message: str | None = None


@dataclass(frozen=True)
class EngineResult:
    findings: list[Finding]  # everything the findings table should now hold
    seen: list[Finding]  # what this run saw, with its life-cycle fields filled in
    outcomes: list[RuleOutcome]

    @property
    def errors(self) -> list[RuleOutcome]:
        return [o for o in self.outcomes if o.status == "error"]


def missing_inputs(rule: Rule, ctx: RuleContext) -> tuple[str | None, str | None]:
    """(reason to skip, error): a table that is not in the lake skips the rule; a table
    without the columns the rule reads is an error that names them."""
    for table, columns in rule.inputs.items():
        present = ctx.columns(table)
        if not present:
            return f"no `{table}` table in the lake yet; ingest a source that provides it", None
        lacking = sorted(set(columns) - present)
        if lacking:
            return None, f"table `{table}` lacks column(s) {', '.join(lacking)}"
    return None, None


def evaluate(rules: Sequence[Rule], ctx: RuleContext) -> tuple[dict[str, list[Finding]], list[RuleOutcome]]:
    """Findings of each rule that ran cleanly, and one outcome per rule."""
    fresh: dict[str, list[Finding]] = {}
    outcomes = []
    for rule in rules:
        if not rule.config.enabled:  # switched off: what it found before is no longer current
            fresh[rule.name] = []
            outcomes.append(RuleOutcome(rule.name, "disabled"))
            continue
        started = time.monotonic()
        skip, error = missing_inputs(rule, ctx)
        findings: list[Finding] = []
        if not skip and not error:
            try:
                findings = rule.evaluate(ctx)
                error = _check(rule, findings)
            except Exception as exc:  # a broken rule must not stop the others
                damaged = damaged_lake_file(exc)  # a lake file it read is damaged: not the rule's fault
                if damaged is None:
                    log.exception("rule %s failed", rule.name)
                error = str(damaged) if damaged else f"{type(exc).__name__}: {exc}"
        seconds = round(time.monotonic() - started, 3)
        if error:
            outcomes.append(RuleOutcome(rule.name, "error", seconds=seconds, message=error))
        elif skip:
            outcomes.append(RuleOutcome(rule.name, "skipped", seconds=seconds, message=skip))
        else:
            fresh[rule.name] = findings
            outcomes.append(RuleOutcome(rule.name, "ok", findings=len(findings), seconds=seconds))
    return fresh, outcomes


def _check(rule: Rule, findings: list[Finding]) -> str | None:
    ids: set[str] = set()
    for finding in findings:
        if not isinstance(finding, Finding) or finding.rule != rule.name or finding.severity not in SEVERITIES \
                or finding.category != rule.category:
            return f"returned something that is not a valid {rule.name} finding: {finding!r:.200}"
        if finding.id in ids:
            return f"returned two findings with id {finding.id} (resource {finding.resource_id})"
        ids.add(finding.id)
    return None


def reconcile(previous: Sequence[Finding], fresh: dict[str, list[Finding]], now: datetime) -> list[Finding]:
    """Merge this run's findings into the stored ones (keyed by id)."""
    before = {f.id: f for f in previous}
    merged: dict[str, Finding] = {}
    for findings in fresh.values():
        for finding in findings:
            old = before.get(finding.id)
            acknowledged_at = old.acknowledged_at if old else None
            merged[finding.id] = replace(
                finding,
                # never after last_seen: one stored by a run whose clock ran ahead (a lake without a bill
                # runs at the wall clock) or at a data's end since taken back (a source forgotten)
                first_seen=old.first_seen if old and old.first_seen and old.first_seen <= now else now,
                last_seen=now,
                status="acknowledged" if acknowledged_at else "open",
                acknowledged_at=acknowledged_at,
                ack_reason=old.ack_reason if old else None,
            )
    for old in previous:
        if old.id in merged:
            continue
        ran = old.rule in fresh
        # an acknowledgement covers the waste while it lasts: once gone, its return is news to the team
        # (one given to an already resolved finding covers its next return)
        merged[old.id] = (replace(old, status="resolved", acknowledged_at=None, ack_reason=None)
                          if ran and old.status != "resolved" else old)
    return sorted(merged.values(), key=lambda f: (f.rule, -f.impact_usd, f.id))


def run(rules: Sequence[Rule], ctx: RuleContext, previous: Sequence[Finding],
        fill_owners: Callable[[list[Finding]], list[Finding]] = lambda findings: findings) -> EngineResult:
    """Evaluate, attach owners to what was seen, and reconcile with the stored findings."""
    fresh, outcomes = evaluate(rules, ctx)
    fresh = {name: fill_owners(findings) for name, findings in fresh.items()}
    findings = reconcile(previous, fresh, ctx.now)
    seen_ids = {f.id for found in fresh.values() for f in found}
    return EngineResult(findings=findings, seen=[f for f in findings if f.id in seen_ids], outcomes=outcomes)
