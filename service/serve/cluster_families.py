"""The metric families of shared GPU clusters (README "Shared GPU clusters"), as functions of
(config, lake, now), called by `LakeCollector` at scrape time like service/serve/families.py,
over the same windows (24h, 7d, mtd, ending at the data's end).

- `spendlake_run_cost_usd{run,window}`: what each run's jobs cost (the allocation of
  `spendlake runs`), the `service.top_n` costliest runs per window and the rest as `other`;
- `spendlake_cluster_idle_ratio{cluster,window}`: the share of a cluster's instance cost that
  no job held (0-1), for clusters whose instances cost something in the window; clusters
  beyond the top N by cost are pooled as `other` (their idle over their cost).
USD only; both families are empty (HELP and TYPE still shown) without `clusters:` in the config.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal

from prometheus_client.core import GaugeMetricFamily, Metric

from service.core.config import Config
from service.core.lake import Lake
from service.core.units import OTHER, fold_top
from service.serve.families import USD, anchor, windows


def cluster_families(config: Config, lake: Lake, now: datetime) -> list[Metric]:
    from service.attribution import cluster_usage

    run_cost = GaugeMetricFamily("spendlake_run_cost_usd",
                                 "Billed cost in USD of each run's jobs on shared GPU clusters over the window.",
                                 labels=["run", "window"])
    idle = GaugeMetricFamily("spendlake_cluster_idle_ratio",
                             "Share of a shared GPU cluster's USD instance cost that no job held over the window (0-1).",
                             labels=["cluster", "window"])
    if config.attribution.clusters is None:
        return [run_cost, idle]
    top_n = config.service.top_n
    for name, window in windows(anchor(lake, now)).items():
        usage = cluster_usage(lake, config, window)
        per_run = {(run,): cost for (run, currency), (cost, _) in usage.runs().items() if currency == USD}
        for (run,), cost in sorted(fold_top(per_run, top_n).items()):
            run_cost.add_metric([run, name], float(cost))
        costs = {(c.cluster,): c.cost for c in usage.clusters if c.currency == USD and c.cost > 0}
        kept = {cluster for (cluster,) in fold_top(costs, top_n) if cluster != OTHER}
        sums: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
        for c in usage.clusters:
            if (c.cluster,) in costs:
                pair = sums[c.cluster if c.cluster in kept else OTHER]
                pair[0] += c.idle
                pair[1] += c.cost
        for cluster, (idle_cost, cost) in sorted(sums.items()):
            idle.add_metric([cluster, name], float(idle_cost / cost))
    return [run_cost, idle]
