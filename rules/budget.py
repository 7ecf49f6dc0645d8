"""budget: a finding for each budget whose warning line its actual or forecast spend crossed.

Budgets live in the config's `budgets:` section (service/core/config_budgets.py); this
rule only has the common settings:

```yaml
rules:
  budget:
    enabled: true
    critical_monthly_usd: 1000
```

Flags: per budget, the highest line crossed by month-to-date actual spend, and the
highest line crossed by the month-end forecast (if the budget watches `forecast`).
Severity: actual ≥ 100% critical, actual below 100% warning; forecast ≥ 100% warning,
forecast below 100% info. A budget whose scope spent nothing this month in its currency but
something in others (an EUR budget on a USD bill) can never cross a line: a `warning` finding
(key `other-currency`, `impact_usd` 0) names what was spent and says to set its `currency`.
Ignores: other currencies than the budget's (never converted; the scope's month-to-date spend
in them is named in `evidence.left_out`), and budgets with no attributed spend in the trailing
weeks.

Category `overspend` (no `monthly_waste_usd`: spending past a budget buys something).
`impact_usd` is the overrun beyond the budget this month: month-to-date spend minus the
amount for an actual finding, the forecast month-end spend minus the amount for a forecast
finding; 0 below the budget. A budget in another currency than USD has `impact_usd` 0 and
its overrun in `evidence.overrun` (in `evidence.currency`); currencies are never mixed.

The actual and forecast spend come with the context (`ctx.budget_outlooks()`): the numbers
`spendlake budgets` shows, computed by service/findings/budgets.py (the forecast is
described in service/findings/forecast.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal

from rules.base import Finding, Rule, money
from rules.context import BudgetOutlook, Outlook, RuleContext
from service.core.config_budgets import BudgetConfig


class BudgetRule(Rule):
    name = "budget"
    category = "overspend"

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        findings = []
        for status in ctx.budget_outlooks():
            findings += self._findings(status)
        return findings

    def _findings(self, status: BudgetOutlook) -> list[Finding]:
        budget, outlook = status.budget, status.outlook
        findings = []
        for kind in budget.on:
            spend = outlook.actual if kind == "actual" else outlook.forecast
            line = budget.highest_line(spend)
            if line is not None:
                findings.append(self._finding(budget, kind, line, spend, outlook, status.left_out))
        if outlook.actual == 0 and any(cost > 0 for _, cost in status.left_out):  # a credit alone is no spend
            findings.append(self._other_currency(budget, status.left_out))
        return findings

    def _other_currency(self, budget: BudgetConfig, left_out: Sequence[tuple[str | None, Decimal]]) -> Finding:
        """Nothing spent in the budget's currency, all in others (an EUR budget on a USD bill): it can never
        cross a line, so say so to its owner rather than stay silent all month."""
        spent = ", ".join(f"{currency or 'no currency'} {cost:,.2f}" for currency, cost in left_out if cost > 0)
        summary = (f"budget {budget.name} ({budget.dimension} {budget.value}) counts {budget.currency} spend only and "
                   f"none was spent this month, while {spent} was (currencies are never converted): it cannot warn; "
                   "set its `currency` to the bill's")
        finding = self.finding(
            resource_id=f"budget:{budget.name}", key="other-currency", severity="warning", impact_usd=0,
            summary=summary, evidence={"budget": budget.name, "dimension": budget.dimension, "value": budget.value,
                                       "amount": budget.amount, "currency": budget.currency, "left_out": [
                                           {"currency": currency, "actual": money(cost)}
                                           for currency, cost in left_out]})
        return _owned(finding, budget)

    def _finding(self, budget: BudgetConfig, kind: str, line: Decimal, spend: Decimal, outlook: Outlook,
                 left_out: Sequence[tuple[str | None, Decimal]]) -> Finding:
        over_budget = line >= 1
        severity = ("critical" if over_budget else "warning") if kind == "actual" else (
            "warning" if over_budget else "info")
        pct = (spend * 100 / budget.amount).quantize(Decimal("0.1"))
        verb = "has spent" if kind == "actual" else "is forecast to spend"
        summary = (f"{budget.dimension} {budget.value} {verb} {budget.currency} {spend:,.2f} this month, "
                   f"{pct}% of its {budget.currency} {budget.amount:,.2f} budget {budget.name} "
                   f"(line {line * 100:.0f}%, {outlook.days_left:.1f} days left)")
        overrun = max(spend - budget.amount, Decimal(0))
        finding = self.finding(
            resource_id=f"budget:{budget.name}", key=f"{kind}:{line}", severity=severity,
            impact_usd=overrun if budget.currency == "USD" else Decimal(0), summary=summary,
            evidence={"budget": budget.name, "dimension": budget.dimension, "value": budget.value,
                      "kind": kind, "line": line, "amount": budget.amount, "currency": budget.currency,
                      "overrun": money(overrun),
                      "actual": money(outlook.actual), "forecast": money(outlook.forecast),
                      "forecast_low": money(outlook.low), "forecast_high": money(outlook.high),
                      "days_left": outlook.days_left.quantize(Decimal("0.1")),
                      "left_out": [{"currency": currency, "actual": money(cost)} for currency, cost in left_out]})
        return _owned(finding, budget)


def _owned(finding: Finding, budget: BudgetConfig) -> Finding:
    """A budget's owner is the value it budgets, on its own dimension."""
    if budget.dimension in ("team", "project", "experiment"):
        return replace(finding, **{budget.dimension: budget.value})
    return finding
