"""The `clusters` group of the metric tops, per window (24h, 7d, mtd, ending at the data's end),
from the allocation of shared GPU clusters (service/attribution/clusters.py `placed_totals`: by run
and cluster, not by job), USD only:

- family `run` (run, folded): what each run's jobs cost, the `service.top_n` costliest runs
  (folded "") and the rest as (`other`, "true"), so a run named `other` is not summed into it
  (service/core/units.py `fold_top`);
- family `idle` (cluster,): the share of a cluster's instance cost that no job held (0-1), for
  each cluster whose instances cost something in the window, never folded into `other` (a pooled
  ratio is no cluster's, and SpendlakeClusterIdleHigh would fire on it).

Nothing without `clusters:` in the config.
"""

from __future__ import annotations

from datetime import datetime

from service.attribution.clusters import placed_totals
from service.attribution.compute import RollupSession
from service.attribution.metric_top import USD, Top, windows
from service.core.config import Config
from service.core.units import fold_top


def cluster_tops(session: RollupSession, config: Config, end: datetime) -> list[Top]:
    if config.attribution.clusters is None:
        return []
    top_n = config.service.top_n
    tops: list[Top] = []
    for name, window in windows(end).items():
        usage = placed_totals(session, config.attribution, window, "billed")
        per_run = {(run,): cost for (run, currency), cost in usage.runs.items() if currency == USD}
        for labels, cost in sorted(fold_top(per_run, top_n).items()):
            tops.append(Top(end, "run", name, labels, cost))
        # never pooled: an `other` of several clusters' idle over their cost is no cluster's share,
        # and the idle alert would fire on it; clusters are fleets, few enough to keep each
        for c in sorted(usage.clusters, key=lambda c: c.cluster or ""):
            if c.currency == USD and c.cost > 0:
                tops.append(Top(end, "idle", name, (c.cluster,), c.idle / c.cost))
    return tops
