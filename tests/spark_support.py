"""What the Spark tests share: pyspark or a clear failure, the synthetic organisation's lake
with its inventory tags, and the S3A connector jars for a lake in S3."""

from __future__ import annotations

import importlib.util
import os
from datetime import date
from pathlib import Path

import pytest

from connectors.synthetic.billing import generate_organisation
from connectors.synthetic.inventory import write_inventory
from service.attribution.api import materialise
from service.core.config import Config, parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from service.ingest.inventory import run_inventory
from tests.conftest import REPO

S3A_JARS = REPO / ".cache" / "s3a-jars"
NOT_UPLOADED = {"_staging", "_locks"}  # what `aws s3 sync` of a quiet lake would leave behind anyway
ORG_ATTRIBUTION = {
    "dimensions": {
        "team": {"tags": ["team", "owner-team", "owner"],
                 "rules": [{"match": {"service": "AmazonFSx"}, "value": "storage"}]},
        "project": {"tags": ["project"]},
    },
    "shared": [
        {"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"},
        {"match": {"service": "AWSSupportBusiness"}, "split": "even", "by": "team"},
        {"match": {"charge_category": "Credit"}, "split": "fixed", "by": "project", "weights": {"a": 0.3, "b": 0.7}},
    ],
}
# hadoop-aws 3.3.1 (the jar .ci/s3a-jars finds) on pyspark's newer Hadoop client: that
# client's core-default.xml writes durations with units ("60s") where 3.3.1 reads plain
# numbers, and names AWS SDK v2 credential providers where 3.3.1 speaks SDK v1. A cluster
# whose hadoop-aws matches its Hadoop needs none of this.
S3A_COMPAT_OPTIONS = {
    "spark.hadoop.fs.s3a.aws.credentials.provider": "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
    "spark.hadoop.fs.s3a.connection.establish.timeout": "30000",
    "spark.hadoop.fs.s3a.connection.timeout": "200000",
    "spark.hadoop.fs.s3a.threads.keepalivetime": "60",
    "spark.hadoop.fs.s3a.multipart.purge.age": "86400",
}


def _missing(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def require_pyspark() -> None:
    if importlib.util.find_spec("pyspark") is None:
        _missing("pyspark not installed: pip install -e '.[test,spark]' (see .ci/run)")


def s3a_jars() -> list[Path]:
    """hadoop-aws and the AWS SDK bundle; under CI=true their absence fails the test."""
    jars = sorted(S3A_JARS.glob("*.jar"))
    if len(jars) < 2:
        _missing(f"no S3A jars in {S3A_JARS}: run `bash .ci/s3a-jars` (see .ci/run)")
    return jars


def lake_objects(root: Path, *, rollups: bool = True) -> list[tuple[str, Path]]:
    """(key relative to the lake root, file) of a lake copied to S3, without its rollups
    unless `rollups`."""
    skip = NOT_UPLOADED | (set() if rollups else {"attribution_rollup"})
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return [(p.relative_to(root).as_posix(), p) for p in files if p.relative_to(root).parts[0] not in skip]


def org_lake(root: Path, *, days: int = 3, start: date = date(2026, 10, 30)) -> tuple[Lake, Config]:
    """The synthetic organisation's bill across a month boundary, ingested with its inventory
    tags (so attribution reads `resource_tags` too), rollups written."""
    generation = generate_organisation(root / "export", days=days, start=start, seed=5, formats=("parquet",))
    inventory = write_inventory(generation.organisation, root / "inventory")
    config = parse_config({
        "lake": str(root / "lake"),
        "sources": [{"name": "org", "kind": "aws-cur2", "location": str(generation.exports["parquet"])}],
        "inventory": [s for s in inventory.sources("org") if s["kind"] == "aws-tags"],
        "attribution": ORG_ATTRIBUTION,
    })
    assert [str(o.error) for o in ingest(config).failed] == []
    assert all(o.error is None for o in run_inventory(config))
    lake = Lake(config.lake)
    materialise(lake, config)
    return lake, config
