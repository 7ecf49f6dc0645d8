"""Per-value translations an export joins to its lines: service categories, units, the
names of ids, and which costs another source holds for a line's billing account.

Each depends on a value alone (a service name with its given category; a unit; a region,
sub account or billing account id of a provider), so it is computed once per distinct value
(in Python: service/export/categories.py, units.py) and joined as a small table, instead of
per line.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from service.export.categories import service_pair
from service.export.units import focus_unit

UNIT_COLUMNS = {"PricingUnit": "focus_pricing_unit", "ConsumedUnit": "focus_consumed_unit",
                "CommitmentDiscountUnit": "focus_commitment_unit"}
# A name column, its id column and the column of the name other lines give that id.
NAMED_IDS = (("RegionName", "RegionId", "known_region_name"),
             ("SubAccountName", "SubAccountId", "known_sub_account_name"),
             ("BillingAccountName", "BillingAccountId", "known_billing_account_name"))
# A source's lines of one billing account and period, and whether they hold a BilledCost and an EffectiveCost.
HELD = ("billing_period", "ProviderName", "BillingAccountId", "source")


def _strings(columns: dict[str, list]) -> pa.Table:
    return pa.table(columns, schema=pa.schema([(name, pa.string()) for name in columns]))


def joined_lines(con: duckdb.DuckDBPyConnection, relation: str) -> tuple[list[str], str]:
    """(the billing periods of `relation`, in order; SQL of `relation` with `service_category`,
    `service_subcategory`, `focus_<x>_unit` and `known_<x>_name` columns, from lookup tables
    registered on `con`; `$period` selects a billing period). The periods and every lookup's
    values come from one pass over `relation` (GROUPING SETS): an attributed export's relation
    allocates every line again each time it is read (8 reads took ~200 of its ~550 s at 10M)."""
    found = _distinct(con, relation)
    triples = found[SERVICE]
    pairs = [service_pair(*triple) for triple in triples]
    con.register("export_categories", _strings({
        "ServiceName": [t[0] for t in triples], "ServiceCategory": [t[1] for t in triples],
        "ServiceSubcategory": [t[2] for t in triples], "service_category": [p[0] for p in pairs],
        "service_subcategory": [p[1] for p in pairs]}))
    units = sorted({row[0] for column in UNIT_COLUMNS for row in found[(column,)] if row[0] is not None})
    con.register("export_units", _strings({"unit": units, "focus_unit": [focus_unit(u) for u in units]}))
    unit_joins = " ".join(f"LEFT JOIN export_units AS u{i} ON u{i}.unit = l.{column}"
                          for i, column in enumerate(UNIT_COLUMNS))
    unit_columns = ", ".join(f"u{i}.focus_unit AS {alias}" for i, alias in enumerate(UNIT_COLUMNS.values()))
    name_joins, name_columns = _known_names(con, found)
    held_join, held_columns = _held_elsewhere(con, found[HELD])
    periods = sorted(row[0] for row in found[PERIOD])
    return periods, (f"(SELECT l.*, c.service_category, c.service_subcategory, {unit_columns}, {name_columns}, "
                     f"{held_columns} "
                     f"FROM {relation} AS l "
                     "LEFT JOIN export_categories AS c ON l.ServiceName IS NOT DISTINCT FROM c.ServiceName "
                     "AND l.ServiceCategory IS NOT DISTINCT FROM c.ServiceCategory "
                     f"AND l.ServiceSubcategory IS NOT DISTINCT FROM c.ServiceSubcategory {unit_joins} {name_joins} {held_join} "
                     "WHERE l.billing_period = $period)")


PERIOD = ("billing_period",)
SERVICE = ("ServiceName", "ServiceCategory", "ServiceSubcategory")


def _distinct(con: duckdb.DuckDBPyConnection, relation: str) -> dict[tuple[str, ...], list[tuple]]:
    """Grouping columns → the distinct rows of `relation` over them (with, for a NAMED_IDS pair,
    the first name its lines give the id, and only the ids some line names), in one pass."""
    sets = [PERIOD, SERVICE, *((column,) for column in UNIT_COLUMNS),
            *(("ProviderName", id_column) for _, id_column, _ in NAMED_IDS), HELD]
    keys = list(dict.fromkeys(column for grouping in sets for column in grouping))
    names = ", ".join([f"min(nullif({name}, '')) FILTER (WHERE nullif({id_column}, '') IS NOT NULL "
                       f"AND nullif({name}, '') IS NOT NULL) AS n{i}"
                       for i, (name, id_column, _) in enumerate(NAMED_IDS)]
                      + ["bool_or(BilledCost IS NOT NULL)", "bool_or(EffectiveCost IS NOT NULL)"])
    grouping = ", ".join(f"({', '.join(columns)})" for columns in sets)
    rows = con.execute(f"SELECT GROUPING({', '.join(keys)}) AS g, {', '.join(keys)}, {names} FROM {relation} "
                       f"GROUP BY GROUPING SETS ({grouping})").fetchall()
    found: dict[tuple[str, ...], list[tuple]] = {columns: [] for columns in sets}
    masks = {sum(1 << (len(keys) - 1 - i) for i, key in enumerate(keys) if key not in columns): columns
             for columns in sets}
    for g, *values in rows:
        columns = masks[g]
        row = tuple(values[keys.index(column)] for column in columns)
        named = [i for i, (_, id_column, _) in enumerate(NAMED_IDS) if columns == ("ProviderName", id_column)]
        if named:  # the ids some line names, with that name
            name = values[len(keys) + named[0]]
            if name is None:
                continue
            row += (name,)
        if columns == HELD:  # whether the lines hold each cost
            row += tuple(values[-2:])
        found[columns].append(row)
    return found


def _known_names(con: duckdb.DuckDBPyConnection, found: dict[tuple[str, ...], list[tuple]]) -> tuple[str, str]:
    """(joins, columns): per provider and id, the name the lines that have one give it (the
    first in order when they differ), for the lines that give none (AWS leaves
    product/location empty on some lines of a region it names on others)."""
    joins, columns = [], []
    for i, (_, id_column, alias) in enumerate(NAMED_IDS):
        rows = found[("ProviderName", id_column)]
        con.register(f"export_names{i}", _strings({"provider": [r[0] for r in rows],
                                                   "id": [r[1] for r in rows], "name": [r[2] for r in rows]}))
        joins.append(f"LEFT JOIN export_names{i} AS n{i} ON n{i}.provider IS NOT DISTINCT FROM l.ProviderName "
                     f"AND n{i}.id = l.{id_column}")
        columns.append(f"n{i}.name AS {alias}")
    return " ".join(joins), ", ".join(columns)


def _held_elsewhere(con: duckdb.DuckDBPyConnection, held: list[tuple]) -> tuple[str, str]:
    """(join, columns): `billed_elsewhere` and `effective_elsewhere`, true on a line when another
    source's lines of its billing account and period hold that cost (an Azure actual export's
    source beside an amortized export's: each holds one cost of the same charges), so a cost the
    line lacks is not filled from its other cost and counted twice (see focus.py)."""
    billed: dict[tuple, set[str]] = {}
    effective: dict[tuple, set[str]] = {}
    for period, provider, account, source, has_billed, has_effective in held:
        for holders, has in ((billed, has_billed), (effective, has_effective)):
            if has:
                holders.setdefault((period, provider, account), set()).add(source)
    rows = [(period, provider, account, source, bool(billed.get((period, provider, account), set()) - {source}),
             bool(effective.get((period, provider, account), set()) - {source}))
            for period, provider, account, source, _, _ in held]
    rows = [row for row in rows if row[4] or row[5]]
    table = pa.table([pa.array([row[i] for row in rows], pa.string()) for i in range(4)]
                     + [pa.array([row[i] for row in rows], pa.bool_()) for i in (4, 5)],
                     names=["period", "provider", "account", "source", "billed", "effective"])
    con.register("export_held", table)
    join = ("LEFT JOIN export_held AS h ON h.period = l.billing_period AND h.provider IS NOT DISTINCT FROM "
            "l.ProviderName AND h.account IS NOT DISTINCT FROM l.BillingAccountId AND h.source = l.source")
    return join, "coalesce(h.billed, false) AS billed_elsewhere, coalesce(h.effective, false) AS effective_elsewhere"
