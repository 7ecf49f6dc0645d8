"""The attribution on Apache Spark: the same generated SQL (service/attribution/sql.py),
transpiled with sqlglot to Spark SQL and run with the same named parameters; the Python steps
(proration, exact shared splits, spellings) stay those of service/attribution/compute.py.

Spark reads the lake as it is, at `engine.lake` (a shared path or s3a://..., listed by
service/attribution/spark/lake.py) or else the config's `lake`: the `costs` table (and `resource_tags`)
as Hive-partitioned Parquet, and the current per-period rollup files where ingest or
`spendlake rollup` stored them; a period without its rollup is rolled up on Spark from the raw lines, with
`rollup_sql` (with `attribution.clusters`, the allocation's lines on DuckDB:
service/attribution/spark/clusters.py). Spark never writes to the lake. Needs
`pip install 'spendlake[spark]'` and Java 17.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from dataclasses import replace
from itertools import islice

from service.attribution.compute import ROLLUP_VIEW, RollupSession
from service.attribution.jobs import JOBS_TABLE
from service.attribution.rollup_told import tell_rolled_up
from service.attribution.rollup_versions import ROLLUP_TABLE, version_of
from service.attribution.sql import rollup_sql
from service.attribution.statement import Sql, transpile
from service.attribution.tag_keys import inventory_keys_sql, tag_keys_sql
from service.core import derived_records
from service.core.config import EngineConfig
from service.core.config_attribution import AttributionConfig
from service.core.coverage import entries_data_through
from service.core.errors import ConfigError, UsageError
from service.core.lake import Lake
from service.core.ledger import LedgerEntry
from service.attribution.spark.clusters import SparkAllocation
from service.attribution.spark.lake import SparkLake

log = logging.getLogger(__name__)

# Settings every session gets: no UI, loopback only, bounded memory, UTC, exact decimals
# (ANSI: overflow raises instead of becoming NULL), Hive partition values kept as strings.
BASE_OPTIONS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",  # stderr is for spendlake's own messages
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "true",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
}


def spark_session(engine: EngineConfig):
    """A SparkSession for `engine`; one per process (another master is refused, not ignored)."""
    try:
        from pyspark.sql import SparkSession
    except ModuleNotFoundError as error:
        raise ConfigError("engine.kind is spark but pyspark is not installed", where="engine.kind",
                          hint="pip install 'spendlake[spark]' (needs Java 17), or use --engine duckdb") from error
    from pyspark import SparkContext

    running = SparkContext._active_spark_context  # getOrCreate would reuse it, ignoring `engine`
    if running is not None and running.master != engine.master:
        raise UsageError(f"a Spark session on {running.master} already runs in this process",
                         where="engine.master", hint="one Spark engine per process: stop that session first")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM binds loopback, not the host's address
    builder = SparkSession.builder.master(engine.master).appName("spendlake")
    endpoint = {}
    if engine.endpoint_url:  # an S3-compatible store: its own endpoint, buckets in the path
        endpoint = {"spark.hadoop.fs.s3a.endpoint": engine.endpoint_url,
                    "spark.hadoop.fs.s3a.path.style.access": "true"}
    for key, value in {**BASE_OPTIONS, **endpoint, **engine.options}.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():  # pyspark's own pandas version notice, not the user's concern
        warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
        session = builder.getOrCreate()
    # Spark's own log only with -v: its failures reach the user as spendlake errors anyway.
    session.sparkContext.setLogLevel("ERROR" if log.isEnabledFor(logging.INFO) else "OFF")
    return session


def to_spark(sql: Sql | str, params: dict | None = None) -> str:
    """Spark SQL for a DuckDB statement; a construct sqlglot cannot express on Spark is an error."""
    from sqlglot.errors import SqlglotError

    sql = sql if isinstance(sql, Sql) else Sql(sql, dict(params or {}))
    try:
        return transpile(sql, "spark")
    except SqlglotError as error:
        raise UsageError(f"the attribution SQL cannot run on Spark: {error}", where="--engine spark",
                         hint="use --engine duckdb, and report the construct named above") from error


def _bind(value):
    # Naive datetimes mean UTC here; pyspark would read them as the process's local time.
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


def _utc_naive(value):
    if isinstance(value, datetime) and value.tzinfo is None:  # pyspark returns local naive times
        return datetime.fromtimestamp(value.timestamp(), timezone.utc).replace(tzinfo=None)
    return value


class SparkConnection:
    """What attribution_engine needs of a DuckDB connection: `execute(sql, params).fetchall()`,
    with the DuckDB SQL transpiled to Spark and its named parameters bound by name."""

    def __init__(self, spark, lake: SparkLake):
        self.spark = spark
        self.lake = lake

    def frame(self, text: str, params: dict | None = None):
        from pyspark.errors import AnalysisException

        spark_sql = to_spark(text, params)
        try:  # Spark analyses eagerly: an unknown function or syntax fails here, by name
            return self.spark.sql(spark_sql, args={name: _bind(value) for name, value in (params or {}).items()})
        except AnalysisException as error:
            raise UsageError(f"the attribution SQL cannot run on Spark: {str(error).splitlines()[0]}",
                             where="--engine spark", hint="use --engine duckdb, and report the construct named above") from error

    def execute(self, text: str, params: dict | None = None) -> _Rows:
        return _Rows(self.frame(text, params), self.lake)


class _Rows:
    def __init__(self, frame, lake: SparkLake):
        self.frame = frame
        self.lake = lake
        self._left: Iterator[tuple] | None = None  # fetchmany's rows: the frame collected once, whole

    def fetchmany(self, size: int) -> list[tuple]:
        """The next `size` rows, as a DuckDB result gives them to the readers that batch theirs."""
        if self._left is None:
            self._left = iter(self.fetchall())
        return list(islice(self._left, size))

    def fetchall(self) -> list[tuple]:
        from pyspark.sql.types import TimestampType

        local = {i for i, f in enumerate(self.frame.schema.fields) if isinstance(f.dataType, TimestampType)}
        rows = self.lake.reading("the lake", self.frame.collect)  # the files are read now
        return [tuple(_utc_naive(v) if i in local else v for i, v in enumerate(row)) for row in rows]


class SparkRollupSession(RollupSession):
    """RollupSession whose connection is Spark: views `costs`, `resource_tags` (when the
    lake has it) and the rollups of every cost partition, read from `engine.lake` (a local
    path, s3a://... or any Hadoop filesystem URL), else the config's lake."""

    local = False

    def __init__(self, lake: Lake, config: AttributionConfig, engine: EngineConfig):
        self.config = config
        spark = spark_session(engine)
        self.lake = SparkLake(spark, engine.lake or str(lake.root))
        self.con = SparkConnection(spark, self.lake)
        self.partitions = self.lake.cost_partitions(lake.counts)
        # The snapshots Spark reads, checked as DuckDB checks them and in its (sorted) order: a
        # damaged one is the same error. The tables it does not read cost it no request.
        job_files, tag_files = (self.lake.table_files(table, lake.counts) for table in (JOBS_TABLE, "resource_tags"))
        self._counts = lake.counts
        self.files: list[str] = []
        if not self.partitions:
            return
        self.lake.read("costs", [str(p.file) for p in self.partitions]).createOrReplaceTempView("costs")
        if tag_files:
            self.lake.read("resource_tags", tag_files).createOrReplaceTempView("resource_tags")
        self._has_inventory, self._inventory = bool(tag_files), None  # keys read once a period needs them
        ledger, stored = self.lake.ledger(), self.lake.rollup_files()
        inventory = self.lake.inventory_latest(tag_files)
        self.allocation = None
        if config.clusters is not None:  # the job snapshots are part of the rollups' version too
            inventory |= self.lake.jobs_basis(job_files)
            self.allocation = SparkAllocation(self.con, lake, config, job_files, bool(tag_files))
        computed, rolled, found = [], [], derived_records.problems(self.lake)  # what the last verify found
        for part in self.partitions:
            version = version_of(config, ledger[(part.source, part.period)], inventory).name
            file = stored.get((part.source, part.period, version))
            if file is not None and self.lake.whole(file, found):
                self.files.append(file)
            else:
                rolled.append(replace(part, entry=ledger[(part.source, part.period)]))
                computed.append(self._rollup(part))
        tell_rolled_up(rolled)  # said once to a command's reader, as the DuckDB read says it
        log.info("Spark reads %s: %d periods from their stored rollups, %d rolled up from the raw lines",
                 self.lake.location, len(self.files), len(computed))
        frames = ([self.lake.read(ROLLUP_TABLE, self.files)] if self.files else []) + computed
        rollups = frames[0]
        for frame in frames[1:]:
            rollups = rollups.unionByName(frame)
        rollups.createOrReplaceTempView(ROLLUP_VIEW)

    def data_through(self) -> dict[str, datetime | None]:
        """From the ledger Spark reads (a ledger from before data_through was recorded: None; one from
        before it was bounded, capped as coverage caps it without the file)."""
        return entries_data_through(self.ledger_entries())

    def ledger_entries(self) -> list[LedgerEntry]:
        """The ledger entries of the configured sources Spark reads."""
        return [e for (source, _), e in self.lake.ledger().items() if self._counts(source)]

    def spellings_of(self, dim: str, keys: Sequence[str]) -> dict[str, str]:
        wanted = set(keys)
        return {key: spelling for (_, key), spelling in self.spellings([dim]).items() if key in wanted}

    def _inventory_keys(self) -> list[str] | None:
        """The inventory's tag keys (None without `resource_tags`), read on first use."""
        if self._has_inventory and self._inventory is None:
            self._inventory = sorted(row[0] for row in self.con.execute(inventory_keys_sql().text).fetchall())
        return self._inventory

    def _rollup(self, part):
        from pyspark.sql.functions import col, lit

        inventory = self._inventory_keys()
        keys = tag_keys_sql(part.source, part.period)
        tag_keys = [row[0] for row in self.con.execute(keys.text, keys.params).fetchall()]
        if self.allocation is None:
            sql = rollup_sql(self.config, tag_keys, part.source, part.period, inventory)
            frame = self.con.frame(sql.text, sql.params)
        else:  # shared GPU clusters: the allocation's lines on DuckDB (service/attribution/spark/clusters.py)
            allocated, sql = self.allocation.rollup(tag_keys, part.source, part.period, inventory)
            rest = self.con.frame(sql.text, sql.params).withColumn("overbooked", lit(0).cast("bigint"))
            allocated = self.con.spark.createDataFrame(allocated)
            frame = rest.unionByName(allocated.select([col(f.name).cast(f.dataType) for f in rest.schema.fields]))
        return frame.withColumn("source", lit(part.source)).withColumn("billing_period", lit(part.period))
