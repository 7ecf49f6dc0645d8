"""The Spark engine versions its rollups as DuckDB does, by each inventory snapshot's recorded
SHA-256 (size and footer rows read through Hadoop, the file not read), hashing a snapshot only
without a usable record."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from spark_support import require_pyspark

from service.attribution.jobs import basis_of, jobs_basis
from service.attribution.spark.lake import SparkLake
from service.attribution.spark.session import spark_session
from service.core.config import EngineConfig
from service.core.errors import DataError
from service.core.snapshot_ledger import RECORDS, record_file
from tests.test_inventory_integrity import lake, snapshot  # noqa: F401 (fixture)
from tests.test_snapshot_digest import hashed_basis

pytestmark = pytest.mark.slow  # a Spark JVM per module


@pytest.fixture(scope="module")
def spark():
    require_pyspark()
    return spark_session(EngineConfig(kind="spark", master="local[2]"))


def test_spark_takes_the_recorded_digest_without_hashing_the_snapshot(lake, spark):
    config, lake = lake
    assert SparkLake(spark, str(lake.root)).jobs_basis(SparkLake(spark, str(lake.root)).table_files("jobs")) \
        == jobs_basis(lake) == hashed_basis(lake)
    path = record_file(lake.root, snapshot(lake))
    path.write_text(json.dumps({**json.loads(path.read_text()), "sha256": "ab" * 32}))  # hashing would not say it
    spark_lake = SparkLake(spark, str(lake.root))
    expected = basis_of({"source=trace": [(snapshot(lake).parent.name, "ab" * 32, "")]})
    assert spark_lake.jobs_basis(spark_lake.table_files("jobs")) == expected == jobs_basis(lake)


@pytest.mark.parametrize("record", [None, "not json", "[" * 100_000,  # nested past Python's parser
                                    '{"size": 1, "rows": 3000, "sha256": "x"}'])
def test_spark_hashes_a_snapshot_without_a_usable_record(lake, spark, record):
    config, lake = lake
    expected = hashed_basis(lake)
    files = SparkLake(spark, str(lake.root)).table_files("jobs")  # listed while whole
    if record is None:
        shutil.rmtree(lake.root / RECORDS)
    else:
        record_file(lake.root, snapshot(lake)).write_text(record)
    spark_lake = SparkLake(spark, str(lake.root))
    assert spark_lake.jobs_basis(files) == expected
    if record is not None and record.startswith("{"):  # a record of another file: a read names it altered
        with pytest.raises(DataError, match="is altered"):
            spark_lake.table_files("jobs")
    else:
        assert spark_lake.table_files("jobs") == files


def test_spark_names_a_state_file_nested_too_deeply(lake, spark):
    config, lake = lake
    state = lake.root / "_state" / "verify.json"
    state.parent.mkdir(exist_ok=True)
    state.write_text("[" * 100_000)
    with pytest.raises(DataError, match="state file is unreadable: JSON nested too deeply") as raised:
        SparkLake(spark, str(lake.root)).read_state("verify")
    assert str(state) in str(raised.value)



@pytest.mark.parametrize("stand_in", ["fifo", "link to /dev/zero"])
def test_spark_refuses_a_fifo_or_a_link_to_dev_zero_in_the_lake_instead_of_reading_it(lake, spark, stand_in):
    """Hadoop lists either as a file of 0 bytes: hashing the snapshot (its record no longer
    describes it) opened a FIFO, which never returns, or read /dev/zero, which never ends."""
    config, lake = lake
    file, state = snapshot(lake), lake.root / "_state" / "verify.json"
    files = SparkLake(spark, str(lake.root)).table_files("jobs")  # listed while whole
    for path in (file, state):
        path.unlink(missing_ok=True)
        os.mkfifo(path) if stand_in == "fifo" else path.symlink_to("/dev/zero")
    spark_lake = SparkLake(spark, str(lake.root))
    with pytest.raises(DataError, match="not a regular file but a FIFO or a device") as raised:
        spark_lake.jobs_basis(files)
    assert str(raised.value).startswith(f"{file}: ")
    with pytest.raises(DataError, match="not a regular file") as raised:
        spark_lake.read_state("verify")
    assert str(raised.value).startswith(f"{state}: ")
