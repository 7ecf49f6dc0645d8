"""One plan, two engines: the attribution on Spark equals the DuckDB one to the last decimal,
on the synthetic organisation and on every sample export, from the rollups or the raw lines."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
import yaml
from billing_helpers import failures, ingest_files
from click.testing import CliRunner
from test_attribution_samples import ATTRIBUTION as SAMPLE_ATTRIBUTION
from test_attribution_samples import EVERYTHING, KIND_BY_FILE, SAMPLES

from connectors.synthetic import generate_organisation
from service.attribution import attribute, reconcile
from service.attribution_spark import SparkRollupSession
from service.cli import cli
from service.core.config import EngineConfig, parse_config
from service.core.errors import UsageError
from service.core.timewindow import Window

SPARK = EngineConfig(kind="spark", master="local[2]")
ORG_ATTRIBUTION = {
    "dimensions": {
        "team": {"tags": ["team", "owner"], "rules": [{"match": {"service": "AmazonFSx"}, "value": "storage"}]},
        "project": {"tags": ["project"]},
    },
    "shared": [
        {"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"},
        {"match": {"service": "AWSSupportBusiness"}, "split": "even", "by": "team"},
        {"match": {"charge_category": "Credit"}, "split": "fixed", "by": "project", "weights": {"a": 0.3, "b": 0.7}},
    ],
}
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
    if importlib.util.find_spec("pyspark") is None:
        message = "pyspark not installed: pip install -e '.[test,spark]' (see .ci/run)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def org(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-org")
    export = generate_organisation(root / "export", days=3, start=date(2026, 10, 30), seed=5).exports["parquet"]
    lake, result = ingest_files(root, ("org", "aws-cur2", export))
    assert failures(result) == []
    return lake, parse_config({"lake": str(lake.root), "attribution": ORG_ATTRIBUTION})


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
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "attribution": ORG_ATTRIBUTION,
                                    "engine": {"kind": "spark", "master": "local[2]"}}))
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--check", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows and all(Decimal(r["difference"]) == 0 for r in rows)
    duck = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--engine", "duckdb", "--check",
                                    "--format", "json"])
    assert json.loads(duck.output) == rows


@pytest.mark.parametrize("file", sorted(KIND_BY_FILE))
def test_every_sample_same_answer_on_spark(tmp_path, file):
    kind = KIND_BY_FILE[file]
    lake, result = ingest_files(tmp_path, ("sample", kind, SAMPLES / file))
    assert failures(result) == []
    config = parse_config({"lake": str(lake.root), "attribution": SAMPLE_ATTRIBUTION})
    duck, spark = both(lake, config, EVERYTHING, by=("team", "project"), granularity="month", explain=True)
    assert spark == duck


def test_construct_spark_cannot_run_is_named(org):
    lake, config = org
    con = SparkRollupSession(lake, config.attribution, SPARK).con
    with pytest.raises(UsageError, match="cannot run on Spark.*(?i:list_reduce)"):
        con.execute("SELECT list_reduce([1, 2], (a, b) -> a + b) FROM costs")
