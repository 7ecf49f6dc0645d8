"""gpu-metrics from files: each UTC day's hourly means and instance aggregates are computed from
that day's readings alone (connectors/gpu_metrics.py per_day)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from connectors.gpu_metrics import GpuMetricsConnector
from service.core.config import parse_config

DAYS, INSTANCES, GPUS = 3, 2, 2
READINGS_A_DAY = 24 * INSTANCES * GPUS


class Profiled:
    """A connection whose statements each leave DuckDB's JSON profile in a file of their own."""

    def __init__(self, con: duckdb.DuckDBPyConnection, folder: Path):
        self.con, self.folder, self.profiles = con, folder, []  # type: list[Path]
        con.execute("SET enable_profiling = 'json'")

    def execute(self, sql: str, params=None):
        self.profiles.append(self.folder / f"statement-{len(self.profiles)}.json")
        self.con.execute(f"SET profiling_output = '{self.profiles[-1]}'")
        return self.con.execute(sql, params)

    def __getattr__(self, name: str):
        return getattr(self.con, name)


def grouped_readings(operator: dict) -> list[int]:
    """The rows each aggregate (a GROUP BY computing something, not a DISTINCT) under `operator` took in."""
    own = []
    if operator["name"].endswith("HASH_GROUP_BY") and operator.get("extra_info", {}).get("Aggregates"):
        own = [sum(child["intermediate_rows"] for child in operator.get("children", []))]
    return own + [n for child in operator.get("children", []) for n in grouped_readings(child)]


def test_a_files_hourly_means_are_grouped_a_day_at_a_time(tmp_path):
    # All of a 90-day file's 4.32M readings were one hash table (1.8 CPU s), and its 4.86M rows
    # sorted by hour again to find each day's; now each day's readings are grouped alone.
    path = tmp_path / "metrics.csv"
    path.write_text("resource_id,gpu,hour,util_pct\n" + "".join(
        f"i-{instance},{gpu},2026-11-{20 + day} {hour:02d}:00:00,{10 * gpu + hour}\n"
        for day in range(DAYS) for hour in range(24) for instance in range(INSTANCES) for gpu in range(GPUS)))
    [source] = parse_config({"lake": str(tmp_path / "lake"),
                             "inventory": [{"name": "gpus", "kind": "gpu-metrics", "path": str(path)}]}).inventory
    con = Profiled(duckdb.connect(), tmp_path)
    parts = GpuMetricsConnector(source).snapshot(con, tmp_path, datetime(2026, 11, 28, tzinfo=timezone.utc))
    # each day: its GPUs' hours and an instance aggregate for each instance-hour
    assert [(part.partition, len(part.relation.fetchall())) for part in parts] == [
        (f"2026-11-{20 + day}", READINGS_A_DAY + 24 * INSTANCES) for day in range(DAYS)]
    grouped = [n for profile in con.profiles for operator in json.loads(profile.read_text())["operator"]
               for n in grouped_readings(operator)]
    assert grouped and max(grouped) <= READINGS_A_DAY, grouped
