"""Attribution: every dollar of the lake on one value per dimension, exactly once.

The package's public API — every other package imports attribution from here, never from
its modules (tests/test_layout.py):

- `AttributionQuery`, `attribute_query`: one attribution question, parsed once for the CLI
  and the HTTP API, and its answer;
- `attribute`, `AttributionResult`, `AttributionRow`, `Contribution`: attributed cost of a
  window (service/attribution/api.py describes how a line gets its values; result.py holds
  the answer and its JSON contract, with how far the data it read reaches);
- `reconcile`, `Reconciliation`: Σ attributed against Σ source, per billing period;
- `materialise`, `RollupBuild`: store the per-period rollups of a config and remove superseded
  ones (ingest and `spendlake rollup` call it, holding the lake lock; queries never do);
- `build_tops`, `ScrapeTops`, `read_tops`, `metrics_anchor`, `Top`: what a `/metrics` scrape shows of
  spend, shared clusters and commitments, stored per lake state by the writers of the lake
  (service/attribution/tops.py), read by the scrape;
- `commitments`, `CommitmentsResult`, `Commitment`: used, unused, coverage and expiry of each
  Savings Plan, reservation and committed use discount in a window (commitment_usage.py);
- `attribute_resources`: each dimension's value on a resource's latest cost line (owners);
- `cluster_usage`, `ClusterUsage`, `JobCost`, `ClusterCost`: shared GPU clusters in a window,
  per job, run and cluster (idle included), from the same allocation (service/attribution/clusters.py);
- `runs`, `RunsQuery`, `RunsResult`, `RunRow`, `RunTotal`: one row per run of the shared GPU
  clusters, for `spendlake runs` and /api/v1/runs (service/attribution/runs.py);
- `parse_where`: `team=nlp` options as a filter;
- `attributed_lines`: every line with its value per dimension and shared costs split into
  allocated lines (service/attribution/per_line.py; `spendlake export --with-attribution`);
- `top_groups`, `default_shares`, `Ranked`, `RankedGroup`, `DefaultShare`: the top groups of a
  window and each dimension's cost on its default, per currency, summed and ranked in DuckDB
  (service/attribution/ranked.py; the daily report's top experiments and unallocated shares);
- `direct_daily_lookup`: what rules read, direct spend per day (service/attribution/lines.py
  says what it leaves out and why).
"""

from service.attribution.api import (
    Reconciliation, attribute, attribute_query, attribute_resources, materialise, reconcile,
)
from service.attribution.result import AttributionResult, AttributionRow, Contribution
from service.attribution.clusters import ClusterCost, ClusterUsage, JobCost, cluster_usage
from service.attribution.query import AttributionQuery, api_parameter, cli_option, listed_once, parse_where
from service.attribution.lines import direct_daily_lookup
from service.attribution.per_line import attributed_lines
from service.attribution.ranked import DefaultShare, Ranked, RankedGroup, default_shares, top_groups
from service.attribution.rollup import RollupBuild
from service.attribution.runs import RunRow, RunsQuery, RunsResult, RunTotal, runs
from service.attribution.commitment_usage import Commitment, CommitmentsResult, commitments
from service.attribution.metric_top import Top, metrics_anchor
from service.attribution.tops import ScrapeTops, build_tops, read_tops

__all__ = [
    "AttributionQuery", "AttributionResult", "AttributionRow", "ClusterCost", "ClusterUsage", "Commitment",
    "CommitmentsResult", "Contribution", "DefaultShare", "JobCost", "Ranked", "RankedGroup", "Reconciliation",
    "RollupBuild", "ScrapeTops", "Top", "default_shares", "top_groups",
    "api_parameter", "attribute", "attribute_query", "attribute_resources", "attributed_lines", "build_tops",
    "cli_option", "cluster_usage", "commitments", "direct_daily_lookup", "listed_once", "materialise",
    "metrics_anchor",
    "parse_where", "read_tops", "reconcile", "RunRow", "RunsQuery", "RunsResult", "RunTotal", "runs",
]
