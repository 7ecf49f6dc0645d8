"""The `clusters` group of the metric tops, per window (24h, 7d, mtd, ending at the data's end),
from the allocation of shared GPU clusters (service/attribution/clusters.py `placed_totals`: by run
and cluster, not by job), USD only:

- family `run` (run,): what each run's jobs cost, the `service.top_n` costliest runs and the
  rest as `other`;
- family `idle` (cluster,): the share of a cluster's instance cost that no job held (0-1), for
  clusters whose instances cost something in the window; clusters beyond the top N by cost
  are pooled as `other` (their idle over their cost).

Nothing without `clusters:` in the config.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal

from service.attribution.clusters import placed_totals
from service.attribution.compute import RollupSession
from service.attribution.metric_top import USD, Top, windows
from service.core.config import Config
from service.core.units import OTHER, fold_top


def cluster_tops(session: RollupSession, config: Config, end: datetime) -> list[Top]:
    if config.attribution.clusters is None:
        return []
    top_n = config.service.top_n
    tops: list[Top] = []
    for name, window in windows(end).items():
        usage = placed_totals(session, config.attribution, window, "billed")
        per_run = {(run,): cost for (run, currency), cost in usage.runs.items() if currency == USD}
        for (run,), cost in sorted(fold_top(per_run, top_n).items()):
            tops.append(Top(end, "run", name, (run,), cost))
        costs = {(c.cluster,): c.cost for c in usage.clusters if c.currency == USD and c.cost > 0}
        kept = {cluster for (cluster,) in fold_top(costs, top_n) if cluster != OTHER}
        sums: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
        for c in usage.clusters:
            if (c.cluster,) in costs:
                pair = sums[c.cluster if c.cluster in kept else OTHER]
                pair[0] += c.idle
                pair[1] += c.cost
        for cluster, (idle_cost, cost) in sorted(sums.items()):
            tops.append(Top(end, "idle", name, (cluster,), idle_cost / cost))
    return tops
