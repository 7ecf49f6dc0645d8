"""Attribution: every dollar of the lake on one value per dimension, exactly once.

The package's public API — every other package imports attribution from here, never from
its modules (tests/test_layout.py):

- `AttributionQuery`, `attribute_query`: one attribution question, parsed once for the CLI
  and the HTTP API, and its answer; `attribute_queries`: several answered from one read;
- `attribute`, `AttributionResult`, `AttributionRow`, `Contribution`: attributed cost of a
  window (service/attribution/api.py describes how a line gets its values; result.py holds
  the answer and its JSON contract, with how far the data it read reaches);
- `with_notes`, `outside_the_data`, `lacking_cost`: what an answer's rows do not say by themselves, in words, for
  the CLI to print and the JSON of both front ends to carry (service/attribution/answer_notes.py);
- `reconcile`, `Reconciliation`: Σ attributed against Σ source, per billing period;
- `materialise`, `RollupBuild`: store the per-period rollups of a config and remove superseded
  ones (ingest and `spendlake rollup` call it, holding the lake lock; queries never do);
- `told_by`, `kept_in`, `RollupsKept`: a period rolled up from its raw lines (its rollup missing
  or stale) told once to a command's reader, and kept for serve's next requests (rollup_told.py, rollup_kept.py);
- `build_tops`, `ScrapeTops`, `read_tops`, `tops_owner`, `TOPS_FORMAT`, `metrics_anchor`, `Top`: what a
  `/metrics` scrape shows of spend, shared clusters and commitments, stored per lake state by the writers of the lake
  (service/attribution/tops.py), read by the scrape;
- `commitments`, `commitments_asked`, `CommitmentsResult`, `Commitment`: used, unused, coverage and expiry of
  each Savings Plan, reservation and committed use discount in a window (commitment_usage.py), by default
  the last `COMMITMENTS_SINCE` of the data;
- `attribute_resources`: each dimension's value on a resource's latest cost line (owners);
- `cluster_usage`, `ClusterUsage`, `JobCost`, `ClusterCost`: shared GPU clusters in a window,
  per job, run and cluster (idle included), from the same allocation (service/attribution/clusters.py);
  `cluster_totals`: its clusters alone;
- `runs`, `RunsQuery`, `RunsResult`, `RunRow`, `RunTotal`: one row per run of the shared GPU
  clusters, for `spendlake runs` and /api/v1/runs (service/attribution/run_rows.py; asked: run_query.py,
  by default over the last `RUNS_SINCE` of the data; answered: run_result.py);
- `RunStory`, `RunJob`, `RunInstance`: one run's jobs, cost by job type and state, and the idle
  beside it, for `runs --run` (service/attribution/run_story.py); `UNFINISHED`, `job_attempt`: its
  figures, what its unfinished attempts and failed re-runs cost (service/attribution/run_figures.py);
- `parse_where`: `team=nlp` options as a filter;
- `attributed_lines`: every line with its value per dimension and shared costs split into
  allocated lines (service/attribution/per_line.py; `spendlake export --with-attribution`);
- `top_groups`, `default_shares`, `Ranked`, `RankedGroup`, `DefaultShare`: the top groups of a
  window and each dimension's cost on its default, per currency, summed and ranked in DuckDB
  (service/attribution/ranked.py; the daily report's top experiments and unallocated shares);
- `newly_ended`, `newly_unasked`: the job records a new snapshot of a window job source ends,
  seen running before and left out of it, reading past them or having asked otherwise
  (service/attribution/jobs.py; inventory's warnings);
- `idle_job_rules`, `IdleRule`: the virtual-tag rules on a job's fields that no job record
  meets in a window (service/attribution/job_rules.py; `attribute` and `runs` warn);
- `shared_nodes`, `SharedNodes`: pairs of job sources naming a node alike in the same hours, the
  cause the over-booked warnings name (service/attribution/node_sharing.py);
- `prorate`: the part of a charge in a window, as attribution counts it (the report's data-end note);
- `direct_daily_lookup`: what rules read, direct spend per day (service/attribution/lines.py
  says what it leaves out and why);
- `run_costs_lookup`, `held_hours_lookup`: what the failed-reruns rule reads, every run's
  attempts with their cost (a story's job as one, `job_attempt`), and what idle-gpu reads, the instance-hours jobs held (service/attribution/run_costs.py).
- `HELD_TABLES`: the inventory tables a command's snapshot holds with its costs (rules run: its lookups
  read the job records and tags of that state; service/attribution/rollup_versions.py).
"""

import importlib

# Each public name and the module that defines it. A name is imported when first asked for,
# with its module only: `spendlake attribute` loads the query's modules, not the export's,
# the report's or the /metrics tops' (nor the Arrow they need).
_MODULES = {
    "api": ("attribute", "attribute_queries", "attribute_query", "materialise"),
    "answer_notes": ("lacking_cost", "no_bill_note", "outside_the_data", "runs_outside_the_data",
                     "runs_past_the_data", "with_notes"),
    "reconciliation": ("Reconciliation", "reconcile"),
    "resources": ("attribute_resources",),
    "result": ("AttributionResult", "AttributionRow", "Contribution"),
    "clusters": ("ClusterCost", "ClusterUsage", "JobCost", "cluster_totals", "cluster_usage"),
    "query": ("AttributionQuery", "api_parameter", "cli_option", "listed_once", "parse_where"),
    "lines": ("direct_daily_lookup",),
    "compute": ("prorate",),
    "per_line": ("attributed_lines",),
    "ranked": ("DefaultShare", "Ranked", "RankedGroup", "default_shares", "top_groups"),
    "rollup_build": ("RollupBuild",),
    "rollup_kept": ("RollupsKept", "kept_in"),
    "rollup_told": ("told_by",),
    "run_rows": ("runs",),
    "run_query": ("RUNS_SINCE", "RunsQuery"),
    "run_result": ("NO_CLUSTERS", "OTHER", "RunRow", "RunsResult", "RunTotal"),
    "run_story": ("RunInstance", "RunJob", "RunStory"),
    "run_figures": ("UNFINISHED", "job_attempt"),
    "commitment_usage": ("COMMITMENTS_SINCE", "Commitment", "CommitmentsResult", "commitments",
                         "commitments_asked"),
    "metric_top": ("Top", "metrics_anchor"),
    "tops": ("TOPS_FORMAT", "ScrapeTops", "build_tops", "read_tops", "tops_owner"),
    "jobs": ("newly_ended", "newly_unasked"),
    "node_sharing": ("SharedNodes", "shared_nodes"),
    "job_rules": ("IdleRule", "idle_job_rules"),
    "run_costs": ("held_hours_lookup", "run_costs_lookup"),
    "rollup_versions": ("HELD_TABLES",),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
