"""unallocated-spend: too much of the window's spend has no value on a dimension.

```yaml
rules:
  unallocated-spend:
    dimensions: [team, project]   # attribution dimensions to watch
    max_unallocated_pct: 5        # a finding when the unallocated share is above this
    min_unallocated_usd: 10       # and at least this much is unallocated
    unallocated_value: unallocated  # also counted, besides each dimension's own `default`
```

Flags: per dimension, direct spend over the window (USD, lines of at most a day; lines a
shared-cost rule splits over the dimension are left out, as the config already places them;
see service/attribution/lines.py) whose value is the dimension's `default` (attribution's
`dimensions.<name>.default`) or `unallocated_value`, when its share of the
dimension's direct spend is above `max_unallocated_pct`. One finding per
dimension (stable id), seen while the share stays above. Evidence: the top unallocated
services, accounts and resources by $, and the tag keys on those lines that no
dimension's alias reads (`uncovered_tag_keys`, by the $ of the lines carrying them; a shared GPU
cluster's idle, hours no job used, is no job's whatever its instances' tags say, and is named as
the cluster's idle, `idle_clusters`, not as missing tags; a cluster job's part takes the job's
values, so its instance's tag keys are no cause either: `unlabelled_jobs_usd`, to label the jobs), and the
window (`window_start`, `window_end`: the run's, ending at the data's end) — the likely fix is
an alias or a virtual-tag rule — and what it does not count that `spendlake attribute` does
(`not_counted`, also the summary's last sentence), so the two unallocated figures can be tied. Ignores: credits, refunds, tax and commitment purchases
(`exclude_charge_categories`, `exclude_line_item_types`: the same defaults as
spend-anomaly), other currencies than `currency`; but counts a Savings Plan's negation lines
(Credits), each netting the covered usage of its own resource on that usage's values whatever
its own tags say, so usage a Savings Plan covers counts 0 as the bill nets it, not its on-demand
price (the plan's fee, a Purchase, is not counted).

Category `ownership` (no `monthly_waste_usd`: the spend has an owner, just not a known one).
`impact_usd` is the unallocated spend in the window (`evidence.unallocated_usd`); severity
compares it, scaled to a 730-hour month (`evidence.monthly_unallocated_usd`), with
`critical_monthly_usd`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from pydantic import Field

from rules.base import HOURS_PER_MONTH, Finding, Rule, money, usd
from rules.context import UNALLOCATED, DailySpend, RuleContext
from rules.counted_spend import CountedSpendConfig
from service.core.folding import folded

DIMENSION = r"^[a-z][a-z0-9_]{0,39}$"
TOP_FIELDS = ("service", "account", "resource", "uncovered_tag_keys", "idle", "job")  # the window's sums: no day


class UnallocatedSpendConfig(CountedSpendConfig):
    dimensions: tuple[str, ...] = Field(default=("team", "project"), min_length=1)
    max_unallocated_pct: Decimal = Field(default=Decimal("5"), ge=0, le=100)
    min_unallocated_usd: Decimal = Field(default=Decimal("10"), ge=0)
    unallocated_value: str = UNALLOCATED
    top: int = Field(default=5, ge=1, le=50)


def top_by_cost(rows: Sequence[DailySpend], field: str, top: int) -> list[dict]:
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        value = getattr(row, field)
        if value:
            sums[value] += row.cost
    ranked = sorted(sums.items(), key=lambda item: (-item[1], item[0]))
    return [{"value": value, "cost_usd": money(cost)} for value, cost in ranked[:top] if cost > 0]


def uncovered_keys(rows: Sequence[DailySpend], top: int) -> list[dict]:
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        for key in row.uncovered_tag_keys:
            sums[key] += row.cost
    ranked = sorted(sums.items(), key=lambda item: (-item[1], item[0]))
    return [{"key": key, "cost_usd": money(cost)} for key, cost in ranked[:top]]


class UnallocatedSpendRule(Rule[UnallocatedSpendConfig]):
    name = "unallocated-spend"
    category = "ownership"
    inputs = {"costs": ("ServiceName", "SubAccountId", "ResourceId", "Tags", "BilledCost")}

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        if ctx.direct_daily is None:
            return []
        cfg = self.config
        findings = []
        for dimension in cfg.dimensions:
            # all dimensions in the first call: one attribution of the window, not one per dimension
            # covered usage counts what the bill nets it to (0), not its on-demand price
            rows = cfg.counted(ctx.direct_daily(dimension, ctx.since, ctx.until, TOP_FIELDS, along=cfg.dimensions),
                               netted=True)
            total = sum((r.cost for r in rows), Decimal(0))
            lost = [r for r in rows if r.unallocated or folded(r.value) == folded(cfg.unallocated_value)]
            unallocated = sum((r.cost for r in lost), Decimal(0))
            if total <= 0 or unallocated < cfg.min_unallocated_usd or unallocated * 100 <= cfg.max_unallocated_pct * total:
                continue
            findings.append(self._finding(ctx, dimension, lost, unallocated, total))
        return findings

    def _finding(self, ctx: RuleContext, dimension: str, lost: Sequence[DailySpend], unallocated: Decimal,
                 total: Decimal) -> Finding:
        cfg = self.config
        share = (unallocated * 100 / total).quantize(Decimal("0.1"))
        monthly = unallocated * HOURS_PER_MONTH / ctx.window_hours
        evidence = {
            "dimension": dimension, "currency": cfg.currency, "window_start": ctx.since, "window_end": ctx.until,
            "unallocated_pct": share,
            "unallocated_usd": money(unallocated), "monthly_unallocated_usd": money(monthly), "total_usd": money(total),
            "top_services": top_by_cost(lost, "service", cfg.top), "top_accounts": top_by_cost(lost, "account", cfg.top),
            "top_resources": top_by_cost(lost, "resource", cfg.top),
            # a cluster's idle is no job's: no tag would place it; a job's part takes the job's values: its
            # instance's tag keys are no cause of either
            "uncovered_tag_keys": uncovered_keys([r for r in lost if not r.idle and not r.job], cfg.top),
            "idle_clusters": top_by_cost(lost, "idle", cfg.top),
            "unlabelled_jobs_usd": money(sum((r.cost for r in lost if r.job), Decimal(0))),
            "not_counted": self.not_counted(dimension),
        }
        named = [f"{label} {items[0]['value']} ({usd(Decimal(items[0]['cost_usd']))})"
                 for label, items in (("service", evidence["top_services"]), ("account", evidence["top_accounts"]),
                                      ("resource", evidence["top_resources"])) if items]
        keys = ", ".join(k["key"] for k in evidence["uncovered_tag_keys"])
        idle = ", ".join(f"cluster {item['value']}'s idle ({usd(Decimal(item['cost_usd']))})"
                         for item in evidence["idle_clusters"])
        unlabelled = Decimal(evidence["unlabelled_jobs_usd"])
        jobs = (f"; {usd(unlabelled)} on cluster jobs that carry no {dimension}: label the jobs (the scheduler's "
                f"comment or the pod's label it reads, or a rule of attribution.dimensions.{dimension})"
                if unlabelled > 0 else "")
        summary = (f"{share}% of spend ({usd(unallocated)} of {usd(total)}) has no {dimension}"
                   f"{'; most on ' + ', '.join(named) if named else ''}"
                   f"{'; of it ' + idle + ': GPU hours no job used, which no tag places' if idle else ''}"
                   f"{jobs}"
                   f"{'; tag keys no alias reads: ' + keys if keys else ''}."
                   f" Not counted, as `spendlake attribute` counts them: {'; '.join(evidence['not_counted'])}.")
        return self.finding(resource_id=f"unallocated:{dimension}", key=dimension, severity=self.severity(monthly),
                            impact_usd=unallocated, summary=summary, evidence=evidence)

    def not_counted(self, dimension: str) -> list[str]:
        """The lines `attribute` counts and this rule does not, so its unallocated figure can be tied
        to attribute's (the demo: its monthly credits on no team)."""
        cfg = self.config
        credit = "Credit (save SavingsPlanNegation lines, which net the usage they cover on its values)"
        return [part for part in (
            cfg.exclude_charge_categories and "charge categories " + ", ".join(
                credit if c == "Credit" else c for c in cfg.exclude_charge_categories),
            cfg.exclude_line_item_types and "line item types " + ", ".join(cfg.exclude_line_item_types),
            f"other currencies than {cfg.currency}", f"lines a shared-cost rule splits over {dimension}",
            "lines longer than a day") if part]

    @classmethod
    def stored_impact(cls, monthly_waste_usd: Decimal, evidence: Mapping[str, Any]) -> Decimal:
        """Findings stored before `impact_usd` kept the monthly figure; the window's is in the evidence."""
        return Decimal(str(evidence.get("unallocated_usd", monthly_waste_usd)))
