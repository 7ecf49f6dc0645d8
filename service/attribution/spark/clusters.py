"""Shared GPU clusters on the Spark engine: a period rolled up on Spark is attributed in two
parts that add up to DuckDB's rollup of it, row for row.

- The lines no allocation reads (`ALLOCATION_LINES` false: all but the instance lines and EKS
  pod rows) are attributed on Spark by the transpiled rollup SQL, as without `clusters:`
  (a line the allocation does not split gets the same values either way).
- The allocation's lines of the period, the job records (each record as its newest snapshot
  shows it) and the latest inventory tags of those lines' resources are read by Spark, brought
  to the driver as Arrow and rolled up by DuckDB with the allocation
  (service/attribution/allocation.py): the same SQL as `--engine duckdb`, so the same job and
  idle parts to the last decimal. That set is bounded by the clusters' instance-hours, not by
  the bill.

Both parts are grouped by the same keys, and every query sums the rollup view's rows, so the
union answers as the one rollup does.
"""

from __future__ import annotations

import duckdb

from service.attribution.allocation import ALLOCATION_LINES
from service.attribution.jobs import JOBS_TABLE, inputs_on
from service.attribution.sql import ARN_HEAD, ARN_PATH, rollup_sql, run_setup
from service.core.config_attribution import AttributionConfig
from service.core.lake import Lake
from service.core.schema import INVENTORY_TABLES, cost_view_select

# The job columns the allocation reads (`gpu_util_hourly` and `restarts` it does not).
JOB_COLUMNS = tuple((name, kind) for name, kind in INVENTORY_TABLES[JOBS_TABLE]
                    if name not in ("gpu_util_hourly", "restarts"))
PERIOD = "source = $source AND billing_period = $period"
# A job record as its newest snapshot shows it (what the allocation's `a_jobs` keeps of them).
NEWEST_JOBS = ("SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY record_id ORDER BY snapshot_date DESC, "
               "source DESC) AS newest FROM jobs) AS j WHERE newest = 1")


def _arrow(frame):
    """`frame` as an Arrow table, its timestamps as the lake's (UTC, no time zone)."""
    from pyspark.sql.functions import col
    from pyspark.sql.types import TimestampType

    return frame.select([col(f.name).cast("timestamp_ntz").alias(f.name) if isinstance(f.dataType, TimestampType)
                         else col(f.name) for f in frame.schema.fields]).toArrow()


class SparkAllocation:
    """The allocated part of each period's rollup, for one Spark session (`connection`: its
    SparkConnection, with the views `costs`, `resource_tags` when `has_inventory`, and the job
    snapshot files `job_files`); `lake`: the configured lake, whose DuckDB settings the local
    connection takes (it reads nothing from it)."""

    def __init__(self, connection, lake: Lake, config: AttributionConfig, job_files: list[str], has_inventory: bool):
        self.connection, self.local, self.config = connection, lake, config
        self.job_files, self.has_inventory = job_files, has_inventory
        self._jobs = None  # read when a period is first rolled up here

    def jobs(self):
        """Each job record as its newest snapshot shows it (Arrow), None without job records."""
        if self._jobs is None and self.job_files:
            self.connection.lake.read(JOBS_TABLE, self.job_files, merge_schema=True).createOrReplaceTempView(JOBS_TABLE)
            self._jobs = self._read(NEWEST_JOBS)
        return self._jobs

    def rest_sql(self, tag_keys: list[str], source: str, period: str, inventory: list[str] | None):
        """The rollup SQL of the period's lines that the allocation does not read."""
        return rollup_sql(self.config, tag_keys, source, period, inventory, only=f"NOT {ALLOCATION_LINES}")

    def rollup(self, tag_keys: list[str], source: str, period: str, inventory: list[str] | None):
        """The rollup of the period's allocation lines, as an Arrow table (DuckDB's columns)."""
        params = {"source": source, "period": period}
        self.connection.frame(f"SELECT * FROM costs WHERE {PERIOD} AND {ALLOCATION_LINES}",
                              params).createOrReplaceTempView("allocation_lines")
        lines = self._read("SELECT * FROM allocation_lines")
        tags = self._read(
            "SELECT r.* FROM resource_tags r JOIN (SELECT source AS s, max(snapshot_date) AS d FROM resource_tags "
            "GROUP BY source) l ON r.source = l.s AND r.snapshot_date = l.d WHERE r.resource_id IN "
            "(SELECT ResourceId FROM allocation_lines) OR regexp_replace(regexp_replace(r.resource_id, $head, ''), "
            "$path, '') IN (SELECT ResourceId FROM allocation_lines)",
            {"head": ARN_HEAD, "path": ARN_PATH}) if self.has_inventory else None
        con = self.local.connect()
        try:
            self._views(con, lines, tags)
            inputs = inputs_on(con, self.config.clusters, self.jobs() is not None, PERIOD, params)
            sql = rollup_sql(self.config, tag_keys, source, period, inventory, inputs)
            run_setup(con, sql)
            return con.sql(sql.text, params=sql.params).to_arrow_table()
        finally:
            con.close()

    def _read(self, text: str, params: dict | None = None):
        frame = self.connection.frame(text, params)
        return self.connection.lake.reading("the lake", lambda: _arrow(frame))

    def _views(self, con: duckdb.DuckDBPyConnection, lines, tags) -> None:
        """`costs`, `resource_tags` and `jobs` on `con`, typed as the lake's views are."""
        con.register("spark_costs", lines)
        con.execute(f"CREATE VIEW costs AS SELECT {cost_view_select(lines.column_names)}, source, billing_period "
                    "FROM spark_costs")
        if tags is not None:
            con.register("spark_resource_tags", tags)
            con.execute("CREATE VIEW resource_tags AS SELECT * FROM spark_resource_tags")
        if self.jobs() is not None:
            present = set(self.jobs().column_names)
            con.register("spark_jobs", self.jobs())
            con.execute("CREATE VIEW jobs AS SELECT " + ", ".join(  # names from the schema, a column missing: NULL
                f"CAST({_quoted(name) if name in present else 'NULL'} AS {kind}) AS {_quoted(name)}"
                for name, kind in JOB_COLUMNS) + ", source, snapshot_date FROM spark_jobs")


def _quoted(name: str) -> str:
    return f'"{name}"'
