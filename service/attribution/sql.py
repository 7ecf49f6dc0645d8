"""SQL that attributes cost lines, generated from the allocation config.

Statements in plain DuckDB SQL that sqlglot transpiles (map access is `Tags[key]`,
regexes are `regexp_matches`, no `GROUP BY ALL`, no lateral aliases), each returned with
its named parameters (`$p3`, `$since`: a value is bound where it is used, so no order of
concatenation can misplace one) — config values, tag keys and regexes never enter the SQL
text; identifiers come only from validated dimension names:

- `rollup_sql`: one (source, billing period) of the `costs` table → the attributed rollup,
  one row per (charge period, currency, shared rule, dimension values and how each was
  decided) with the sums of the three cost measures. Grouping by the exact charge period
  keeps windows that cut a charge period exact (see service/attribution/api.py).
- `window_sql` (service/attribution/window_sql.py) reads the rollups back.
- `held_records_cte`: the job records a run's row and story read (`spendlake runs`).

service/attribution/statement.py holds a statement with its parameters (and gives it in
Spark's or Trino's dialect), service/attribution/tag_keys.py which tag keys a dimension reads.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from service.attribution.allocation import (JOB_COLUMNS, JOB_FIELD_KEYS, SETTLED_COLUMNS, AllocationInputs, Stage,
                                           allocation_ctes, extra_tag_aliases, jobs_sql, settled_records)
from service.attribution.allocation_hours import LINE_HOURS, LINE_HOURS_COLUMN
from service.attribution.allocation_stage import STAGED_TAGS, held_sql, keyed_lines, lines_sql, members_sql
from service.attribution.grouped_lines import grouped_lines, grouped_steps, kept_by_map, rule_fields
from service.attribution.inventory_sql import inventory_tags_cte
from service.attribution.needs import Needs, needed_dimensions
from service.attribution.statement import Params, Sql
from service.attribution.tag_keys import tag_candidates
from service.core.config_attribution import MATCH_FIELDS, REGEX_FIELDS, AttributionConfig
from service.core.config_clusters import JOB_MATCH_FIELDS
from service.core.folding import folded_forms, folded_in
from service.core.job_states import NOT_FAILED
from service.core.schema import COST_COLUMN_NAMES, LINE_PRODUCTS, line_products_sql

# Cost columns the allocation reads besides those every statement carries.
ALLOCATION_COLUMNS = ("x_instance_type", "x_split_parent_resource_id", "x_split_cost", "x_split_unused_cost")
MEASURES = {"billed": "BilledCost", "effective": "EffectiveCost", "list": "ListCost"}


def dim_col(name: str) -> str:
    return f"d_{name}"


def how_col(name: str) -> str:
    return f"p_{name}"


_STAGES = itertools.count()  # a connection may hold several allocations' tables at once


def rule_condition(match: dict[str, str], params: Params) -> str:
    parts = []
    for key, value in match.items():
        if key == "resource_id":
            parts.append(f"regexp_matches(coalesce(ResourceId, ''), {params.bind(value)})")
        elif key in JOB_MATCH_FIELDS:  # a job's field: NULL (no match) on cost lines and idle parts
            column = JOB_MATCH_FIELDS[key]
            test = (f"regexp_matches({column}, {params.bind(value)})" if key in REGEX_FIELDS
                    else f"lower(trim({column})) {folded_in(params.bind, value)}")
            parts.append(f"({column} IS NOT NULL AND {test})")
        elif key in MATCH_FIELDS:
            parts.append(f"lower(trim({MATCH_FIELDS[key]})) {folded_in(params.bind, value)}")
        else:  # another dimension's value, computed in an earlier step
            parts.append(f"lower({dim_col(key)}) {folded_in(params.bind, value)}")
    return " AND ".join(parts)


def case_else(whens: list[str], otherwise: str) -> str:
    """CASE over `whens` with the bound ELSE value `otherwise` (just it when there is no WHEN)."""
    return f"CASE {' '.join(whens)} ELSE {otherwise} END" if whens else f"CAST({otherwise} AS VARCHAR)"


def attributed_sql(config: AttributionConfig, tag_keys: Iterable[str], where: str, params: Params,
                   inventory_keys: Iterable[str] | None = None, extra_columns: Sequence[str] = (),
                   allocation: AllocationInputs | None = None, every_column: bool = False,
                   needs: Needs = Needs(), parts_only: bool = False,
                   narrow: tuple[str, tuple[str, ...]] | None = None, grouped: bool = False,
                   by_tag_map: bool = False, placed: bool = False) -> Sql:
    """`WITH ..., attributed AS (...)`: every cost line matching `where` with its charge
    period (cp_start, cp_end), currency, shared rule index (NULL for direct spend) and per
    dimension the value (`d_<dim>`, trimmed original spelling) and how it was decided
    (`p_<dim>`: `tag:<key>`, `inventory-tag:<key>`, `rule:<i>` or `default`). Ends with a
    trailing CTE name. `where` holds markers the caller bound in `params`, which the
    statement's own values are added to.

    `inventory_keys` (the tag keys of the lake's `resource_tags`, None when it has none):
    a line whose own tags give a dimension no value takes it from the inventory tags of its
    resource (same key order), before the virtual-tag rules. `extra_columns`: more cost
    columns to carry (canonical names, e.g. `x_line_item_type`). `allocation` (with
    `attribution.clusters`): GPU instances' lines become parts of jobs and idle first
    (service/attribution/allocation.py), and a part's own values and placement come first.
    `every_column`: carry every cost column and the line's LINE_PRODUCTS. `needs`: compute only
    these dimensions and cost measures (default all). `parts_only` (with `allocation`): only the
    lines allocation split (job, idle and pod parts), not the others: the cluster's lines alone
    are read twice.
    `narrow` (dimension, lowercase values): of the lines allocation does not split, only those
    whose tags or inventory tags for that dimension hold one of the values (rollup.py `narrowed_to`).
    `grouped`: the lines allocation does not split are summed by all the dimensions and shared
    rules read of them before those are computed (their count in `a_lines`, 1 on a part);
    `by_tag_map`: by the whole Tags map, not the values of its keys read (with `allocation`,
    the lines it does not split, when it keeps them all: grouped_lines.py `kept_by_map`);
    `placed` (with `grouped` and `allocation`): the parts carry `a_resource` and `a_category`
    (grouped_lines.py `grouped_steps`), what the placed rows group by (placed.py)."""
    tag_keys = list(tag_keys)
    order = needed_dimensions(config, needs.dims)
    aliases = {name: config.dimensions[name].tags or (name,) for name in order}
    extra_aliases = extra_tag_aliases(allocation.clusters) if allocation else {}
    line_keys = tag_keys
    if allocation and allocation.has_jobs:  # a job's labels (and fields) stand for a line's tags
        line_keys = list(dict.fromkeys([*tag_keys, *allocation.label_keys, *JOB_FIELD_KEYS]))
    inv_text, inv_cols = "", {}
    inv_candidates: dict[str, list[str]] = {name: [] for name in [*order, *extra_aliases]}
    if inventory_keys is not None:
        inv_candidates = {name: tag_candidates(keys, inventory_keys) for name, keys in {**aliases, **extra_aliases}.items()}
        wanted = list(dict.fromkeys(k for keys in inv_candidates.values() for k in keys))
        if wanted:
            inv_text, inv_cols = inventory_tags_cte(wanted, params)
    tag_cols: dict[str, str] = {}  # original key → column holding its trimmed, non-empty value
    tag_reads: dict[str, str] = {}  # such a column → its value read from a line's Tags
    candidates = {name: tag_candidates(aliases[name], line_keys) for name in order}
    base_tags = []
    early = grouped and allocation is None  # the lines are grouped as read, before any value is trimmed
    raw_tags: list[str] = []  # early: each tag read, as the lines are grouped by it (g_<n>)
    for name in order:
        for key in candidates[name]:
            if key not in tag_cols:
                tag_cols[key] = f"t_{len(tag_cols)}"
                value = f"Tags[{params.bind(key)}]"
                tag_reads[tag_cols[key]] = f"nullif(trim({value}), '')"
                if early and not by_tag_map:
                    raw_tags.append(value)
                    value = f"g_{len(raw_tags) - 1}"
                base_tags.append(f"nullif(trim({value}), '') AS {tag_cols[key]}")
    staged_keys: list[str] | None = []  # markers of the tag keys a line allocation stages holds one of
    for name, keys in extra_aliases.items():  # the instance tags allocation reads (node, cluster)
        found = [params.bind(k) for k in tag_candidates(keys, tag_keys)]
        inventory = [inv_cols[k] for k in inv_candidates[name] if k in inv_cols]
        values = [f"nullif(trim(Tags[{k}]), '')" for k in found]
        base_tags.append(f"{_first(values + inventory)} AS e_{name}")
        if name in STAGED_TAGS:
            staged_keys = None if staged_keys is None or inventory else [*staged_keys, *found]
    if allocation is None:  # rules on a job's fields (job_name, partition, ...) match no line here
        base_tags += [f"CAST(NULL AS VARCHAR) AS {column}" for column in JOB_MATCH_FIELDS.values()]
    present: dict[str, str] = {}  # narrow: tag key → whether a line's Tags hold the key (`h_<n>`)
    if narrow and not early:  # tested first, it spares most lines the value's lookup, trim and lower:
        for key in candidates[narrow[0]]:  # the scan's filter 0.51 → 0.41 CPU s on the bench's 10M lines
            present[key], marker = f"h_{len(present)}", params.bind(key)
            base_tags.append(f"map_contains(Tags, {marker}) AS {present[key]}")
            if staged_keys is not None:
                staged_keys.append(marker)
    start = "coalesce(ChargePeriodStart, BillingPeriodStart)"
    columns = ["cp_start", "cp_end", "currency", "source", "billing_period", "SubAccountId", "ServiceName", "ResourceId",
               "x_usage_type", "RegionId", "ChargeCategory", "BilledCost", "EffectiveCost", "ListCost",
               *extra_columns, *(ALLOCATION_COLUMNS if allocation else ())]
    if grouped and allocation:  # the rollup reads of a line its keys, measures and the columns rules match:
        fields = {"ResourceId", *rule_fields(config, order), *(["ChargeCategory"] if placed else [])}  # no more held
        columns = [c for c in columns if c not in MATCH_FIELDS.values() or c in fields]
    if every_column:  # the allocation names each column it carries through its parts
        columns = ["cp_start", "cp_end", "currency",
                   *((*COST_COLUMN_NAMES, "source", "billing_period") if allocation else ("costs.*",)),
                   *LINE_PRODUCTS]
    renamed = {"cp_start": f"{start} AS cp_start",
               "cp_end": f"greatest(coalesce(ChargePeriodEnd, {start}), {start}) AS cp_end",
               "currency": "BillingCurrency AS currency",
               **{name: f"{product} AS {name}" for name, product in line_products_sql().items()}}
    for measure, column in MEASURES.items():  # NULL costs nothing to spread and split
        if needs.measures is not None and measure not in needs.measures:
            renamed[column] = f"CAST(NULL AS DECIMAL(38,12)) AS {column}"
    lines, head = "costs", ""
    if early:
        read = [*rule_fields(config, order), *(["ResourceId"] if inv_cols else [])]
        head = grouped_lines(where, raw_tags, list(dict.fromkeys([*read, *(["Tags"] if by_tag_map else [])])),
                             [c for m, c in MEASURES.items() if needs.measures is None or m in needs.measures])
        lines, where = "grouped_lines", "TRUE"
        columns = ["cp_start", "cp_end", "currency", *dict.fromkeys(read), *MEASURES.values(), "a_lines"]
    steps = [
        f"{head}s0 AS (SELECT {', '.join(renamed.get(c, c) for c in dict.fromkeys(columns))}"
        + "".join(f", {t}" for t in base_tags) + "".join(f", {c}" for c in inv_cols.values())
        + f" FROM {lines}" + (f" LEFT JOIN inv ON inv.rid = {lines}.ResourceId" if inv_cols else "")
        + f" WHERE {where})"
    ]
    first, setup, stage = "s0", (), None
    keep = "TRUE"
    if narrow:  # a line can have one of the values only through these columns (the rest is constants)
        dim, values = narrow
        columns_of = {tag_cols[k]: present.get(k) for k in candidates[dim]}
        columns_of |= {inv_cols[k]: None for k in inv_candidates[dim] if k in inv_cols}
        marker = params.bind(list(values)) if columns_of else None  # bound and not read: the statement fails
        keep = " OR ".join(f"({held} AND list_contains({marker}, lower({c})))" if held else
                           f"list_contains({marker}, lower({c}))" for c, held in columns_of.items()) or "FALSE"  # only parts
        staged_keys = None if not all(columns_of.values()) else staged_keys  # an inventory tag: not by keys alone
        if not allocation:
            steps.append(f"s0k AS (SELECT * FROM s0 WHERE {keep})")
            first = "s0k"
    if allocation:
        all_columns = [*dict.fromkeys(columns), *tag_cols.values(), *(f"e_{n}" for n in extra_aliases),
                       *inv_cols.values()]
        extra = {name: f"e_{name}" for name in extra_aliases}
        run_cols = [tag_cols[k] for k in candidates.get("run", ())]
        number = next(_STAGES)
        stage = Stage(*(f"a_stage_{table}_{number}" for table in ("jobs", "lines", "members", "held")))
        # the staged lines carry a condition on Tags alone (pushed into the scan) and their instance-hours
        keyed = keyed_lines(staged_keys)
        head = "WITH " + inv_text + steps[0].replace("s0 AS (", "s0 AS NOT MATERIALIZED (", 1).replace(
            f" FROM {lines}", f", {keyed} AS a_keyed, {LINE_HOURS} AS {LINE_HOURS_COLUMN} FROM {lines}", 1) + " "
        setup = tuple(Sql(f"CREATE OR REPLACE TEMP TABLE {table} AS {text}", params.values) for table, text in (
            (stage.jobs, jobs_sql(allocation)), (stage.lines, head + lines_sql(extra, keep, 'a_keyed')),
            (stage.members, head + ", " + members_sql(allocation, stage, extra, params)),
            (stage.held, head + held_sql(stage, extra, keep, 'a_keyed'))))
        steps[0] = steps[0] + ", " + allocation_ctes(allocation, stage, all_columns, tag_cols, list(inv_cols.values()),
                                                     extra, run_cols, order, params, keep,
                                                     unread=[c for c in MEASURES.values() if c in renamed]).rstrip(", ")
        first = "a_parts" if parts_only else "s0a"
    if grouped and allocation and not parts_only:
        kept = None
        if by_tag_map and keep == "TRUE":  # the kept lines grouped by their Tags map, then their tags read
            kept = kept_by_map(steps, where, [renamed.get(c, c) for c in ("cp_start", "cp_end", "currency")],
                               [*dict.fromkeys([*rule_fields(config, order), *(["ResourceId"] if inv_cols else [])])],
                               {c: renamed.get(c, c) for c in MEASURES.values()}, stage, tag_reads,
                               list(inv_cols.values()))
        first = grouped_steps(steps, config, order, [*tag_cols.values(), *inv_cols.values()],
                              list(MEASURES.values()), kept, placed)
    for i, name in enumerate(order, start=1):
        dim = config.dimensions[name]
        value_cases = [f"WHEN {tag_cols[k]} IS NOT NULL THEN {tag_cols[k]}" for k in candidates[name]]
        value_cases += [f"WHEN {inv_cols[k]} IS NOT NULL THEN {inv_cols[k]}" for k in inv_candidates[name]]
        found_by = ([(tag_cols[k], f"tag:{k}") for k in candidates[name]]
                    + [(inv_cols[k], f"inventory-tag:{k}") for k in inv_candidates[name]])
        how_cases = [f"WHEN {col} IS NOT NULL THEN {params.bind(how)}" for col, how in found_by] if needs.hows else []
        if allocation:  # a part of a job or of idle: its own values first, its placement as how
            if name in JOB_COLUMNS:
                value_cases.insert(0, f"WHEN jd_{name} IS NOT NULL THEN jd_{name}")
            how_cases.insert(0, "WHEN a_how IS NOT NULL THEN a_how")
        for j, rule in enumerate(dim.rules):
            cond = rule_condition(rule.match, params)
            value_cases.append(f"WHEN {cond} THEN {params.bind(rule.value.strip())}")
            if needs.hows:
                how_cases.append(f"WHEN {cond} THEN {params.bind(f'rule:{j}')}")
        how = case_else(how_cases, params.bind("default")) if needs.hows else "CAST(NULL AS VARCHAR)"  # read by explain
        previous = first if i == 1 else f"s{i - 1}"
        steps.append(f"s{i} AS (SELECT *, {case_else(value_cases, params.bind(dim.default.strip()))} AS {dim_col(name)}, "
                     f"{how} AS {how_col(name)} FROM {previous})")
    shared_cases = [f"WHEN {rule_condition(rule.match, params)} THEN {k}" for k, rule in enumerate(config.shared)]
    shared = f"CASE {' '.join(shared_cases)} ELSE NULL END" if shared_cases else "NULL"
    last = f"s{len(order)}" if order else first
    steps.append(f"attributed AS (SELECT *, CAST({shared} AS INTEGER) AS shared FROM {last})")
    return Sql("WITH " + inv_text + ", ".join(steps) + " ", params.values, setup, stage)


def _first(values: list[str]) -> str:
    """The first non-NULL of `values` (a typed NULL when there is none)."""
    return f"coalesce({', '.join(values)})" if values else "CAST(NULL AS VARCHAR)"


def rollup_sql(config: AttributionConfig, tag_keys: Iterable[str], source: str, period: str,
               inventory_keys: Iterable[str] | None = None, allocation: AllocationInputs | None = None,
               needs: Needs = Needs(), only: str = "TRUE", narrow: tuple[str, tuple[str, ...]] | None = None,
               by_tag_map: bool = False, placed: bool = False) -> Sql:
    """The attributed rollup of one (source, billing period) of the `costs` view; with
    `allocation`, `overbooked` counts the instance slots whose jobs held more than it had.
    `needs`: only those dimensions' columns and measures (default all, as stored). `only`:
    a condition on the lines (SQL over `costs`, no values), to roll up a part of the period.
    `narrow`, `by_tag_map` (DuckDB only: Spark groups by no map): see `attributed_sql`.
    `placed` (with `allocation`): the rows it groups, with the parts' `a_resource` and
    `a_category`, to stage once for the rollup (`rollup_select`) and the placed rows (placed.py)."""
    params = Params()
    where = f"source = {params.bind(source, 'source')} AND billing_period = {params.bind(period, 'period')} AND {only}"
    lines = attributed_sql(config, tag_keys, where, params, inventory_keys, allocation=allocation, needs=needs,
                           narrow=narrow, grouped=True, by_tag_map=by_tag_map, placed=placed)
    keys = _rollup_keys(config, needs)
    if placed:
        columns = [*keys, *MEASURES.values(), "a_lines", "a_overbooked", "a_resource", "a_category"]
        return Sql(lines.text + f"SELECT {', '.join(columns)} FROM attributed", lines.params, lines.setup, lines.stage)
    return Sql(lines.text + rollup_select(config, needs, allocation is not None, "attributed"), lines.params,
               lines.setup, lines.stage)


def _rollup_keys(config: AttributionConfig, needs: Needs) -> list[str]:
    dims = [c for name in needed_dimensions(config, needs.dims) for c in (dim_col(name), how_col(name))]
    return ["cp_start", "cp_end", "currency", "shared", *dims]


def rollup_select(config: AttributionConfig, needs: Needs, allocated: bool, rows: str) -> str:
    """The rollup's SELECT over the attributed rows `rows` (`attributed`, or a table staged from them)."""
    sums = [f"coalesce(sum({col}), 0) AS {m}" if needs.measures is None or m in needs.measures
            else f"CAST(NULL AS DECIMAL(38,12)) AS {m}" for m, col in MEASURES.items()]
    keys = _rollup_keys(config, needs)
    return ("SELECT " + ", ".join(keys) + ", " + ", ".join(sums) + ", CAST(sum(a_lines) AS BIGINT) AS lines"
            + (", CAST(sum(a_overbooked) AS BIGINT) AS overbooked" if allocated else "")
            + f" FROM {rows} GROUP BY " + ", ".join(keys))


def resources_sql(config: AttributionConfig, tag_keys: Iterable[str], resource_ids: Sequence[str],
                  inventory_keys: Iterable[str] | None = None) -> Sql:
    """Per resource id, each dimension's value on its latest line."""
    params = Params()
    where = (f"ResourceId IN ({', '.join(params.bind(r) for r in resource_ids)})" if resource_ids
             else "ResourceId IS NOT NULL")
    lines = attributed_sql(config, tag_keys, where, params, inventory_keys)
    picks = ", ".join(f"arg_max({dim_col(d)}, cp_start) AS {d}" for d in config.dimension_order())
    return Sql(lines.text + f"SELECT ResourceId, {picks} FROM attributed GROUP BY ResourceId", lines.params)


def held_records_cte(params: Params, since: Any = None, until: Any = None, run: str | None = None,
                     failed_before: bool = False, not_ascii: bool = False) -> str:
    """`j_records`: the newest snapshot of each job record that held GPUs (a start, GPUs, a run
    id), as allocation reads them; overlapping [since, until) (naive UTC) when given, of `run`
    (any case) when given, and with `not_ascii` of every run id that is not ASCII too (a run id
    written half composed, half not, folds to `run` in Python alone: the caller keeps the run's).
    `failed_before` (with `since`): also, of the runs with a record in the window, those that
    ended at or before `since` in a state that may be re-run (not NOT_FAILED), the failures
    their first attempts in the window may restart (core.job_states.Restarts); the records read
    once for both."""
    kept = ["newest = 1", "start_time IS NOT NULL", "gpus > 0", "coalesce(trim(run_id), '') <> ''"]
    if until is not None:
        kept.append(f"start_time < {params.bind(until, 'until')}")
    if run is not None:
        ours = f"list_contains({params.bind(folded_forms(run), 'run')}, lower(trim(run_id)))"
        kept.append(f"({ours} OR strlen(run_id) <> length(run_id))" if not_ascii else ours)
    held = f"SELECT * EXCLUDE (newest, {', '.join(SETTLED_COLUMNS)}) FROM ({settled_records()}) AS j"
    if since is None:
        return f"j_records AS ({held} WHERE {' AND '.join(kept)})"
    within = f"(end_time IS NULL OR end_time > {params.bind(since, 'since')})"
    if not failed_before:
        return f"j_records AS ({held} WHERE {' AND '.join([*kept, within])})"
    not_failed = ", ".join(f"'{state}'" for state in NOT_FAILED if state)
    failed = f"(state IS NOT NULL AND state NOT IN ({not_failed}))"
    # held: the window's records and every failure before it, not the history's others (a year of it)
    return (f"j_held AS MATERIALIZED ({held} WHERE {' AND '.join(kept)} AND ({within} OR {failed})), "
            f"j_records AS (SELECT * FROM j_held WHERE {within} OR "
            f"lower(trim(run_id)) IN (SELECT lower(trim(run_id)) FROM j_held WHERE {within}))")
