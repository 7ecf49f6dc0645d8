"""One plan, two engines: the attribution on Spark equals the DuckDB one to the last decimal,
on the synthetic organisation and on every sample export, from the rollups or the raw lines."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from billing_helpers import failures, ingest_files
from click.testing import CliRunner
from spark_support import ORG_ATTRIBUTION, org_lake, require_pyspark
from test_attribution_samples import ATTRIBUTION as SAMPLE_ATTRIBUTION
from test_attribution_samples import EVERYTHING, KIND_BY_FILE, SAMPLES

from service.attribution.api import attribute
from service.attribution.reconciliation import reconcile
from service.attribution.ranked import default_shares, top_groups
from service.attribution.compute import RollupSession
from service.attribution.spark.session import SparkRollupSession
from service.cli.main import cli
from service.core.config import EngineConfig, parse_config
from service.core.errors import ConfigError, DataError, UsageError
from service.core.lake import Lake
from service.core.timewindow import Window
from tests.attribution_helpers import declared_sources

pytestmark = pytest.mark.slow  # a Spark JVM per module, seconds per query

SPARK = EngineConfig(kind="spark", master="local[2]")
# Cuts hourly and daily charge periods at both edges, across a month boundary.
CUT = Window(datetime(2026, 10, 30, 5, 30, tzinfo=timezone.utc), datetime(2026, 11, 1, 12, 20, tzinfo=timezone.utc))
QUERIES = [
    dict(by=("team",)),
    dict(by=("team", "project"), granularity="day"),
    dict(by=("project",), cost="effective", granularity="month", explain=True),
    dict(by=("team",), where={"project": ("a",)}, cost="list", top=3, granularity="week"),
]


@pytest.fixture(scope="module", autouse=True)
def spark_available():
    require_pyspark()


@pytest.fixture(scope="module")
def org(tmp_path_factory):
    return org_lake(tmp_path_factory.mktemp("spark-org"))


def both(lake, config, window, **query):
    duck = attribute(lake, config, window, **query).to_json()
    spark = attribute(lake, config, window, engine=SPARK, **query).to_json()
    return duck, spark


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: ",".join(f"{k}={v}" for k, v in q.items()))
def test_synthetic_organisation_same_answer(org, query):
    lake, config = org
    duck, spark = both(lake, config, CUT, **query)
    assert duck["rows"] and duck["totals"]
    assert spark == duck


def test_the_reports_top_groups_and_default_shares_same_answer(org):
    lake, config = org
    on_spark = config.model_copy(update={"engine": SPARK})
    duck = (top_groups(lake, config, CUT, ("project",), ("team",), 3),
            default_shares(lake, config, CUT, ("team", "project")))
    spark = (top_groups(lake, on_spark, CUT, ("project",), ("team",), 3),
             default_shares(lake, on_spark, CUT, ("team", "project")))
    assert duck[0].top and duck[0].totals and duck[1]["team"]
    assert spark == duck


def test_raw_lines_without_rollups_same_answer_and_spark_writes_nothing(org, tmp_path):
    lake, config = org
    duck = attribute(lake, config, CUT, by=("team", "project"), granularity="day").to_json()
    rollups = lake.root / "attribution_rollup"
    shutil.move(rollups, tmp_path / "kept")
    try:
        spark = attribute(lake, config, CUT, by=("team", "project"), granularity="day", engine=SPARK).to_json()
        checks = reconcile(lake, config, engine=SPARK)
        assert not rollups.exists()  # Spark reads the lake, only the Lake writes it
    finally:
        shutil.rmtree(rollups, ignore_errors=True)
        shutil.move(tmp_path / "kept", rollups)
    assert spark == duck
    assert checks == reconcile(lake, config) and all(c.ok for c in checks)


def test_check_on_spark_from_the_cli(org, tmp_path):
    lake, _ = org
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake, inventory=True),
                                    "attribution": ORG_ATTRIBUTION,
                                    "engine": {"kind": "spark", "master": "local[2]"}}))
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--check", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows and all(Decimal(r["difference"]) == 0 for r in rows)
    duck = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--engine", "duckdb", "--check",
                                    "--format", "json"])
    assert duck.exit_code == 0, duck.output
    assert json.loads(duck.output) == rows


@pytest.mark.parametrize("file", sorted(KIND_BY_FILE))
def test_every_sample_same_answer_on_spark(tmp_path, file):
    kind = KIND_BY_FILE[file]
    lake, result = ingest_files(tmp_path, ("sample", kind, SAMPLES / file))
    assert failures(result) == []
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": SAMPLE_ATTRIBUTION})
    duck, spark = both(lake, config, EVERYTHING, by=("team", "project"), granularity="month", explain=True)
    assert spark == duck
    checks = reconcile(lake, config, engine=SPARK)  # --check on Spark, per sample
    assert checks == reconcile(lake, config) and checks and all(c.ok for c in checks)


def test_construct_spark_cannot_run_is_named(org):
    lake, config = org
    con = SparkRollupSession(lake, config.attribution, SPARK).con
    with pytest.raises(UsageError, match="cannot run on Spark.*(?i:list_reduce)"):
        con.execute("SELECT list_reduce([1, 2], (a, b) -> a + b) FROM costs")


def test_spark_reads_the_rollups_duckdb_wrote(org):
    lake, config = org
    assert lake.has_table("resource_tags")  # the rollup version covers the inventory tags too
    duck_files = RollupSession(lake, config.attribution).files
    spark = SparkRollupSession(lake, config.attribution, SPARK)
    assert len(spark.files) == len(spark.partitions) == len(duck_files) > 1
    assert sorted(f.rsplit("/", 1)[1] for f in spark.files) == sorted(f.name for f in duck_files)


def test_engine_lake_elsewhere_is_read_without_the_configured_lake(org, tmp_path):
    lake, config = org
    copy = tmp_path / "copied-lake"
    shutil.copytree(lake.root, copy)
    moved = config.model_copy(update={"lake": tmp_path / "no-lake-here"})
    engine = SPARK.model_copy(update={"lake": str(copy)})
    spark = attribute(Lake(moved.lake), moved, CUT, by=("team", "project"), engine=engine).to_json()
    assert spark == attribute(lake, config, CUT, by=("team", "project")).to_json()
    assert not (tmp_path / "no-lake-here").exists()


def test_a_filesystem_spark_has_no_connector_for_is_named(org):
    lake, config = org
    engine = SPARK.model_copy(update={"lake": "s3a://example-spendlake-lake/lake"})
    with pytest.raises(ConfigError, match=r"engine\.lake.*hadoop-aws \d+\.\d+") as error:
        attribute(lake, config, CUT, engine=engine)
    assert error.value.exit_code == 2


def test_engine_lake_must_be_absolute_or_a_url():
    with pytest.raises(ConfigError, match=r"engine\.lake.*absolute path nor a URL"):
        parse_config({"engine": {"kind": "spark", "lake": "relative/lake"}})
    assert parse_config({"engine": {"lake": "s3a://bucket/lake"}}).engine.lake == "s3a://bucket/lake"


def test_an_empty_engine_lake_is_named(tmp_path):
    empty = tmp_path / "synced-lake"
    empty.mkdir()
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "local"), "attribution": ORG_ATTRIBUTION,
                                    "engine": {"kind": "spark", "lake": str(empty)}}))
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "7d", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert f"the lake at {empty} is empty" in result.output
    assert json.loads(result.stdout)["rows"] == []


def test_a_corrupt_file_in_the_engine_lake_is_a_data_error_naming_the_file(org, tmp_path):
    lake, config = org
    copy = tmp_path / "copied-lake"
    shutil.copytree(lake.root, copy)
    [first, *_] = sorted((copy / "costs").glob("source=*/billing_period=*/data.parquet"))
    size = first.stat().st_size
    first.write_bytes(b"not parquet")
    engine = SPARK.model_copy(update={"lake": str(copy)})
    with pytest.raises(DataError, match=r"billing_period=\S+ is truncated .11 bytes, the ledger says") as error:
        attribute(lake, config, CUT, engine=engine)  # checked against the ledger before Spark reads it
    assert error.value.where == str(first) and error.value.exit_code == 3
    first.write_bytes(b"x" * size)  # the recorded size, not Parquet: the footer read tells, before Spark reads
    with pytest.raises(DataError, match=r"is truncated \(no readable Parquet footer\)") as error:
        attribute(lake, config, CUT, engine=engine)
    assert error.value.where == str(first) and error.value.exit_code == 3
    assert lake.root.joinpath("costs").exists()  # the configured lake was never touched


def listening_addresses(pid: int) -> set[str]:
    """Local addresses of the TCP sockets process `pid` listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(fields[1].split(":")[0][:width])
    return found


def test_spark_runs_without_ui_on_loopback_with_bounded_memory(org):
    lake, config = org
    spark = SparkRollupSession(lake, config.attribution, SPARK).con.spark
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.ui.enabled") == "false" and spark.sparkContext.uiWebUrl is None
    assert conf.get("spark.driver.memory") == "1g"
    assert conf.get("spark.driver.bindAddress") == conf.get("spark.driver.host") == "127.0.0.1"
    jvm = spark.sparkContext._gateway.proc.pid
    addresses = listening_addresses(jvm)
    # 127.0.0.1, ::1 and ::ffff:127.0.0.1 as /proc writes them
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    assert addresses and addresses <= loopback, addresses


def test_a_second_spark_engine_in_one_process_is_refused_not_ignored(org):
    lake, config = org
    attribute(lake, config, CUT, engine=SPARK)  # the process's Spark session: local[2]
    with pytest.raises(UsageError, match=r"engine\.master: a Spark session on local\[2\] already runs"):
        attribute(lake, config, CUT, engine=SPARK.model_copy(update={"master": "local[1]"}))


def test_the_http_api_honours_the_configured_engine(org, tmp_path):
    """`engine:` in the config reaches /api/v1/attribute: with the lake only where Spark reads
    it (engine.lake), the API answers from there, as DuckDB does from the lake itself."""
    from urllib.parse import parse_qs

    from prometheus_client import CollectorRegistry

    from service.serve.app import Api

    lake, config = org
    copy = tmp_path / "copied-lake"
    shutil.copytree(lake.root, copy)
    moved = config.model_copy(update={"lake": tmp_path / "no-lake-here",
                                      "engine": SPARK.model_copy(update={"lake": str(copy)})})
    query = "since=2026-10-30T05:30:00Z&until=2026-11-01T12:20:00Z&by=team,project"
    response = Api(moved, CollectorRegistry()).handle("/api/v1/attribute", parse_qs(query), None)
    assert response.status == 200, response.body
    assert json.loads(response.body) == attribute(lake, config, CUT, by=("team", "project")).to_json()
    assert json.loads(response.body)["totals"], "an empty answer would mean the local (missing) lake was read"


def test_a_ledger_end_recorded_before_ends_were_bounded_is_capped_on_spark_as_on_duckdb(tmp_path):
    """A ledger entry recorded before commits bounded the data's end (a 2024-09 line's 2099-01-01 as
    it was written): DuckDB's coverage reads its file again (2024-10-02), Spark's session took the
    2099 as it was, so `--engine spark` anchored windows in 2098. It caps it as coverage does without
    the file (usage_end.capped_through)."""
    from test_usage_end_bounded import line, write_bill

    from service.core.coverage import billing_data_through

    folder = write_bill(tmp_path, line("1.5", "2024-09", "2024-09-18T10:00Z", "2024-09-18T11:00Z"),
                        line("2.5", "2024-09", "2024-09-18T22:00Z", "2099-01-01T00:00Z"))
    lake, result = ingest_files(tmp_path, ("bill", "focus", folder))
    assert failures(result) == []
    ledger = lake.root / "_ledger" / "deliveries.json"
    data = json.loads(ledger.read_text())
    data["entries"][0]["data_through"] = "2099-01-01T00:00:00Z"  # as the commit wrote it before it bounded ends
    del data["entries"][0]["data_through_bounded"]
    ledger.write_text(json.dumps(data))
    config = parse_config({"lake": str(lake.root), "sources": [{"name": "bill", "kind": "focus",
                                                                "location": str(folder)}]})
    spark = SparkRollupSession(Lake(lake.root), config.attribution, SPARK).data_through()
    assert spark == billing_data_through(Lake(lake.root)) == {"bill": datetime(2024, 10, 2, tzinfo=timezone.utc)}
