"""Attribution line by line, for a dataset that carries it (`spendlake export --with-attribution`).

`attributed_lines(lake, config, snapshot, where=..., params=..., window=..., allocated_prefix=...)`
is a context manager yielding (connection, relation, extra columns): the cost lines matching
`where` (SQL over `costs`, its values bound in `params`), each with every cost column,
`source`, `billing_period`, the line's price × quantity products (LINE_PRODUCTS: an export
derives ListCost and ContractedCost from them where the bill has none) and LINE_BILLED (a
split part: its line's BilledCost and the parts' before it), and one column
`x_<dimension>` per configured dimension, in the config's order: the value attribution gives
the line (tags, inventory tags, virtual tags, default: service/attribution/sql.py), spelled
as `spendlake attribute` shows it.

A line a shared rule matches is no one's direct spend: it becomes one line per value the
rule splits it over — the weights `attribute` uses for `window` (the values of the rule's
dimension with direct spend in the window, in the line's currency; fixed weights as
configured; billed cost decides, as `attribute`'s default measure) — each carrying the
line's every column, its value in `x_<by>`, and its part of each summable column (costs,
credits, quantities and the line's products; unit prices stay), split exactly: parts rounded
to 12 decimals (quantities 16), the remainder on the largest, so they add up to the line (a
ListCost derived per part, its unit price × its part of the quantity rounded, would not). A
split line is a FOCUS 1.3 *allocated charge* of its *origin charge*, described in the
Allocated columns (named `<allocated_prefix>AllocatedMethodId`, ...):

- AllocatedMethodId `spendlake-shared-<even|proportional|fixed>`; a rule with nothing to
  split over keeps the line whole on the default value: `spendlake-shared-default`;
- AllocatedMethodDetails `{"Elements": [{"AllocatedRatio": r, "UsageUnit": "<currency> direct
  spend", "UsageQuantity": s}], "x_SharedRule": i, "x_Dimension": d, "x_Value": v}` (UsageUnit
  and UsageQuantity only for proportional splits: the value's direct spend);
- AllocatedResourceId `<dimension>/<value>`, AllocatedResourceName the value (both null
  on a line kept on the default: FOCUS's unallocated portion), AllocatedTags
  `{"spendlake/<dimension>": "<value>"}`.

With `attribution.clusters`, a shared GPU cluster's instance lines are first allocated as
`attribute` allocates them (service/attribution/allocation.py: the same SQL, so the same
parts): each line becomes, per clock hour it covers, one line per job that held the
instance's GPUs and one for the cluster's idle rest (per EKS pod and the pods' unused cost
with split cost allocation data). A part carries the line's every column, its hour as
ChargePeriodStart/End, its exact part of each summable column (the products too), the job's
values in the dimensions (`x_run`, `x_job_type`, `x_job_state`, `x_cluster`, `x_user`, and
team, project, experiment from the job), and Allocated columns:

- AllocatedMethodId `spendlake-cluster-gpu-time` (EKS: `spendlake-cluster-eks-split`);
- AllocatedMethodDetails `{"Elements": [{"AllocatedRatio": r, "UsageUnit": "GPU-Hours",
  "UsageQuantity": q}], "x_Placement": "job:<id>" | "idle:<cluster>"}`: r the part's share of
  the hour, q the GPU-hours the job held in it (idle: those no job held); EKS parts weigh
  `"<currency> split cost"` instead;
- AllocatedResourceId the placement (`job:<id>`, `idle:<cluster>`), AllocatedResourceName the
  job's name (else the placement), AllocatedTags `{"spendlake/cluster": c, "spendlake/run": r}`.
A part that a shared rule also matches is then split as any shared line (its Allocated
columns describe that split).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

from service.attribution.allocation_weights import GPU_SHARES
from service.attribution.allocation_eks import NANO
from service.attribution.compute import RollupSession, split_exactly, split_weights, window_parts
from service.attribution.job_how import shown_how_sql
from service.attribution.jobs import allocation_inputs
from service.attribution.needs import Needs
from service.attribution.rollup_versions import inventory_keys
from service.attribution.sql import attributed_sql, dim_col
from service.attribution.statement import Params, run_setup
from service.attribution.tag_keys import all_tag_keys_sql
from service.core.config import Config
from service.core.config_attribution import AttributionConfig
from service.core.folding import folded
from service.core.lake import EXPORT_MEMORY_LIMIT, Lake
from service.core.schema import COST_COLUMN_NAMES, LINE_BILLED, LINE_PRODUCTS
from service.core.snapshot import Snapshot
from service.core.timewindow import Window

ALLOCATED = ("AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName",
             "AllocatedTags")
MONEY_PARTS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "PricingCurrencyEffectiveCost",
               "x_credits", *LINE_PRODUCTS)
QUANTITY_PARTS = ("ConsumedQuantity", "PricingQuantity", "CommitmentDiscountQuantity")
MONEY_QUANTUM, QUANTITY_QUANTUM = Decimal("1e-12"), Decimal("1e-16")
TAG_PREFIX = "spendlake/"
SPLIT_MEASURE = "billed"


@contextmanager
def attributed_lines(lake: Lake, config: AttributionConfig | Config, snapshot: Snapshot, *, where: str,
                     params: Mapping[str, Any], window: Window | None,
                     allocated_prefix: str = "") -> Iterator[tuple[duckdb.DuckDBPyConnection, str, tuple[str, ...]]]:
    """See the module docstring."""
    config = config.attribution if isinstance(config, Config) else config
    dims = config.dimension_order()
    # the lines' allocation, with the export's memory (service/core/lake.py EXPORT_MEMORY_LIMIT)
    session = RollupSession(lake, config, snapshot, Needs(allocates=True), memory_limit=EXPORT_MEMORY_LIMIT)
    try:
        con = session.con
        keys_sql = all_tag_keys_sql()
        tag_keys = [row[0] for row in con.execute(keys_sql.text, keys_sql.params).fetchall()]
        allocation = allocation_inputs(lake, config, con, where, dict(params))
        sql = attributed_sql(config, tag_keys, where, Params(dict(params)), inventory_keys(lake, con),
                             allocation=allocation, every_column=True)
        run_setup(con, sql)
        spellings = session.spellings(dims)
        con.register("attribution_spellings", pa.table({
            "dim": [d for d, _ in spellings], "key": [k for _, k in spellings], "spelling": list(spellings.values())},
            schema=pa.schema([("dim", pa.string()), ("key", pa.string()), ("spelling", pa.string())])))
        joins = " ".join(f"LEFT JOIN attribution_spellings AS s{i} ON s{i}.dim = $dim{i} "
                         f"AND s{i}.key = lower(a.{dim_col(d)})" for i, d in enumerate(dims))
        values = ", ".join(f"coalesce(s{i}.spelling, a.{dim_col(d)}) AS x_{d}" for i, d in enumerate(dims))
        kept = [name for name in COST_COLUMN_NAMES if allocated_prefix or name not in ALLOCATED]
        columns = ", ".join([*(f"a.{name}" for name in (*kept, "source", "billing_period", *LINE_PRODUCTS)),
                             *(f"{sql} AS {name}" for name, sql in LINE_BILLED.items())])
        shown = {d: f"coalesce(s{i}.spelling, a.{dim_col(d)})" for i, d in enumerate(dims)}
        allocated = ", ".join(f"{expr} AS {allocated_prefix}{name}" for name, expr in
                              _cluster_allocated(allocation is not None, allocated_prefix, shown).items())
        con.sql(f"{sql.text} SELECT {columns}, {values}, {allocated}, a.shared FROM attributed AS a {joins}",
                params={**sql.params, **{f"dim{i}": d for i, d in enumerate(dims)}}).create_view("attributed_lines")
        names = [f"{allocated_prefix}{name}" for name in ALLOCATED] if allocated_prefix else []
        split = _split_lines(con, config, dims, window, spellings, allocated_prefix)
        con.register("attributed_splits", split)
        con.execute("CREATE VIEW export_lines AS SELECT * EXCLUDE (shared) FROM attributed_lines "
                    "WHERE shared IS NULL UNION ALL BY NAME SELECT * FROM attributed_splits")
        yield con, "export_lines", (*(f"x_{d}" for d in dims), *names)
    finally:
        session.con.close()


def _split_lines(con: duckdb.DuckDBPyConnection, config: AttributionConfig, dims: Sequence[str],
                 window: Window | None, spellings: Mapping[tuple[str, str], str], prefix: str) -> pa.Table:
    """The shared lines, each as its allocated charges (see the module docstring)."""
    shared = con.sql("SELECT * FROM attributed_lines WHERE shared IS NOT NULL").to_arrow_table()
    schema = shared.schema.remove(shared.schema.get_field_index("shared"))
    rows = shared.to_pylist()
    if not rows:
        return schema.empty_table()
    direct = _direct_spend(con, config, tuple(dims), window)
    out = []
    for row in rows:
        rule_index = row.pop("shared")
        out += _allocated(row, config, rule_index, direct, spellings, prefix)
    return pa.Table.from_pylist(out, schema=schema)


def _cluster_allocated(clusters: bool, prefix: str, shown: Mapping[str, str]) -> dict[str, str]:
    """The Allocated columns of a line as SQL over `attributed AS a`: a cluster part's (see the
    module docstring), else the line's own (FOCUS 1.3: the lake's) or NULL (1.2: `x_` columns);
    `shown`: each dimension's value as exported."""
    own = {name: f"a.{name}" if not prefix else "CAST(NULL AS VARCHAR)" for name in ALLOCATED}
    if not clusters:
        return own
    gpu_hours = f"CAST(a.a_weight AS DOUBLE) / {GPU_SHARES * 3_600_000_000}"
    quantity = f"CASE a.a_basis WHEN 'eks' THEN CAST(a.a_weight AS DOUBLE) / {NANO} ELSE {gpu_hours} END"
    unit = "CASE a.a_basis WHEN 'eks' THEN a.currency || ' split cost' ELSE 'GPU-Hours' END"
    ratio = "round(CAST(a.a_weight AS DOUBLE) / CAST(a.a_weight_total AS DOUBLE), 12)"
    element = f"json_object('AllocatedRatio', {ratio}, 'UsageUnit', {unit}, 'UsageQuantity', round({quantity}, 12))"
    placed = shown_how_sql("a.a_how")  # `job:<id>`: its record is --explain's
    tags = "MAP {" + ", ".join(f"'{TAG_PREFIX}{d}': {shown.get(d, 'NULL')}" for d in ("cluster", "run")) + "}"
    part = {
        "AllocatedMethodId": "CASE a.a_basis WHEN 'eks' THEN 'spendlake-cluster-eks-split' "
                             "ELSE 'spendlake-cluster-gpu-time' END",
        "AllocatedMethodDetails": f"CAST(json_object('Elements', json_array({element}), 'x_Placement', {placed}) "
                                  "AS VARCHAR)",
        "AllocatedResourceId": placed,
        "AllocatedResourceName": f"coalesce(a.j_name, {placed})",
        "AllocatedTags": f"CAST(to_json({tags}) AS VARCHAR)" if prefix else tags,
    }
    return {name: f"CASE WHEN a.a_basis IS NOT NULL THEN {part[name]} ELSE {own[name]} END" for name in ALLOCATED}


def _direct_spend(con, config: AttributionConfig, dims: tuple[str, ...], window: Window | None) -> dict:
    """(dimension, currency, None) → {value (lower case): direct spend} in `window` (one period,
    the whole window), as `attribute` sums it."""
    direct: dict = defaultdict(lambda: defaultdict(Decimal))
    for shared, _, currency, _, values, _, amount in window_parts(con, config, dims, SPLIT_MEASURE, "total", window,
                                                                  False, False):
        if shared is None:
            for dim, value in zip(dims, values):
                direct[(dim, currency, None)][value] += amount
    return direct


def _allocated(row: dict, config: AttributionConfig, rule_index: int, direct: Mapping,
               spellings: Mapping[tuple[str, str], str], prefix: str) -> list[dict]:
    rule = config.shared[rule_index]
    currency = row["BillingCurrency"]
    weights = split_weights(config, rule_index, currency, None, direct)
    method = f"spendlake-shared-{rule.split}"
    if weights is None:  # nothing to split over: the whole line stays on the default value
        weights = {folded(config.dimensions[rule.by].default): Decimal(1)}
        method = "spendlake-shared-default"
    total = sum(weights.values(), Decimal(0))
    parts = {name: split_exactly(row[name], weights, MONEY_QUANTUM) for name in MONEY_PARTS if row[name] is not None}
    parts |= {name: split_exactly(row[name], weights, QUANTITY_QUANTUM)
              for name in QUANTITY_PARTS if row[name] is not None}
    lines = []
    before = row["line_billed_before"]  # the parts' BilledCost before each, in the order written
    for value, weight in weights.items():
        shown = spellings.get((rule.by, value), value)
        line = {**row, **{name: split[value] for name, split in parts.items()}, f"x_{rule.by}": shown}
        if "BilledCost" in parts:
            line["line_billed_before"], before = before, before + parts["BilledCost"][value]
        element: dict[str, Any] = {"AllocatedRatio": _number(weight / total)}
        if rule.split == "proportional" and method != "spendlake-shared-default":
            element |= {"UsageUnit": f"{currency} direct spend", "UsageQuantity": _number(weight)}
        kept = method == "spendlake-shared-default"
        line[f"{prefix}AllocatedMethodId"] = method
        line[f"{prefix}AllocatedMethodDetails"] = json.dumps(
            {"Elements": [element], "x_SharedRule": rule_index, "x_Dimension": rule.by, "x_Value": shown})
        line[f"{prefix}AllocatedResourceId"] = None if kept else f"{rule.by}/{shown}"
        line[f"{prefix}AllocatedResourceName"] = None if kept else shown
        tags = None if kept else {f"{TAG_PREFIX}{rule.by}": shown}
        line[f"{prefix}AllocatedTags"] = json.dumps(tags) if prefix and tags else (list(tags.items()) if tags else None)
        lines.append(line)
    return lines


def _number(value: Decimal) -> float | int:
    """A JSON number: exact ratios rounded to 12 significant decimals."""
    rounded = round(value, 12)
    return int(rounded) if rounded == rounded.to_integral_value() else float(rounded)
