"""JSON from outside nested thousands deep (100,000 `[` is 100 kB): Python's parser raises
RecursionError, which ended a command in a traceback. Every reader of an outside JSON file
says it as it says any file that is not JSON: exit 3 naming the file, or, where an
unreadable file has a meaning of its own (a record: hash the snapshot again), that meaning.
The lake's own tables' JSON columns (a finding's evidence, a plan's inputs) are named as
damaged lake files. The slurmrestd answer is in tests/test_slurm_jobs_http.py, the Spark
readers' in tests/test_spark_snapshot_digest.py."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from test_cli_hardening import invoke, write_config

from connectors.focus_bundles import _generated
from connectors.gcp_billing import py_literal_json
from connectors.slurm_records import comment_labels
from service.core import derived_records, json_text, snapshot_ledger
from service.core.lake import Lake
from service.findings import store
from service.planning import plans

DEEP = "[" * 100_000


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def aws_cur(t: Path) -> tuple[dict, Path]:
    manifest = write(t / "cur" / "report" / "20261101-20261201" / "report-Manifest.json", DEEP)
    return {"sources": [{"name": "cur", "kind": "aws-cur", "location": str(t / "cur")}]}, manifest


def azure(t: Path) -> tuple[dict, Path]:
    manifest = write(t / "azure" / "export" / "20261101-20261130" / "run-1" / "manifest.json", DEEP)
    return {"sources": [{"name": "az", "kind": "azure-cost", "location": str(t / "azure")}]}, manifest


def sacct(t: Path) -> tuple[dict, Path]:
    path = write(t / "sacct.json", '{"jobs": ' + DEEP)
    return {"inventory": [{"name": "slurm", "kind": "slurm-jobs", "path": str(path)}]}, path


def tags_dump(t: Path) -> tuple[dict, Path]:
    path = write(t / "tags.json", DEEP)
    return {"inventory": [{"name": "tags", "kind": "aws-tags", "path": str(path)}]}, path


def s3_manifest(t: Path) -> tuple[dict, Path]:
    path = write(t / "inv" / "manifest.json", DEEP)
    return {"inventory": [{"name": "s3", "kind": "s3-objects", "inventory_manifests": [str(path)]}]}, path


def s3_lifecycle(t: Path) -> tuple[dict, Path]:
    path = write(t / "lifecycle.json", DEEP)
    return {"inventory": [{"name": "s3", "kind": "s3-objects", "lifecycle_path": str(path)}]}, path


def lake_state(t: Path) -> tuple[dict, Path]:
    (t / "focus").mkdir()
    return ({"sources": [{"name": "f", "kind": "focus", "location": str(t / "focus")}]},
            write(t / "lake" / "_state" / "sources.json", DEEP))


def ledger(t: Path) -> tuple[dict, Path]:
    return lake_state(t)[0], write(t / "lake" / "_ledger" / "deliveries.json", DEEP)


FAILING = [(aws_cur, ["ingest"]), (azure, ["ingest"]), (sacct, ["inventory"]), (tags_dump, ["inventory"]),
           (s3_manifest, ["inventory"]), (s3_lifecycle, ["inventory"]), (lake_state, ["ingest"]),
           (ledger, ["status"])]


@pytest.mark.parametrize("setup, command", FAILING, ids=[f.__name__ for f, _ in FAILING])
def test_json_nested_too_deeply_exits_3_naming_the_file(tmp_path, setup, command):
    config, path = setup(tmp_path)
    result = invoke("--config", str(write_config(tmp_path / "c.yaml", {"lake": str(tmp_path / "lake"), **config})),
                    *command)
    assert result.exit_code == 3, result.output
    assert "JSON nested too deeply" in result.output and str(path.resolve()) in result.output, result.output


def own_table(t: Path, table: str, source: str, column: str, schema: pa.Schema) -> Path:
    """The lake's one-file `table`, written as its command writes it, one row whose JSON
    `column` nests 100,000 deep (and whose other columns are what a reader needs)."""
    row = {name: None for name in schema.names} | {"id": "f1", "name": "p1", "project": "p", "rule": "idle-gpu",
                                                   "category": "waste", "status": "open", "impact_usd": 1, column: DEEP}
    row |= {name: datetime(2026, 11, 1) for name in ("start", "end", "first_seen", "last_seen")}
    row |= {name: 1 for name in schema.names if name.endswith(("_low", "_high", "_days"))}
    lake = Lake(t / "lake")
    con = lake.connect()
    return lake.commit_snapshot(con, con.from_arrow(pa.Table.from_pylist([row], schema=schema)), table=table,
                                source=source, key="snapshot", value="current")


ESTIMATE = ["estimate", "--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "8", "--mfu", "0.4",
            "--price-per-gpu-hour", "2", "--register", "p2", "--project", "p", "--start", "2026-12-01"]
OWN = [("findings", "engine", "evidence", store.SCHEMA, ["findings"], "finding f1's evidence"),
       ("plans", plans.SOURCE, "inputs", plans.SCHEMA, ESTIMATE, "plan p1's inputs")]


@pytest.mark.parametrize("table, source, column, schema, command, what", OWN, ids=[o[0] for o in OWN])
def test_own_table_json_nested_too_deeply_exits_3_naming_the_file(tmp_path, table, source, column, schema, command,
                                                                   what):
    path = own_table(tmp_path, table, source, column, schema)
    config, _ = lake_state(tmp_path)
    result = invoke("--config", str(write_config(tmp_path / "c.yaml", {"lake": str(tmp_path / "lake"), **config})),
                    *command)
    assert result.exit_code == 3, result.output
    assert f"{what} is not JSON: JSON nested too deeply" in result.output, result.output
    assert str(path) in result.output and "which writes it again" in result.output, result.output


def test_records_and_labels_nested_too_deeply_read_as_unreadable_ones(tmp_path):
    """A record that cannot be read does not vouch for its file; a comment is not labels."""
    for path, broken in ((tmp_path / "deep.json", DEEP), (tmp_path / "cut.json", "{")):
        write(path, broken)
        assert snapshot_ledger._read_record(path) == {}
        assert derived_records._read_record(path) is None
        assert _generated(lambda key: path.read_bytes(), "manifest.json") == ""
    assert comment_labels('{"run": ' + DEEP) == {}
    assert py_literal_json(DEEP) is None  # a GCP label list that is neither JSON nor a Python literal


def test_loads_gives_back_what_json_loads_does():
    assert json_text.loads(b'{"a": [[1]]}') == {"a": [[1]]}
    with pytest.raises(ValueError, match="nested too deeply"):
        json_text.loads('{"a": ' * 100_000)
