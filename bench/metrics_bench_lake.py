"""The lake metrics_cardinality_bench.py scrapes, and the delivery it hands the running service.

`write_lake` commits `lines` hourly cost lines (50 teams, 400 projects, `size` experiments)
over the 30 days before `end` straight into the lake (no export file: the bench's start).
`write_delivery` writes a FOCUS Parquet export of the same lines with other costs into the
source's folder, replacing the last one: a changed delivery of the same billing period, as a
provider re-delivers the month, which the service's ingest job then commits, rolls up and
builds the metric tops of, with the previous state's tops stored.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import yaml

HOURS = 30 * 24
# (i, s, c): line number, charge hour, cost; $salt varies the costs of a delivery
LINES_SQL = ("SELECT i, $start + to_hours(CAST((i * 7919) % $hours AS BIGINT)) AS s, "
             "CAST(((i * 2654435761 + $salt) % 100000) / 100 AS DECIMAL(38, 12)) AS c FROM range($lines) AS t(i)")
COLUMNS = {
    "BillingPeriodStart": "date_trunc('month', s)", "ChargePeriodStart": "s",
    "ChargePeriodEnd": "s + INTERVAL 1 HOUR", "BillingCurrency": "'USD'",
    "BilledCost": "c", "EffectiveCost": "c", "ServiceName": "'Amazon Elastic Compute Cloud'",
    "Tags": "MAP {'team': 'team-' || (i % 50), 'project': 'p-' || (i % 400), 'experiment': 'exp-' || (i % $size)}",
}
DELIVERY = "focus-export.parquet"


def _params(size: int, lines: int, end: datetime, salt: int) -> dict:
    return {"start": end - timedelta(hours=HOURS), "hours": HOURS, "size": size, "lines": lines, "salt": salt}


def write_lake(workdir: Path, size: int, lines: int, end: datetime) -> Path:
    """The config of a lake holding `lines` hourly cost lines over `size` experiments, over
    the 30 days before `end` (kept when the workdir already holds one)."""
    from service.core.config import load_config
    from service.core.lake import Lake
    from service.core.schema import cost_select_list

    export = workdir / "export"
    export.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "spendlake.yaml"
    config_path.write_text(yaml.safe_dump({
        "lake": str(workdir / "lake"),
        "sources": [{"name": "cur", "kind": "focus", "location": str(export)}],
        "service": {"listen": "127.0.0.1:0"},
    }), encoding="utf-8")
    config = load_config(str(config_path))
    lake = Lake.of(config)
    if lake.ledger():
        return config_path
    con = lake.connect()
    try:
        relation = con.sql(f"SELECT {cost_select_list(COLUMNS)} FROM ({LINES_SQL})",
                           params=_params(size, lines, end, 0))
        lake.commit_costs(con, relation, source="cur", delivery_id=f"bench-{size}-{lines}", periods=None)
    finally:
        con.close()
    return config_path


def lake_end(config_path: Path) -> datetime:
    """Where the lake's lines end (a lake kept from an earlier run keeps its own month)."""
    from service.core.config import load_config
    from service.core.coverage import data_end
    from service.core.lake import Lake

    return data_end(Lake.of(load_config(str(config_path)))).replace(tzinfo=None)


def write_delivery(workdir: Path, size: int, lines: int, end: datetime) -> Path:
    """A FOCUS Parquet export of the lake's lines with costs no earlier delivery had, written
    beside and then renamed over the previous one (the service never sees half a file)."""
    target = workdir / "export" / DELIVERY
    partial = target.with_name(f".{DELIVERY}.partial")
    select = ", ".join(f"{expression} AS {name}" for name, expression in COLUMNS.items())
    con = duckdb.connect(config={"memory_limit": "1GB", "preserve_insertion_order": "false"})
    try:
        con.sql(f"SELECT {select} FROM ({LINES_SQL})",
                params=_params(size, lines, end, time.time_ns() % 100_000)).write_parquet(str(partial))
    finally:
        con.close()
    partial.rename(target)
    return target
