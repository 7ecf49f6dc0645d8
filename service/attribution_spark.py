"""The attribution on Apache Spark: the same generated SQL (service/attribution_sql.py),
transpiled with sqlglot to Spark SQL and run with bound `?` parameters; the Python steps
(proration, exact shared splits, spellings) stay those of service/attribution_engine.py.

Spark reads the lake as it is: the `costs` table (and `resource_tags`) as Hive-partitioned
Parquet, and the current per-period rollup files where the DuckDB path has written them;
a period without its rollup is rolled up on Spark from the raw lines, with `rollup_sql`.
Spark never writes to the lake. Needs `pip install 'spendlake[spark]'` and Java 17.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from service.attribution_engine import ROLLUP_VIEW, RollupSession
from service.attribution_rollup import ROLLUP_TABLE, cost_partitions, rollup_version
from service.attribution_sql import Sql, inventory_keys_sql, rollup_sql, tag_keys_sql, transpile
from service.core.config import EngineConfig
from service.core.config_attribution import AttributionConfig
from service.core.errors import ConfigError, UsageError
from service.core.lake import DATA_FILE, Lake

# Settings every session gets: no UI, loopback only, bounded memory, UTC, exact decimals
# (ANSI: overflow raises instead of becoming NULL), Hive partition values kept as strings.
BASE_OPTIONS = {
    "spark.ui.enabled": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "true",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
}


def spark_session(engine: EngineConfig):
    """A SparkSession for `engine` (one per process: Spark's builder reuses a running one)."""
    try:
        from pyspark.sql import SparkSession
    except ModuleNotFoundError as error:
        raise ConfigError("engine.kind is spark but pyspark is not installed", where="engine.kind",
                          hint="pip install 'spendlake[spark]' (needs Java 17), or use --engine duckdb") from error
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM binds loopback, not the host's address
    builder = SparkSession.builder.master(engine.master).appName("spendlake")
    for key, value in {**BASE_OPTIONS, **engine.options}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def to_spark(sql: Sql | str, params: list | None = None) -> str:
    """Spark SQL for a DuckDB statement; a construct sqlglot cannot express on Spark is an error."""
    from sqlglot.errors import SqlglotError

    sql = sql if isinstance(sql, Sql) else Sql(sql, list(params or []))
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
    with the DuckDB SQL transpiled to Spark and `?` bound positionally."""

    def __init__(self, spark):
        self.spark = spark

    def frame(self, text: str, params: list | None = None):
        from pyspark.errors import AnalysisException

        spark_sql = to_spark(text, params)
        try:  # Spark analyses eagerly: an unknown function or syntax fails here, by name
            return self.spark.sql(spark_sql, args=[_bind(p) for p in params or []])
        except AnalysisException as error:
            raise UsageError(f"the attribution SQL cannot run on Spark: {str(error).splitlines()[0]}",
                             where="--engine spark", hint="use --engine duckdb, and report the construct named above") from error

    def execute(self, text: str, params: list | None = None) -> _Rows:
        return _Rows(self.frame(text, params))


class _Rows:
    def __init__(self, frame):
        self.frame = frame

    def fetchall(self) -> list[tuple]:
        from pyspark.sql.types import TimestampType

        local = {i for i, f in enumerate(self.frame.schema.fields) if isinstance(f.dataType, TimestampType)}
        return [tuple(_utc_naive(v) if i in local else v for i, v in enumerate(row)) for row in self.frame.collect()]


def _read(spark, table_dir: Path, files: list[Path]):
    return spark.read.option("basePath", str(table_dir)).parquet(*[str(f) for f in files])


class SparkRollupSession(RollupSession):
    """RollupSession whose connection is Spark: views `costs`, `resource_tags` (when the
    lake has it) and the rollups of every cost partition."""

    def __init__(self, lake: Lake, config: AttributionConfig, engine: EngineConfig):
        self.config = config
        self.spark = spark_session(engine)
        self.con = SparkConnection(self.spark)
        parts = cost_partitions(lake)
        costs = _read(self.spark, lake.table_dir("costs"), [p.file for p in parts])
        costs.createOrReplaceTempView("costs")
        inventory = None
        if lake.has_table("resource_tags"):
            table = lake.table_dir("resource_tags")
            _read(self.spark, table, sorted(table.glob(f"source=*/snapshot_date=*/{DATA_FILE}"))) \
                .createOrReplaceTempView("resource_tags")
            inventory = sorted(row[0] for row in self.con.execute(inventory_keys_sql().text).fetchall())
        stored, computed = [], []
        for part in parts:
            target = lake.partition_file(ROLLUP_TABLE, [("source", part.source), ("billing_period", part.period)])
            target = target.with_name(f"{rollup_version(lake, config, part)}.parquet")
            if target.exists():
                stored.append(target)
            else:
                computed.append(self._rollup(part, inventory))
        frames = ([_read(self.spark, lake.table_dir(ROLLUP_TABLE), stored)] if stored else []) + computed
        rollups = frames[0]
        for frame in frames[1:]:
            rollups = rollups.unionByName(frame)
        rollups.createOrReplaceTempView(ROLLUP_VIEW)
        self.files = stored

    def _rollup(self, part, inventory: list[str] | None):
        from pyspark.sql.functions import lit

        keys = tag_keys_sql(part.source, part.period)
        tag_keys = [row[0] for row in self.con.execute(keys.text, keys.params).fetchall()]
        sql = rollup_sql(self.config, tag_keys, part.source, part.period, inventory)
        return (self.con.frame(sql.text, sql.params)
                .withColumn("source", lit(part.source)).withColumn("billing_period", lit(part.period)))
