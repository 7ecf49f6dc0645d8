"""The metric families of shared GPU clusters (README "Shared GPU clusters"), over the same
windows as spend (24h, 7d, mtd, ending at the data's end), from the tops ingest stored for the
lake's state (service/attribution/cluster_tops.py computes them):

- `spendlake_run_cost_usd{run,window}`: what each run's jobs cost (the allocation of
  `spendlake runs`), the `service.top_n` costliest runs per window and the rest as `other`
  with `folded="true"`, so it is told from a run named `other`;
- `spendlake_cluster_idle_ratio{cluster,window,team}`: the share of a cluster's instance cost that
  no job held (0-1), one series per cluster whose instances cost something in the window, never
  folded into `other` (clusters are few; a pooled ratio is no cluster's, and the idle alert
  would fire on it); `team` is the cluster's owner from `clusters.owners` (empty: none), so
  its idle alert reaches that team, not platform.
USD only; both families are empty (HELP and TYPE still shown) without `clusters:` in the config.
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily, Metric

from service.attribution import ScrapeTops
from service.core.config import Config
from service.serve.families import add_folded, folded_family


def cluster_families(config: Config, tops: ScrapeTops) -> list[Metric]:
    run_cost = folded_family("spendlake_run_cost_usd",
                             "Billed cost in USD of each run's jobs on shared GPU clusters over the window.", ["run", "window"])
    idle = GaugeMetricFamily("spendlake_cluster_idle_ratio",
                             "Share of a shared GPU cluster's USD instance cost that no job held over the window (0-1).",
                             labels=["cluster", "window", "team"])
    if config.attribution.clusters is None:
        return [run_cost, idle]
    for top in tops.group("clusters"):
        if top.family == "idle":
            [cluster] = top.labels
            idle.add_metric([cluster, top.window, config.attribution.clusters.owner(cluster) or ""], float(top.value))
        else:
            add_folded(run_cost, top.labels, top.value, top.window)
    return [run_cost, idle]
