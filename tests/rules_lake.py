"""Build a small lake from YAML rows: `costs` through `commit_costs`, inventory tables through
`commit_snapshot` (one partition per `snapshot_date`, or `day` for gpu_utilization), typed
by service.core.schema."""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from service.core.lake import Lake
from service.core.schema import COST_COLUMNS, INVENTORY_PARTITION, INVENTORY_TABLES, cost_select_list

COST_TYPES = dict(COST_COLUMNS)


def _value(value):
    if value is None:
        return None
    if isinstance(value, dict):  # a MAP such as Tags
        return {"key": list(value), "value": [str(v) for v in value.values()]}
    return str(value)


def _temp_table(con, name: str, types: dict[str, str], rows: list[dict]) -> None:
    unknown = {key for row in rows for key in row} - set(types)
    assert not unknown, f"{name}: not columns of the table: {sorted(unknown)}"
    columns = list(types)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({', '.join(f'{c} {types[c]}' for c in columns)})")
    values = [[_value(row.get(c)) for c in columns] for row in rows]
    con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' for _ in columns)})", values)


def build_lake(lake: Lake, tables: dict[str, list[dict]], snapshot_date: date) -> None:
    con = lake.connect()
    for table, rows in tables.items():
        if table == "costs":
            present = sorted({key for row in rows for key in row})
            _temp_table(con, "rows_costs", {c: COST_TYPES[c] for c in present}, rows)
            expressions = {c: c for c in present}
            expressions.setdefault("BillingPeriodStart", "date_trunc('month', ChargePeriodStart)")
            relation = con.sql(f"SELECT {cost_select_list(expressions)} FROM rows_costs")
            lake.commit_costs(con, relation, source="test", delivery_id="case", periods=None)
            continue
        key = INVENTORY_PARTITION[table]
        by_partition: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            row = dict(row)
            value = row.pop("snapshot_date", None)
            if key == "day":
                value = str(row["hour"])[:10]
            by_partition[str(value or snapshot_date)].append(row)
        for value, part_rows in sorted(by_partition.items()):
            _temp_table(con, f"rows_{table}", dict(INVENTORY_TABLES[table]), part_rows)
            lake.commit_snapshot(con, con.table(f"rows_{table}"), table=table, source="test", key=key, value=value)
