"""Why runs on the shared GPU clusters can read $0 where their hours were paid for, in words read
on the answer's own connection: `spendlake runs` and `attribute --by run` say them on stderr,
/api/v1/runs and /api/v1/attribute in `notes` (README "Shared GPU clusters").

- A Savings Plan or reservation: the nodes it covers are billed $0 for their hours and its fee is
  its own line, on no run. Where the clusters' instances' effective (amortized) cost in the window
  differs from their billed, a billed answer gives both and names `--cost effective`, as the daily
  report's clusters section does for the month (service/report/sections/clusters.py).
- An EC2 Capacity Block for ML: paid up front on a Purchase line (usage type `CapacityBlock`,
  ResourceId the capacity reservation's ARN), its instances' hours (`CapacityReservationStatus`
  `Used`) may carry no cost in the answer's measure. AWS says its hours' EffectiveCost amortizes
  the block's price (FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec pull #856, 2025-03), FOCUS's task
  force that some exports' hour rows do not (issue #1214, 2025-07): the price is not spread here,
  the note names the block, its hours in the window and its price, which stays on no run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal

from service.attribution.clusters import ClusterCost
from service.attribution.compute import ROLLUP_VIEW, RollupSession
from service.attribution.query import Naming, typed
from service.attribution.window_sql import INSIDE, OVERLAPS
from service.core.config_attribution import AttributionConfig
from service.core.timewindow import Window
from service.core.units import cents, shown_money

ZERO = Decimal(0)
# the answer's measure → the bill's column: the cost the block's hours carry in it
COST_COLUMNS = {"billed": "BilledCost", "effective": "EffectiveCost", "list": "ListCost"}
# the clusters' instances' parts (a job's or the cluster's idle: a cluster and a run) of the window,
# a part cut by it prorated by time, of the bills with effective cost
PLACED_COSTS = f"""
WITH parts AS (
    SELECT currency, {INSIDE} AS inside, billed, effective,
           epoch(least(cp_end, $until) - greatest(cp_start, $since)) / epoch(cp_end - cp_start) AS share
    FROM {ROLLUP_VIEW}
    WHERE {OVERLAPS} AND d_cluster <> $cluster AND d_run <> $run
      AND NOT list_contains($lacking, source || chr(31) || billing_period))
SELECT currency, {", ".join(f"sum(CASE WHEN inside THEN {m} ELSE CAST({m} * share AS DECIMAL(38, 12)) END)"
                            for m in ("billed", "effective"))}
FROM parts GROUP BY currency
"""
BLOCKS = """
WITH hours AS (
    SELECT CapacityReservationId AS block, sum(coalesce(PricingQuantity, ConsumedQuantity,
               epoch(ChargePeriodEnd - ChargePeriodStart) / 3600) * epoch(least(ChargePeriodEnd, $until)
               - greatest(ChargePeriodStart, $since)) / epoch(ChargePeriodEnd - ChargePeriodStart)) AS hours,
           sum({cost}) AS cost
    FROM costs
    WHERE CapacityReservationStatus = 'Used' AND ChargePeriodStart < $until AND ChargePeriodEnd > $since
    GROUP BY ALL)
SELECT block, hours, coalesce(BillingCurrency, 'USD'), sum(BilledCost)
FROM hours JOIN costs ON CapacityReservationId = block AND ChargeCategory = 'Purchase'
WHERE coalesce(hours.cost, 0) = 0
GROUP BY ALL HAVING sum(BilledCost) > 0 ORDER BY block
"""


def cost_apart(billed: Iterable[ClusterCost], effective: Iterable[ClusterCost]) -> str:
    """Per currency where the clusters' `effective` cost differs from their `billed` by a cent or
    more: 'is $130.00 where they are billed $80.00 ($50.00 more: ...)'; '' where none does."""
    sums: dict[str | None, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])
    for index, clusters in enumerate((billed, effective)):
        for cluster in clusters:
            sums[cluster.currency][index] += cluster.cost
    said = []
    for currency, (was, now) in sorted(sums.items(), key=lambda kv: kv[0] or ""):
        if cents(now, currency) == cents(was, currency):
            continue
        why = ("a Savings Plan or reservation covers hours billed $0 here" if now > was else
               "effective cost spreads what they are billed over other lines or months: an upfront fee, a discount")
        said.append(f"is {shown_money(now, currency)} where they are billed {shown_money(was, currency)} "
                    f"({shown_money(abs(now - was), currency)} {'more' if now > was else 'less'}: {why})")
    return "; ".join(said)


def asks_effective(config: AttributionConfig, cost: str) -> bool:
    """Whether a billed answer of the clusters' runs reads effective cost too (its session's
    measures), for the commitment note: a Savings Plan used whole leaves each bill's totals
    alike (its fee billed, the covered hours effective), so no ledger total tells it apart."""
    return cost == "billed" and config.clusters is not None


def run_cost_notes(session: RollupSession, config: AttributionConfig, window: Window, cost: str,
                   naming: Naming) -> tuple[tuple[str, ...], str]:
    """The notes (module docstring) of runs of `window` read at `cost` on `session`, whose rollup
    holds the cluster and run dimensions and, where `asks_effective`, effective cost; and how the
    clusters' instances' effective cost there differs from their billed (`effective_apart`)."""
    apart = effective_apart(session, config, window) if asks_effective(config, cost) else ""
    notes = [_capacity_blocks(session, window, cost), apart and (
        f"the clusters' instances' effective (amortized) cost in the window {apart}: the commitment's fee is its own "
        f"line, on no run; {typed(naming, 'cost', 'effective')} shows each run its share of it")]
    return tuple(note for note in notes if note), apart


def effective_apart(session: RollupSession, config: AttributionConfig, window: Window) -> str:
    """Where the clusters' instances' effective cost in the window differs from their billed, of
    the bills that have both (an Azure actual-cost export has no effective: its 0 would read as a
    discount): 'is $130.00 where they are billed $80.00 ($50.00 more: ...)' (cost_apart), or ''."""
    lacking = [f"{e.source}\x1f{e.billing_period}" for e in session.ledger_entries() if e.lacks("effective")]
    params = {"since": window.since.replace(tzinfo=None), "until": window.until.replace(tzinfo=None),
              "cluster": config.dimensions["cluster"].default, "run": config.dimensions["run"].default,
              "lacking": lacking}
    costs = [(ClusterCost("", currency, billed, ZERO), ClusterCost("", currency, effective, ZERO))
             for currency, billed, effective in session.con.execute(PLACED_COSTS, params).fetchall()]
    return cost_apart([billed for billed, _ in costs], [effective for _, effective in costs])


def _capacity_blocks(session: RollupSession, window: Window, cost: str) -> str:
    """'N instance-hours in the window ran on Capacity Block cr-… whose price, USD X, is on no
    run…' for each block whose hours there carry none of `cost`, or ''."""
    params = {"since": window.since.replace(tzinfo=None), "until": window.until.replace(tzinfo=None)}
    blocks = session.con.execute(BLOCKS.format(cost=COST_COLUMNS[cost]), params).fetchall()
    said = [f"{hours:,.1f} instance-hour(s) in the window ran on Capacity Block {block.rsplit('/', 1)[-1]} whose "
            f"price, {shown_money(price, currency)} (its Purchase line), is on no run" for block, hours, currency, price
            in blocks]
    if not said:
        return ""
    return (f"{'; '.join(said)}: the block's hours carry no {cost} cost in the bill, so their runs read $0 for them "
            "(README: Shared GPU clusters, Capacity Blocks)")
