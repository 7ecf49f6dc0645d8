"""capacity-unused: capacity reservations and EC2 Capacity Blocks for ML billed while unused.

Flags each capacity reservation (FOCUS `CapacityReservationId`) with rows whose
`CapacityReservationStatus` is `Unused` in the window: reserved capacity no instance ran in.
How the bills mark it: AWS CUR 2.0 `capacity_reservation_capacity_reservation_status`
`Unused` (with `…_type` `ODCR` or `EC2 Capacity Blocks for ML`); the legacy CUR's
`UnusedBox` / `UnusedDed` usage types, whose ResourceId is the reservation's ARN
(`…:capacity-reservation/cr-…`); FOCUS files as given. AWS's `Reserved` and `Cancelled`
(future-dated reservations not yet active) have no FOCUS status and are not flagged.

The unused cost: an on-demand capacity reservation bills its unused hours at the on-demand
rate, on the Unused rows themselves (`cost_column`). A Capacity Block is paid upfront, so its
hour rows may carry no cost: then each unused hour (PricingQuantity, else ConsumedQuantity, of
the Unused rows) is valued at the block's price per reported hour, its Purchase rows'
BilledCost ÷ the hours of its Used and Unused rows, both whenever they fall (a block is
bought before its hours, often before the window). AWS charges the block's whole price up
front and reports its hours as they pass: while its hours reach its source's data end it may
run on, so that price per hour is the most an hour can cost (`evidence.runs_past_data`,
`reported_hours`, and the summary say so); a later run re-prices it as more hours arrive.

Category `waste`: `impact_usd` and `monthly_waste_usd` are, for an on-demand reservation, the
window's unused cost projected to a 730-hour month (it goes on until released) over the hours
it had Used or Unused rows in the window (reserved or released inside it: part of it); for a
Capacity Block (`x_capacity_reservation_type` `EC2 Capacity Blocks for ML`, or a usage type
naming `CapacityBlock`), the unused value itself (a block ends; nothing is projected).

Ignores: currencies other than USD, reservations whose unused cost is below `min_unused_usd`
in the window. A row cut by the window counts by the fraction of its charge period inside it.

Config example (the defaults):

```yaml
rules:
  capacity-unused:
    enabled: true
    min_unused_usd: 1
    cost_column: BilledCost
    critical_monthly_usd: 1000
```
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Literal

from pydantic import Field

from rules.base import HOURS_PER_MONTH, Finding, Rule, RuleConfig, money, usd
from rules.context import RuleContext
from service.core.timewindow import hours_present, minute_text, share_in_window
from service.core.units import plain_number
from service.core.usage_end import USAGE_END

CAPACITY_BLOCK = "EC2 Capacity Blocks for ML"


class CapacityUnusedConfig(RuleConfig):
    min_unused_usd: Decimal = Field(default=Decimal(1), ge=0,
                                    description="flag a reservation whose unused capacity cost at least this "
                                                "in the window")
    cost_column: Literal["BilledCost", "EffectiveCost"] = "BilledCost"


SQL = """
SELECT CapacityReservationId, CapacityReservationStatus, ChargePeriodStart, ChargePeriodEnd, sum({cost}),
       sum(coalesce(PricingQuantity, ConsumedQuantity))
FROM costs
WHERE CapacityReservationId IS NOT NULL AND coalesce(BillingCurrency, 'USD') = 'USD'
  AND CapacityReservationStatus IN ('Used', 'Unused')
  AND ChargePeriodStart < ? AND coalesce(ChargePeriodEnd, ChargePeriodStart + INTERVAL 1 MICROSECOND) > ?
GROUP BY ALL
"""
PRICE = """
SELECT CapacityReservationId, sum(BilledCost) FILTER (WHERE ChargeCategory = 'Purchase'),
       sum(coalesce(PricingQuantity, ConsumedQuantity)) FILTER (WHERE CapacityReservationStatus IN ('Used', 'Unused')),
       max(ChargePeriodEnd) FILTER (WHERE CapacityReservationStatus IN ('Used', 'Unused')), any_value(source)
FROM costs WHERE CapacityReservationId IN (SELECT unnest(?)) AND coalesce(BillingCurrency, 'USD') = 'USD'
GROUP BY CapacityReservationId
"""
DATA_END = f"SELECT source, {USAGE_END} FROM costs WHERE source IN (SELECT unnest(?)) GROUP BY source"
ABOUT = """
SELECT CapacityReservationId, any_value(x_capacity_reservation_type),
       bool_or(contains(coalesce(x_usage_type, ''), 'CapacityBlock')), any_value(x_instance_type),
       any_value(RegionId), any_value(SubAccountId),
       min(greatest(ChargePeriodStart, $since)) FILTER (WHERE counted),
       max(least(coalesce(ChargePeriodEnd, ChargePeriodStart), $until)) FILTER (WHERE counted)
FROM (SELECT *, CapacityReservationStatus IN ('Used', 'Unused') AND ChargePeriodStart < $until
                AND coalesce(ChargePeriodEnd, ChargePeriodStart + INTERVAL 1 MICROSECOND) > $since AS counted
      FROM costs)
WHERE CapacityReservationId IN (SELECT unnest($ids)) GROUP BY CapacityReservationId
"""


class CapacityUnused(Rule[CapacityUnusedConfig]):
    name = "capacity-unused"
    category = "waste"
    inputs = {"costs": ("CapacityReservationId", "CapacityReservationStatus", "x_capacity_reservation_type",
                        "x_usage_type", "x_instance_type", "ChargeCategory", "ChargePeriodStart", "ChargePeriodEnd",
                        "BilledCost", "EffectiveCost", "PricingQuantity", "ConsumedQuantity", "BillingCurrency",
                        "RegionId", "SubAccountId")}

    @classmethod
    def projected(cls, evidence: dict) -> bool:
        return evidence.get("projected_to_month") is not False  # a Capacity Block's: its unused value, once

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        zero = Decimal(0)
        cost: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        hours: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        sql = SQL.format(cost=self.config.cost_column)
        rows = ctx.con.execute(sql, [ctx.until, ctx.since]).fetchall()
        for rid, status, start, end, amount, quantity in rows:
            cost[rid][status] += share_in_window(amount, start, end, ctx.since, ctx.until)
            hours[rid][status] += share_in_window(quantity, start, end, ctx.since, ctx.until)
        unused_ids = sorted(rid for rid in cost if "Unused" in cost[rid] or "Unused" in hours[rid])
        about = {row[0]: row[1:] for row in ctx.con.execute(ABOUT, {
            "ids": unused_ids, "since": ctx.since, "until": ctx.until}).fetchall()} if unused_ids else {}
        # a block is bought before its hours (often before the window): its price per hour is its
        # whole purchase over all the hours reported for it, whenever they fall
        price = {rid: (paid or zero, reported or zero, through, source)
                 for rid, paid, reported, through, source in ctx.con.execute(PRICE, [unused_ids]).fetchall()
                 } if unused_ids else {}
        # a block whose hours reach its bill's data end may run on: its later hours share the purchase
        sources = sorted({source for paid, _, _, source in price.values() if paid > 0 and source})
        data_end = dict(ctx.con.execute(DATA_END, [sources]).fetchall()) if sources else {}
        findings = []
        for rid in unused_ids:
            kind, block_usage, instance_type, region, account, first, last = about.get(rid, (None, False) + (None,) * 5)
            block = kind == CAPACITY_BLOCK or bool(block_usage)
            unused, method = cost[rid]["Unused"], "billed on its Unused rows"
            paid, reported, through, source = price.get(rid, (zero, zero, None, None))
            running = False
            if unused == 0 and paid > 0 and reported > 0:
                unused = paid * hours[rid]["Unused"] / reported
                method = "unused hours at the purchase's price per reported hour"
                running = through is not None and data_end.get(source) is not None and through >= data_end[source]
            if unused <= 0 or unused < self.config.min_unused_usd:
                continue
            # reserved or released inside the window, it was billed over part of it only
            reserved = hours_present(first, last) or ctx.window_hours
            impact = unused if block else unused * HOURS_PER_MONTH / reserved
            what = f"{'Capacity Block' if block else 'capacity reservation'} {rid}"
            if instance_type:
                what += f" ({instance_type}{', ' + region if region else ''})"
            tail = ("paid for capacity nobody ran in" if block
                    else f"about {usd(impact)} a month while it stays reserved and empty; release it or run in it")
            if running:
                tail += (f"; its hours reach the data's end ({minute_text(through)} UTC) and may run on, so each is "
                         f"priced at its purchase over the {plain_number(reported)} hour(s) reported so far: at most "
                         "what its unused hours cost, lower as its later hours arrive")
            summary = (f"{what} held {plain_number(hours[rid]['Unused'])} unused hour(s) costing {usd(unused)} between "
                       f"{minute_text(ctx.since)} and {minute_text(ctx.until)} UTC: {tail}.")
            evidence = {"capacity_reservation_id": rid, "type": kind or (CAPACITY_BLOCK if block else None),
                        "instance_type": instance_type, "region": region, "account": account,
                        "window_start": ctx.since, "window_end": ctx.until,
                        "unused_hours": plain_number(hours[rid]["Unused"]),
                        "used_hours": plain_number(hours[rid]["Used"]), "unused_usd": money(unused), "valued": method,
                        "reported_hours": plain_number(reported), "runs_past_data": running,
                        "projected_to_month": not block}
            findings.append(self.finding(resource_id=rid, key="unused", severity=self.severity(impact),
                                         impact_usd=impact, summary=summary, evidence=evidence))
        return findings

