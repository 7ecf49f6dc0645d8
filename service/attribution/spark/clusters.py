"""Shared GPU clusters on the Spark engine: a period rolled up on Spark is attributed in two
parts that add up to DuckDB's rollup of it, row for row.

- The lines of the instances a cluster holds (or EKS pods name as parent) and the pod rows
  are rolled up by DuckDB with the allocation (service/attribution/allocation.py): the same
  SQL as `--engine duckdb`, so the same job and idle parts to the last decimal. Spark reads
  them, with the job records (each as its newest snapshot shows it) and the latest inventory
  tags of those resources, and hands them to DuckDB in the driver as Arrow. Which instances:
  the allocation's own first stage, run by DuckDB on a narrow projection of every instance
  line of the period (times, instance, type, node and cluster tags).
- All other lines are attributed on Spark by the transpiled rollup SQL, as without `clusters:`
  (a line the allocation does not split gets the same values either way).

The driver holds the clusters' instance-hours and the jobs, and a narrow row per instance
line, not the bill. Both parts are grouped by the same keys and every query sums the rollup
view's rows, so the union answers as the one rollup does.
"""

from __future__ import annotations

import itertools

import duckdb

from service.attribution.allocation import ALLOCATION_LINES, INSTANCE_ID, extra_tag_aliases, newest_records
from service.attribution.jobs import JOBS_TABLE, inputs_on
from service.attribution.inventory_sql import ARN_HEAD, ARN_PATH
from service.attribution.sql import rollup_sql
from service.attribution.statement import Sql, used
from service.attribution.tag_keys import tag_candidates
from service.core import job_windows
from service.core.config_attribution import AttributionConfig
from service.core.lake import Lake
from service.core.schema import INVENTORY_TABLES, cost_view_select

# The job columns the allocation reads (`gpu_util_hourly` and `restarts` it does not).
JOB_COLUMNS = tuple((name, kind) for name, kind in INVENTORY_TABLES[JOBS_TABLE]
                    if name not in ("gpu_util_hourly", "restarts"))
# What the allocation's first stage reads of a line (its tags: only the node and cluster tags).
NARROW = ("ResourceId", "x_instance_type", "x_split_parent_resource_id", "ChargePeriodStart", "ChargePeriodEnd",
          "BillingPeriodStart", "BillingCurrency", "source", "billing_period")
PERIOD = "source = $source AND billing_period = $period"
# A job record as its newest snapshot shows it (what the allocation's `a_jobs` keeps of them),
# and every record of a pod read by uid: the allocation takes the newest again from these, and a
# record read by name of another cluster is a pod read by uid only if no such record is as old as
# it (allocation.POD), so it must see them all as DuckDB does.
NEWEST_JOBS = f"SELECT * FROM ({newest_records('jobs')}) AS j WHERE newest = 1 OR a_uid IS NOT NULL"
_VIEWS = itertools.count()  # each period's Spark views get their own names


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
        self._jobs = self._windows = None  # read when a period is first rolled up here

    def jobs(self):
        """The job records the allocation reads (NEWEST_JOBS, Arrow), None without job records."""
        if self._jobs is None and self.job_files:
            self.connection.lake.read(JOBS_TABLE, self.job_files, merge_schema=True).createOrReplaceTempView(JOBS_TABLE)
            self._jobs = self._read(NEWEST_JOBS)
            self._windows = self.connection.lake.job_snapshots(self.job_files)
        return self._jobs

    def rollup(self, tag_keys: list[str], source: str, period: str, inventory: list[str] | None):
        """(the rollup of the period's cluster lines as an Arrow table with DuckDB's columns, the
        rollup SQL of its other lines for Spark)."""
        from pyspark.sql.functions import map_filter

        number = next(_VIEWS)
        lines, members = f"allocation_lines_{number}", f"allocation_members_{number}"
        self.connection.frame(f"SELECT * FROM costs WHERE {PERIOD} AND {ALLOCATION_LINES}",
                              {"source": source, "period": period}).createOrReplaceTempView(lines)
        keys = [key for aliases in extra_tag_aliases(self.config.clusters).values()
                for key in tag_candidates(aliases, tag_keys)]
        narrow = self.connection.frame(f"SELECT * FROM {lines}").select(
            *NARROW, map_filter("Tags", lambda key, _: key.isin(keys)).alias("Tags"))
        tags = self._read(
            f"SELECT r.* FROM resource_tags r JOIN (SELECT source AS s, max(snapshot_date) AS d FROM resource_tags "
            f"GROUP BY source) l ON r.source = l.s AND r.snapshot_date = l.d WHERE r.resource_id IN "
            f"(SELECT ResourceId FROM {lines}) OR regexp_replace(regexp_replace(r.resource_id, $head, ''), "
            f"$path, '') IN (SELECT ResourceId FROM {lines})",
            {"head": ARN_HEAD, "path": ARN_PATH}) if self.has_inventory else None
        con = self.local.connect()
        try:
            self._views(con, self._arrow(narrow), tags)
            inputs = inputs_on(con, self.config.clusters, self.jobs() is not None, PERIOD,
                               {"source": source, "period": period})
            sql = rollup_sql(self.config, tag_keys, source, period, inventory, inputs)
            jobs, tagged, find_members, keep_held = sql.setup  # (allocation_stage.py)
            for step in (jobs, tagged, find_members):
                _run(con, step)
            self.connection.spark.createDataFrame(con.sql(
                f"SELECT DISTINCT a_instance FROM {sql.stage.members} WHERE a_instance IS NOT NULL").to_arrow_table(),
                schema="a_instance string").createOrReplaceTempView(members)
            held = (f"((ResourceId IS NOT NULL AND {INSTANCE_ID} IN (SELECT a_instance FROM {members})) "
                    "OR x_split_parent_resource_id IS NOT NULL)")
            con.execute("DROP VIEW costs")
            self._costs(con, self._read(f"SELECT * FROM {lines} WHERE {held}"))
            _run(con, tagged)  # the staged lines again, with every column: the held lines' own
            _run(con, keep_held)
            allocated = con.sql(sql.text, params=sql.params).to_arrow_table()
        finally:
            con.close()
        return allocated, rollup_sql(self.config, tag_keys, source, period, inventory,
                                     only=f"NOT ({ALLOCATION_LINES} AND {held})")

    def _read(self, text: str, params: dict | None = None):
        return self._arrow(self.connection.frame(text, params))

    def _arrow(self, frame):
        return self.connection.lake.reading("the lake", lambda: _arrow(frame))

    def _costs(self, con: duckdb.DuckDBPyConnection, lines) -> None:
        """`costs` on `con` over the Arrow table `lines`, typed as the lake's view is."""
        name = f"spark_costs_{next(_VIEWS)}"
        con.register(name, lines)
        con.execute(f"CREATE VIEW costs AS SELECT {cost_view_select(lines.column_names)}, source, billing_period "
                    f"FROM {name}")

    def _views(self, con: duckdb.DuckDBPyConnection, lines, tags) -> None:
        """`costs`, `resource_tags` and `jobs` on `con`, typed as the lake's views are."""
        self._costs(con, lines)
        if tags is not None:
            con.register("spark_resource_tags", tags)
            con.execute("CREATE VIEW resource_tags AS SELECT * FROM spark_resource_tags")
        if self.jobs() is not None:
            present = set(self.jobs().column_names)
            con.register("spark_jobs", self.jobs())
            con.execute("CREATE VIEW jobs AS SELECT " + ", ".join(  # names from the schema, a column missing: NULL
                f"CAST({_quoted(name) if name in present else 'NULL'} AS {kind}) AS {_quoted(name)}"
                for name, kind in JOB_COLUMNS) + ", source, snapshot_date FROM spark_jobs")
            job_windows.create_view(con, self._windows)


def _run(con: duckdb.DuckDBPyConnection, step: Sql) -> None:
    con.execute(step.text, used(step.text, step.params))


def _quoted(name: str) -> str:
    return f'"{name}"'
