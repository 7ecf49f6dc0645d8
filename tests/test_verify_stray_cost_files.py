"""A file beside a cost partition's data.parquet (`data (1).parquet`, a file manager's copy) is
read by nothing: `verify` lists it as `stray` (break47 #15: it said ok), and every read, verify's
exit code among them, stays as it was."""

from __future__ import annotations

import json
import shutil

from tests.test_lake_integrity import BILLED, attributed_total, lake, partition, spendlake  # noqa: F401  (a fixture)


def test_verify_lists_a_copy_beside_a_cost_partition_as_stray_and_reads_ignore_it(lake):  # noqa: F811
    config, store = lake
    copy = partition(store).with_name("data (1).parquet")
    shutil.copy(partition(store), copy)
    result = spendlake(config, "verify", "--format", "json")
    assert result.exit_code == 0, result.output  # nothing reads it: nothing fails
    rows = json.loads(result.stdout)
    assert [r["check"] for r in rows if r["table"] == "costs"] == ["ok", "stray"]
    [stray] = [r for r in rows if r["check"] == "stray"]
    assert stray | {"detail": None} == {"source": "trey", "billing_period": "2024-06", "check": "stray", "detail": None,
                                        "table": "costs", "partition": "billing_period=2024-06/data (1).parquet"}
    assert stray["detail"].startswith("data (1).parquet: a file beside the partition's data.parquet that no read uses")
    assert attributed_total(config) == BILLED  # not counted twice, not failed
    assert spendlake(config, "status", "--format", "json").exit_code == 0
    copy.unlink()
    rows = json.loads(spendlake(config, "verify", "--format", "json").stdout)
    assert [r["check"] for r in rows if r["table"] == "costs"] == ["ok"]
