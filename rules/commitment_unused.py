"""commitment-unused: Savings Plans, reservations and committed use discounts paid for and not used.

Flags each commitment (FOCUS `CommitmentDiscountId`) whose unused part in the window, the
EffectiveCost of its rows with `CommitmentDiscountStatus` `Unused` (AWS: the unused part of a
SavingsPlanRecurringFee or RIFee; Azure: UnusedReservation / UnusedSavingsPlan rows; FOCUS
files as given), is at least `min_unused_pct` of its commitment (used + unused, where used is
the EffectiveCost of its `Used` rows) and at least `min_monthly_usd` a month. A commitment is
spend that buys nothing for every hour nobody uses it, so its unused part is waste; the
finding is on the commitment's own charge (its ResourceId on the Unused or Purchase rows,
else the commitment id), so its owner is the commitment's tags, else the paying account's
attribution rule, else `unallocated`.

Category `waste`: `impact_usd` and `monthly_waste_usd` are the unused part of the window
projected to a 730-hour month over `evidence.hours`, the hours the commitment had Used or Unused
rows in the window, cut at its `x_commitment_start` and `x_commitment_end` (bought or expired
inside the window, it was paid for over part of it only; a daily row runs from midnight to
midnight whatever time it began or ended); `evidence.unused_usd` is the window's own.

Ignores: commitments in currencies other than USD, rows without a status (purchases,
negations: a purchase's EffectiveCost is amortised onto the Used and Unused rows), and
commitments with nothing used or unused in the window. A row cut by the window counts by the
fraction of its charge period inside it (a monthly RIFee in a 7-day window: 7/30).

Config example (the defaults):

```yaml
rules:
  commitment-unused:
    enabled: true
    min_unused_pct: 5
    min_monthly_usd: 10
    critical_monthly_usd: 1000
```
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from pydantic import Field

from rules.base import HOURS_PER_MONTH, Finding, Rule, RuleConfig, money, usd
from rules.context import RuleContext
from service.core.timewindow import hours_present, minute_text, share_in_window
from service.core.units import plain_number


class CommitmentUnusedConfig(RuleConfig):
    min_unused_pct: Decimal = Field(default=Decimal(5), ge=0, le=100,
                                    description="flag a commitment whose unused part is at least this % of it")
    min_monthly_usd: Decimal = Field(default=Decimal(10), ge=0,
                                     description="and at least this much a month")


SQL = """
SELECT CommitmentDiscountId, CommitmentDiscountStatus, ChargePeriodStart, ChargePeriodEnd, sum(EffectiveCost)
FROM costs
WHERE CommitmentDiscountId IS NOT NULL AND CommitmentDiscountStatus IN ('Used', 'Unused')
  AND coalesce(BillingCurrency, 'USD') = 'USD'
  AND ChargePeriodStart < ? AND coalesce(ChargePeriodEnd, ChargePeriodStart + INTERVAL 1 MICROSECOND) > ?
GROUP BY ALL
"""
ABOUT = """
SELECT CommitmentDiscountId, any_value(CommitmentDiscountType), any_value(CommitmentDiscountName),
       coalesce(any_value(ResourceId) FILTER (WHERE own), CommitmentDiscountId),
       any_value(SubAccountId) FILTER (WHERE own),
       min(greatest(ChargePeriodStart, $since, coalesce({starts}, ChargePeriodStart))) FILTER (WHERE counted),
       max(least(coalesce(ChargePeriodEnd, ChargePeriodStart), $until)) FILTER (WHERE counted), max({expires})
FROM (SELECT *, CommitmentDiscountStatus = 'Unused' OR ChargeCategory = 'Purchase' AS own,
             CommitmentDiscountStatus IN ('Used', 'Unused') AND ChargePeriodStart < $until
               AND coalesce(ChargePeriodEnd, ChargePeriodStart + INTERVAL 1 MICROSECOND) > $since AS counted
      FROM costs)
WHERE CommitmentDiscountId IN (SELECT unnest($ids)) GROUP BY CommitmentDiscountId
"""


class CommitmentUnused(Rule[CommitmentUnusedConfig]):
    name = "commitment-unused"
    category = "waste"
    inputs = {"costs": ("CommitmentDiscountId", "CommitmentDiscountStatus", "CommitmentDiscountType",
                        "CommitmentDiscountName", "ChargeCategory", "ChargePeriodStart", "ChargePeriodEnd",
                        "EffectiveCost", "BillingCurrency", "ResourceId", "SubAccountId")}

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        sums: dict[str, dict[str, Decimal]] = defaultdict(lambda: {"Used": Decimal(0), "Unused": Decimal(0)})
        for cid, status, start, end, cost in ctx.con.execute(SQL, [ctx.until, ctx.since]).fetchall():
            sums[cid][status] += share_in_window(cost, start, end, ctx.since, ctx.until)
        starts, expires = (name if name in ctx.columns("costs") else "NULL::TIMESTAMP"
                           for name in ("x_commitment_start", "x_commitment_end"))
        about = {row[0]: row[1:] for row in ctx.con.execute(ABOUT.format(starts=starts, expires=expires), {
            "ids": sorted(sums), "since": ctx.since, "until": ctx.until}).fetchall()} if sums else {}
        findings = []
        for cid, parts in sorted(sums.items()):
            used, unused = parts["Used"], parts["Unused"]
            commitment = used + unused
            if commitment <= 0 or unused <= 0:
                continue
            kind, name, resource, account, first, last, expires = about.get(cid, (None, None, cid) + (None,) * 4)
            # bought or expired inside the window, it was paid for (and unused) over part of it only
            hours = hours_present(first, last, expires) or ctx.window_hours
            monthly = unused * HOURS_PER_MONTH / hours
            unused_pct = unused * 100 / commitment
            if unused_pct < self.config.min_unused_pct or monthly < self.config.min_monthly_usd:
                continue
            label = f"{kind or 'commitment'} {name or cid}"
            shown = plain_number(hours.quantize(Decimal("0.01")))
            part = f" (over the {shown} hours it had rows in)" if hours < ctx.window_hours else ""
            summary = (f"{label} left {usd(unused)} of {usd(commitment)} unused ({unused_pct:.1f}%) between "
                       f"{minute_text(ctx.since)} and {minute_text(ctx.until)} UTC{part}, about {usd(monthly)} "
                       "a month paid for nothing; move eligible usage onto it or stop renewing it.")
            evidence = {"commitment_id": cid, "type": kind, "name": name, "account": account,
                        "window_start": ctx.since, "window_end": ctx.until, "hours": shown,
                        "commitment_usd": money(commitment),
                        "used_usd": money(used), "unused_usd": money(unused),
                        "unused_pct": round(float(unused_pct), 2), "utilization_pct": round(float(100 - unused_pct), 2)}
            findings.append(self.finding(resource_id=resource or cid, key=cid, severity=self.severity(monthly),
                                         impact_usd=monthly, summary=summary, evidence=evidence))
        return findings
