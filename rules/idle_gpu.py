"""idle-gpu: GPU instances billed while their GPUs do nothing.

Flags a GPU instance (instance type matching `instance_types`) billed during runs of at
least `min_idle_hours` consecutive hours whose mean utilisation is below the threshold of
the best metric it reports: `sm_active_max_pct` for DCGM SM-active or graphics-engine-
active, `gpu_util_max_pct` for GPU utilisation (DCGM_FI_DEV_GPU_UTIL, nvidia-smi). Waste
is the cost billed for those hours (`cost_column`), projected to a 730-hour month over the
window. A GPU instance billed in the window with no utilisation data at all gets a
separate `unmonitored` finding (info, no waste claimed: we cannot know).

Category `waste`: `impact_usd` and `monthly_waste_usd` are that monthly projection (0 for
`unmonitored`); the idle hours' own cost in the window is `evidence.idle_cost_usd`.

Ignores: hours with no utilisation data, and on a shared GPU cluster (`attribution.clusters`) the
part of an hour's cost allocation placed on jobs holding the instance's GPUs (the job's cost, not the
instance's idle: `spendlake runs` shows it): an hour in which a job held 1 of 8 GPUs counts the 7/8
no job held, an hour jobs held wholly breaks a run, as an hour without data does. So on a cluster
the idle hours' cost is the cluster's `idle` (GPUs no job held) in them, the same dollars seen per
instance. The utilisation judged is the instance's mean over its GPUs. Also idle
stretches shorter than `min_idle_hours`, non-usage charges (tax, credits, purchases) and
costs in currencies other than USD. Daily cost rows are spread evenly over their hours.

Config example (the defaults):

```yaml
rules:
  idle-gpu:
    enabled: true
    sm_active_max_pct: 5
    gpu_util_max_pct: 10
    min_idle_hours: 2
    cost_column: BilledCost
    instance_types: ["p*.*", "g*.*", "a2-*", "a3-*", "g2-*", "Standard_N*"]
    critical_monthly_usd: 1000
```
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field

from rules.base import HOURS_PER_MONTH, Finding, Rule, RuleConfig, glob_regex, money, usd
from rules.context import RuleContext
from service.core.schema import MONEY

INSTANCE_ID = "regexp_replace({}, '^arn:.*/', '')"  # an ARN's last segment is the instance id


class IdleGpuConfig(RuleConfig):
    sm_active_max_pct: float = Field(default=5, ge=0, le=100)
    gpu_util_max_pct: float = Field(default=10, ge=0, le=100)
    min_idle_hours: int = Field(default=2, ge=1, le=24 * 31)
    cost_column: Literal["BilledCost", "EffectiveCost"] = "BilledCost"
    instance_types: tuple[str, ...] = Field(default=("p*.*", "g*.*", "a2-*", "a3-*", "g2-*", "Standard_N*"),
                                            min_length=1)


SQL = """
WITH held AS (  -- the part of an instance-hour's cost a cluster's jobs held: not idle, whatever the GPUs did
  SELECT unnest(?::VARCHAR[]) AS resource_id, unnest(?::TIMESTAMP[]) AS hour, unnest(?::{money}[]) AS amount
),
charges AS (
  SELECT ResourceId AS resource_id, x_instance_type AS instance_type, CAST({cost} AS {money}) AS cost,
         generate_series(date_trunc('hour', ChargePeriodStart), ChargePeriodEnd - INTERVAL 1 MICROSECOND,
                         INTERVAL 1 HOUR) AS hours
  FROM costs
  WHERE ResourceId IS NOT NULL AND regexp_full_match(x_instance_type, ?, 'i')
    AND coalesce(ChargeCategory, 'Usage') = 'Usage' AND coalesce(BillingCurrency, 'USD') = 'USD'
    AND ChargePeriodEnd > ChargePeriodStart AND ChargePeriodStart < ? AND ChargePeriodEnd > ?
),
billed AS (
  SELECT resource_id, any_value(instance_type) AS instance_type, hour, sum(cost) AS cost
  FROM (SELECT resource_id, instance_type, unnest(hours) AS hour,
               CASE WHEN len(hours) = 1 THEN cost ELSE CAST(cost / len(hours) AS {money}) END AS cost
        FROM charges)
  WHERE hour >= ? AND hour < ?
  GROUP BY resource_id, hour
),
util AS (
  SELECT {instance_id} AS instance_id, date_trunc('hour', hour) AS hour, metric,
         CASE WHEN lower(metric) LIKE '%sm_active%' THEN 1
              WHEN lower(metric) LIKE '%gr_engine_active%' THEN 2 ELSE 3 END AS preference,
         coalesce(avg(util_pct) FILTER (WHERE gpu IS NULL), avg(util_pct)) AS util
  FROM gpu_utilization WHERE hour >= ? AND hour < ?
  GROUP BY ALL
),
chosen AS (  -- the best metric each instance reports: SM active, engine active, GPU util
  SELECT * FROM util QUALIFY preference = min(preference) OVER (PARTITION BY instance_id)
),
hours AS (  -- a job holding 1 of 8 GPUs leaves 7/8 of the hour's cost idle; all 8, none
  SELECT b.resource_id, b.hour, b.cost - coalesce(h.amount, 0) AS cost, h.amount > 0 AS shared, c.util, c.metric,
         c.util < CASE WHEN c.preference <= 2 THEN ? ELSE ? END AND (h.amount IS NULL OR b.cost > h.amount) AS idle,
         CASE WHEN c.preference <= 2 THEN ? ELSE ? END AS threshold
  FROM billed b JOIN chosen c ON c.instance_id = {billed_instance_id} AND c.hour = b.hour
  LEFT JOIN held h ON h.resource_id = b.resource_id AND h.hour = b.hour
),
runs AS (
  SELECT resource_id, min(hour) AS start, max(hour) + INTERVAL 1 HOUR AS "end", count(*) AS hours,
         count(*) FILTER (WHERE shared) AS shared, sum(cost) AS cost, avg(util) AS mean_util,
         any_value(metric) AS metric, any_value(threshold) AS threshold
  FROM (SELECT *, epoch(hour) / 3600 - row_number() OVER (PARTITION BY resource_id ORDER BY hour) AS run
        FROM hours WHERE idle)
  GROUP BY resource_id, run
  HAVING count(*) >= ?
)
SELECT b.resource_id, any_value(b.instance_type), count(*) AS billed_hours, sum(b.cost) AS billed_cost,
       (SELECT count(*) FROM util u WHERE u.instance_id = {billed_instance_id}) AS monitored,
       (SELECT list({{'start': r.start, 'end': r."end", 'hours': r.hours, 'shared': r.shared, 'cost': r.cost,
                      'mean_util': r.mean_util, 'metric': r.metric, 'threshold': r.threshold}} ORDER BY r.start)
        FROM runs r WHERE r.resource_id = b.resource_id) AS runs
FROM billed b
GROUP BY b.resource_id
ORDER BY b.resource_id
"""


class IdleGpu(Rule[IdleGpuConfig]):
    name = "idle-gpu"
    category = "waste"
    inputs = {
        "costs": ("ResourceId", "x_instance_type", "ChargePeriodStart", "ChargePeriodEnd", "BilledCost",
                  "EffectiveCost", "ChargeCategory", "BillingCurrency"),
        "gpu_utilization": ("resource_id", "gpu", "hour", "util_pct", "metric"),
    }

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        c = self.config
        sql = SQL.format(cost=c.cost_column, money=MONEY, instance_id=INSTANCE_ID.format("resource_id"),
                         billed_instance_id=INSTANCE_ID.format("b.resource_id"))
        held = sorted(ctx.held_hours(ctx.window, c.cost_column).items()) if ctx.held_hours else []
        rows = ctx.con.execute(sql, [
            [resource for (resource, _), _ in held], [hour for (_, hour), _ in held], [amount for _, amount in held],
            glob_regex(c.instance_types),
            ctx.until, ctx.since, ctx.since, ctx.until, ctx.since, ctx.until,
            c.sm_active_max_pct, c.gpu_util_max_pct, c.sm_active_max_pct, c.gpu_util_max_pct, c.min_idle_hours,
        ]).fetchall()
        findings = []
        for resource_id, instance_type, billed_hours, billed_cost, monitored, runs in rows:
            if not monitored:
                findings.append(self._unmonitored(ctx, resource_id, instance_type, billed_hours, billed_cost))
            elif runs:
                findings.append(self._idle(ctx, resource_id, instance_type, billed_hours, runs))
        return findings

    def _idle(self, ctx: RuleContext, resource_id: str, instance_type: str, billed_hours: int,
              runs: list[dict]) -> Finding:
        idle_hours = sum(r["hours"] for r in runs)
        shared = sum(r["shared"] for r in runs)
        idle_cost = sum((r["cost"] for r in runs), Decimal(0))
        monthly = idle_cost * HOURS_PER_MONTH / ctx.window_hours
        metric, threshold = runs[-1]["metric"], runs[-1]["threshold"]
        held = f" (in {shared} of them jobs held some of its GPUs: only the rest counts)" if shared else ""
        summary = (f"{instance_type} {resource_id} sat idle ({metric} below {threshold:g}%) for {idle_hours} of "
                   f"{billed_hours} billed hours{held} in {len(runs)} run(s), costing {usd(idle_cost)}, about "
                   f"{usd(monthly)} a month if it goes on.")
        evidence = {
            "instance_type": instance_type, "metric": metric, "threshold_pct": threshold,
            "window_start": ctx.since, "window_end": ctx.until, "billed_hours": billed_hours,
            "idle_hours": idle_hours, "partly_held_hours": shared, "idle_cost_usd": money(idle_cost),
            "idle_runs": [{"start": r["start"], "end": r["end"], "hours": r["hours"], "cost_usd": money(r["cost"]),
                           "mean_util_pct": round(r["mean_util"], 2)} for r in runs[-20:]],
        }
        return self.finding(resource_id=resource_id, key="idle", severity=self.severity(monthly),
                            impact_usd=monthly, summary=summary, evidence=evidence)

    def _unmonitored(self, ctx: RuleContext, resource_id: str, instance_type: str, billed_hours: int,
                     billed_cost: Decimal) -> Finding:
        summary = (f"{instance_type} {resource_id} was billed for {billed_hours} hours ({usd(billed_cost)}) "
                   "with no GPU utilisation data, so nobody can tell whether it was used.")
        evidence = {"instance_type": instance_type, "window_start": ctx.since, "window_end": ctx.until,
                    "billed_hours": billed_hours, "billed_cost_usd": money(billed_cost)}
        return self.finding(resource_id=resource_id, key="unmonitored", severity="info", impact_usd=0,
                            summary=summary, evidence=evidence)
