"""What rules read of attribution: direct spend per day, per dimension value.

`direct_daily_lookup(lake, config, plans)` → `direct_daily(dimension, since, until, by, along)`: the cost
lines whose charge period starts in [since, until) and lasts at most a day, each placed by the
attribution SQL (service/attribution/sql.py: tags, inventory tags, virtual tags, default),
with shared GPU clusters allocated to jobs and idle as `attribute()` does (its job parts keep
the instance line's service, account and resource), summed in DuckDB by the value (lower-cased:
attribution compares values case-insensitively), what counted spend filters on, and only the
fields of `by` the calling rule reads (rules.base.DirectDaily): a window's sum by resource needs
no row per day. The last query's results are cached per call arguments; the dimensions of `along`
are summed in the same pass (one attribution of the window) and cached for the calls that follow.

Direct spend, before shared splits — the part of `attribute()` that the lines themselves
carry. A line that a shared-cost rule splits over `dimension` is nobody's direct spend and is
left out (a shared rule that splits over another dimension leaves this one's value as the
line says, as `attribute()` does). Why not apply the splits: a split is weighted by the whole
window's direct spend of every value, so one value's spike would move every other value's
share and show as an anomaly in each of them; a split part names no service, resource or
account of its own to point at as the cause; and spend a config already shares out is not
"unallocated". Budgets, which are about what a value is charged, read `attribute()` with its
splits (service/findings/budgets.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any

from rules.context import DETAIL, DailySpend, DirectDaily, PlannedWindow
from service.attribution.jobs import allocation_inputs
from service.attribution.rollup_versions import READ_TABLES, cost_partitions, inventory_keys
from service.attribution.sql import attributed_sql, dim_col
from service.attribution.statement import Params, run_setup
from service.attribution.tag_keys import all_tag_keys_sql, tag_candidates
from service.core.config import Config
from service.core.folding import folded, folded_forms
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.snapshot import Snapshot

VALUE_COLUMNS = ("spend_value", "plan_project", "plan_experiment", "plan_run")
ALWAYS = ["ChargeCategory", "x_line_item_type", "currency"]  # what the rules' counted() filters on
BATCH = 50_000
COLUMN = {"service": "ServiceName", "account": "SubAccountId", "region": "RegionId", "usage_type": "x_usage_type",
          "resource": "ResourceId", "uncovered_tag_keys": "uncovered_keys", "day": "day",
          "idle": "idle_of", "job": "job_part"}  # of rules.context.DETAIL


def direct_daily_lookup(lake: Lake, config: Config, plans: Sequence[PlannedWindow] = (),
                        snapshot: Snapshot | None = None) -> DirectDaily:
    """`direct_daily(...)` (module docstring), read in `snapshot` (a command's, taken with
    HELD_TABLES: its job records and tags), else in the lake as it is at each call."""
    cache: dict[tuple[str, datetime, datetime, tuple[str, ...]], list[DailySpend]] = {}

    def direct_daily(dimension: str, since: datetime, until: datetime, by: Collection[str] = DETAIL,
                     along: Collection[str] = ()) -> list[DailySpend]:
        # its dimensions are declared ones: config.py refuses a rule's undeclared one at load
        fields = tuple(field for field in DETAIL if field in by)
        wanted = list(dict.fromkeys((dimension, *along)))
        if any((d, since, until, fields) not in cache for d in wanted):
            # the earlier query's answers go first: no rule asks for another's fields and window,
            # and spend-anomaly's (~500k rows at 10M lines) were held through unallocated-spend's
            cache.clear()
            # one attribution (and allocation) of the window for all of them
            found = (_query(lake, config, wanted, since, until, plans, fields, snapshot)
                     if cost_partitions(lake, snapshot) else {})
            cache.update({(d, since, until, fields): found.get(d, []) for d in wanted})
        return cache[(dimension, since, until, fields)]

    return direct_daily


def _query(lake: Lake, config: Config, dimensions: Sequence[str], since: datetime, until: datetime,
           plans: Sequence[PlannedWindow], by: tuple[str, ...], snapshot: Snapshot | None) -> dict[str, list[DailySpend]]:
    attribution = config.attribution
    # the window's lines are attributed (and allocated) in memory, as `attribute` does from raw
    # lines (service/attribution/compute.py): beyond a reader's limit DuckDB spills
    with lake.query(snapshot, memory_limit=READER_MEMORY_LIMIT, tables=READ_TABLES) as con:
        keys_sql = all_tag_keys_sql()
        tag_keys = [row[0] for row in con.execute(keys_sql.text, keys_sql.params).fetchall()]
        tagged = ("Tags",) if "uncovered_tag_keys" in by else ()  # each line's tags, only when asked
        covered = sorted({k for name, dim in attribution.dimensions.items()
                          for k in tag_candidates(dim.tags or (name,), tag_keys)})
        # each line once per dimension (`dim_n`), less the shared-cost rules that split over that one
        split_here = [[k for k, rule in enumerate(attribution.shared) if rule.by == d] for d in dimensions]
        start = "coalesce(ChargePeriodStart, BillingPeriodStart)"
        params = Params()
        where = f"{start} >= {params.bind(since, 'since')} AND {start} < {params.bind(until, 'until')}"
        split_rules = params.bind(split_here, "split_here")
        allocation = allocation_inputs(lake, attribution, con, where, dict(params.values))
        lines = attributed_sql(attribution, tag_keys, where, params, inventory_keys(lake, con),
                               extra_columns=("x_line_item_type", *tagged), allocation=allocation)
        # values compare case-insensitively in attribution: one series per value, lower-cased
        projects = params.bind(sorted({f for p in plans for f in folded_forms(p.project)}), "plan_projects")
        pairs = params.bind([list(pair) for pair in sorted({(project, experiment) for p in plans if p.experiment
                                                            for project in folded_forms(p.project)
                                                            for experiment in folded_forms(p.experiment)})],
                            "plan_experiments")
        project, experiment = (f"lower({dim_col(d)})" for d in ("project", "experiment"))
        # a plan on a run expects that run's spend alone: its lines carry the run (of job records) with the project;
        # without job records (no run dimension) none does
        plan_run = "''"
        if "run" in attribution.dimensions:
            runs = params.bind([list(pair) for pair in sorted({(project, run) for p in plans if p.run
                                                               for project in folded_forms(p.project)
                                                               for run in folded_forms(p.run)})], "plan_runs")
            plan_run = (f"CASE WHEN list_contains(CAST({runs} AS VARCHAR[][]), [{project}, lower({dim_col('run')})]) "
                        f"THEN lower({dim_col('run')}) ELSE '' END")
        value = "CASE dim_n " + " ".join(f"WHEN {n} THEN lower({dim_col(d)})" for n, d in enumerate(dimensions)) + " END"
        plan = [f"CASE WHEN list_contains(CAST({projects} AS VARCHAR[]), {project}) THEN {project} ELSE '' END",
                f"CASE WHEN list_contains(CAST({pairs} AS VARCHAR[][]), [{project}, {experiment}]) "
                f"THEN {experiment} ELSE '' END", plan_run]
        uncovered = ("list_sort(list_filter(coalesce(map_keys(Tags), []), "
                     f"lambda k: NOT list_contains(CAST({params.bind(covered, 'covered')} AS VARCHAR[]), k)))"
                     if tagged else "NULL")
        named = ", ".join(f"{expr} AS {name}" for expr, name in zip(plan, VALUE_COLUMNS[1:]))
        # a cluster's idle part is placed `idle:<cluster>` (allocation.py): no job's, no tag would place it;
        # a job's part `job:<id>...`: its values are the job's, its instance's tags no cause
        idle, job = (("CASE WHEN starts_with(a_how, 'idle:') THEN substr(a_how, 6) END",
                      "coalesce(starts_with(a_how, 'job:'), false)") if allocation else ("NULL", "false"))
        keys = ["dim_n", *VALUE_COLUMNS, *ALWAYS, *(COLUMN[field] for field in by)]
        # what is the line's own (its plan, tag keys, day) is computed once, before the lines are repeated
        sql = (lines.text + "SELECT " + ", ".join(keys) + f", sum(BilledCost) FROM (SELECT *, {value} AS "
               f"{VALUE_COLUMNS[0]} FROM (SELECT *, {named}, {uncovered} AS uncovered_keys, CAST(cp_start AS DATE) "
               f"AS day, CAST({idle} AS VARCHAR) AS idle_of, {job} AS job_part FROM attributed "
               "WHERE cp_end <= cp_start + INTERVAL 1 DAY) AS lines, "
               f"range({len(dimensions)}) AS dims(dim_n) WHERE shared IS NULL "
               f"OR NOT list_contains(CAST({split_rules} AS INTEGER[][])[dim_n + 1], shared)) AS repeated "
               "GROUP BY " + ", ".join(keys))
        run_setup(con, lines)
        result = con.execute(sql, lines.params)
        defaults = [folded(attribution.dimensions[d].default) for d in dimensions]
        # DuckDB gives each row its own copy of a service's or an account's name (most of a row's
        # memory; half a million rows at 10M lines): read in batches, equal ones are kept once
        same: dict[Any, Any] = {}
        unallocated = cache(lambda n, value: folded(value or "") == defaults[n])  # each value folded once

        def once(v: Any) -> Any:
            v = tuple(v) if isinstance(v, list) else v  # a tag-key list
            return same.setdefault(v, v)

        spends: dict[str, list[DailySpend]] = {d: [] for d in dimensions}
        for batch in iter(lambda: result.fetchmany(BATCH), []):
            for n, value, project, experiment, run, category, line_type, currency, *grouped, cost in batch:
                detail = dict.fromkeys(DETAIL) | {field: once(v) for field, v in zip(by, grouped)}
                detail["uncovered_tag_keys"] = detail["uncovered_tag_keys"] or ()
                spends[dimensions[n]].append(DailySpend(
                    once(value), once(project), once(experiment), run=once(run), charge_category=once(category),
                    line_item_type=once(line_type), currency=once(currency), cost=Decimal(cost or 0), **detail,
                    unallocated=unallocated(n, value)))
    return spends
