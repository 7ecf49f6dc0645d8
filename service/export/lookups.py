"""Per-value translations an export joins to its lines: service categories and units.

Both depend on a value alone (a service name with its given category; a unit), so they are
computed once per distinct value in Python (service/export/categories.py, units.py) and
joined as small tables, instead of per line.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from service.export.categories import service_pair
from service.export.units import focus_unit

UNIT_COLUMNS = {"PricingUnit": "focus_pricing_unit", "ConsumedUnit": "focus_consumed_unit",
                "CommitmentDiscountUnit": "focus_commitment_unit"}


def _strings(columns: dict[str, list]) -> pa.Table:
    return pa.table(columns, schema=pa.schema([(name, pa.string()) for name in columns]))


def joined_lines(con: duckdb.DuckDBPyConnection, relation: str) -> str:
    """SQL of `relation` with `service_category`, `service_subcategory` and `focus_<x>_unit`
    columns, from lookup tables registered on `con`; `$period` selects a billing period."""
    triples = con.execute(f"SELECT DISTINCT ServiceName, ServiceCategory, ServiceSubcategory FROM {relation}").fetchall()
    pairs = [service_pair(*triple) for triple in triples]
    con.register("export_categories", _strings({
        "ServiceName": [t[0] for t in triples], "ServiceCategory": [t[1] for t in triples],
        "ServiceSubcategory": [t[2] for t in triples], "service_category": [p[0] for p in pairs],
        "service_subcategory": [p[1] for p in pairs]}))
    units = sorted({row[0] for column in UNIT_COLUMNS for row in con.execute(
        f"SELECT DISTINCT {column} FROM {relation} WHERE {column} IS NOT NULL").fetchall()})
    con.register("export_units", _strings({"unit": units, "focus_unit": [focus_unit(u) for u in units]}))
    unit_joins = " ".join(f"LEFT JOIN export_units AS u{i} ON u{i}.unit = l.{column}"
                          for i, column in enumerate(UNIT_COLUMNS))
    unit_columns = ", ".join(f"u{i}.focus_unit AS {alias}" for i, alias in enumerate(UNIT_COLUMNS.values()))
    return (f"(SELECT l.*, c.service_category, c.service_subcategory, {unit_columns} FROM {relation} AS l "
            "LEFT JOIN export_categories AS c ON l.ServiceName IS NOT DISTINCT FROM c.ServiceName "
            "AND l.ServiceCategory IS NOT DISTINCT FROM c.ServiceCategory "
            f"AND l.ServiceSubcategory IS NOT DISTINCT FROM c.ServiceSubcategory {unit_joins} "
            "WHERE l.billing_period = $period)")
