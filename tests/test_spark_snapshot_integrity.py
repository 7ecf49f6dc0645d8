"""RELIABILITY 35-37 on the Spark engine: a job or tag snapshot deleted, truncated or altered
(same size) makes `attribute --engine spark` exit 3 with the DuckDB read's own message, naming
the file and `spendlake inventory --source NAME`; snapshots of a source no longer configured
are not read by either engine."""

from __future__ import annotations

import json
import os
import shutil
from datetime import date
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import written_shorter
from spark_support import ORG_ATTRIBUTION, require_pyspark

from connectors.synthetic.billing import generate_organisation
from connectors.synthetic.inventory import write_inventory
from service.attribution.rollup_versions import ROLLUP_TABLE
from service.attribution.spark.lake import SparkLake
from service.attribution.spark.session import spark_session
from service.cli.main import cli
from service.core.config import EngineConfig, load_config
from service.core.errors import DataError
from service.core.lake import Lake
from service.core.snapshot_ledger import record_file
from tests.test_inventory_integrity import JOBS, flip
from tests.test_lake_derived_files import alter_where_it_still_decodes, another_usd_sum

pytestmark = pytest.mark.slow  # a Spark JVM per module, seconds per query

ATTRIBUTE = ["attribute", "--since", "2026-10-30", "--until", "2026-11-02", "--by", "team", "--format", "json"]


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """The synthetic organisation's bill with its inventory tags and a jobs-file's snapshot,
    rollups written: a config file, and the lake."""
    require_pyspark()
    root = tmp_path_factory.mktemp("spark-snapshots")
    generation = generate_organisation(root / "export", days=2, start=date(2026, 10, 30), seed=5,
                                       formats=("parquet",))
    inventory = write_inventory(generation.organisation, root / "inventory")
    (root / "jobs.csv").write_text(JOBS)
    config = root / "spendlake.yaml"
    config.write_text(yaml.safe_dump({
        "lake": str(root / "lake"),
        "sources": [{"name": "org", "kind": "aws-cur2", "location": str(generation.exports["parquet"])}],
        "inventory": [s for s in inventory.sources("org") if s["kind"] == "aws-tags"]
                     + [{"name": "trace", "kind": "jobs-file", "path": str(root / "jobs.csv")}],
        "attribution": ORG_ATTRIBUTION,
    }))
    for command in (["ingest"], ["inventory"], ["rollup"]):
        done = spendlake(config, *command)
        assert done.exit_code == 0, (command, done.output)
    spark_session(EngineConfig(kind="spark", master="local[2]"))  # the one CliRunner's commands reuse
    return config, Lake.of(load_config(config))


def spendlake(config: Path, *args: str):
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def snapshot(lake: Lake, table: str) -> Path:
    return sorted(lake.table_dir(table).glob("source=*/*=*/data.parquet"))[-1]


def both_engines(config: Path) -> tuple:
    return spendlake(config, *ATTRIBUTE), spendlake(config, *ATTRIBUTE, "--engine", "spark")


def assert_both_exit_3_alike(config: Path, file: Path, state: str) -> None:
    duckdb, spark = both_engines(config)
    assert duckdb.exit_code == 3 and spark.exit_code == 3, (duckdb.output, spark.output)
    assert spark.output == duckdb.output, (duckdb.output, spark.output)
    source = file.parent.parent.name.split("=", 1)[1]
    assert str(file) in spark.output and f"is {state}" in spark.output, spark.output
    assert f"spendlake inventory --source {source}" in spark.output and "Traceback" not in spark.output


@pytest.fixture
def damaged(lake):
    """Restores each snapshot a test damages, and what `verify` recorded of it."""
    config, lake = lake
    kept: dict[Path, tuple[bytes, os.stat_result]] = {}

    def damage(table: str) -> Path:
        file = snapshot(lake, table)
        kept[file] = file.read_bytes(), file.stat()
        return file

    yield config, lake, damage
    for file, (data, times) in kept.items():
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        os.utime(file, ns=(times.st_atime_ns, times.st_mtime_ns))  # as recorded: reads need not hash it
    assert spendlake(config, "verify").exit_code == 0


@pytest.mark.parametrize("table", ["jobs", "resource_tags"])
def test_35_a_deleted_snapshot_exits_3_on_spark_as_on_duckdb(damaged, table):
    config, lake, damage = damaged
    file = damage(table)
    file.unlink()
    assert_both_exit_3_alike(config, file, "missing")


@pytest.mark.parametrize("table", ["jobs", "resource_tags"])
def test_36_a_truncated_snapshot_exits_3_on_spark_as_on_duckdb(damaged, table):
    config, lake, damage = damaged
    file = damage(table)
    file.write_bytes(file.read_bytes()[:file.stat().st_size // 2])
    assert_both_exit_3_alike(config, file, "truncated")


def test_a_shorter_snapshot_that_reads_is_altered_on_spark_as_on_duckdb(damaged):
    config, lake, damage = damaged
    file = damage("jobs")
    written_shorter(file)
    assert_both_exit_3_alike(config, file, "altered")


@pytest.mark.parametrize("table", ["jobs", "resource_tags"])
def test_36_a_snapshot_of_its_recorded_size_without_its_footer_exits_3_on_spark_as_on_duckdb(damaged, table):
    config, lake, damage = damaged
    file = damage(table)
    data = file.read_bytes()
    file.write_bytes(data[:-8] + bytes(8))  # the size matches: only the footer read tells
    assert_both_exit_3_alike(config, file, "truncated")


@pytest.mark.parametrize("table", ["jobs", "resource_tags"])
def test_37_bytes_altered_in_a_snapshot_exit_3_on_spark_as_on_duckdb_once_verify_found_them(damaged, table):
    config, lake, damage = damaged
    file = damage(table)
    flip(file, 200, keep=file.stat())  # same size, same footer, same time (bit rot): only verify's hash tells
    assert spendlake(config, "verify").exit_code == 3
    assert_both_exit_3_alike(config, file, "altered")


def test_35_an_unconfigured_sources_snapshots_are_not_read_by_either_engine(lake):
    config, lake = lake
    file = snapshot(lake, "jobs")
    gone = lake.table_dir("jobs") / "source=gone" / file.parent.name / file.name
    gone.parent.mkdir(parents=True)
    gone.write_bytes(file.read_bytes()[:file.stat().st_size // 2])  # damaged, and its record says so
    record_file(lake.root, gone).parent.mkdir(parents=True)
    shutil.copy(record_file(lake.root, file), record_file(lake.root, gone))
    vanished = lake.table_dir("jobs") / "source=gone" / "snapshot_date=2026-01-01" / file.name
    shutil.copy(record_file(lake.root, file), record_file(lake.root, vanished))  # a record without its file
    try:
        duckdb, spark = both_engines(config)
        assert duckdb.exit_code == spark.exit_code == 0, (duckdb.output, spark.output)
        spark_lake = SparkLake(spark_session(EngineConfig(kind="spark", master="local[2]")), str(lake.root))
        assert spark_lake.table_files("jobs", lake.counts) == [f"file:{file}"]
        with pytest.raises(DataError, match="source=gone"):  # what the filter keeps out
            spark_lake.table_files("jobs")
    finally:
        shutil.rmtree(gone.parent.parent)
        shutil.rmtree(record_file(lake.root, gone).parent)


def test_36_a_damaged_rollup_is_rolled_up_from_the_raw_lines_on_spark_as_on_duckdb(lake):
    config, lake = lake
    before = both_engines(config)
    file = max(lake.table_dir(ROLLUP_TABLE).glob("source=org/billing_period=*/*.parquet"),
               key=lambda path: path.stat().st_mtime)  # a current version (the first ingest's are superseded)
    kept = file.read_bytes()
    file.write_bytes(kept[:len(kept) // 2])
    try:
        duckdb, spark = both_engines(config)
        assert duckdb.exit_code == spark.exit_code == 0, (duckdb.output, spark.output)
        assert json.loads(spark.output) == json.loads(duckdb.output) == json.loads(before[1].output)
    finally:
        file.write_bytes(kept)


def test_37_a_rollup_verify_found_altered_is_rolled_up_from_the_raw_lines_on_spark_as_on_duckdb(lake):
    config, lake = lake
    before = both_engines(config)
    file = max(lake.table_dir(ROLLUP_TABLE).glob("source=org/billing_period=*/*.parquet"),
               key=lambda path: path.stat().st_mtime)
    alter_where_it_still_decodes(file, "billed", another_usd_sum)  # same size and footer, another sum
    try:
        verified = spendlake(config, "verify")
        assert verified.exit_code == 3 and str(file) in verified.output, verified.output
        duckdb, spark = both_engines(config)
        assert duckdb.exit_code == spark.exit_code == 0, (duckdb.output, spark.output)
        assert json.loads(spark.output) == json.loads(duckdb.output) == json.loads(before[1].output)
    finally:
        assert spendlake(config, "rollup").exit_code == 0  # written again
    assert spendlake(config, "verify").exit_code == 0
