"""A cost partition altered in place with its size, footer and modification time kept (bit rot,
an edit then `touch -r`: break54 F1): the quick check of every read cannot see it, but the
answers that sum its lines anyway compare them with the ledger, hash the file on a difference
and name it with `spendlake ingest --source S`, which then reads the period again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli

FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("base")
    (root / "export").mkdir()
    shutil.copy(FOCUS, root / "export" / "bill.csv")
    (root / "spendlake.yaml").write_text(yaml.safe_dump({
        "lake": str(root / "lake"), "sources": [{"name": "focus", "kind": "focus", "location": str(root / "export")}],
        "attribution": {"dimensions": {"team": {"tags": ["business_unit"]}}}}))
    assert invoke("--config", str(root / "spendlake.yaml"), "ingest").exit_code == 0
    return root


@pytest.fixture
def lake_copy(base, tmp_path) -> tuple[str, Path]:
    """(config, lake) of a private copy of the base lake, times kept (`cp -a`)."""
    for folder in ("lake", "export"):
        shutil.copytree(base / folder, tmp_path / folder)
    data = yaml.safe_load((base / "spendlake.yaml").read_text())
    data.update(lake=str(tmp_path / "lake"), sources=[{**data["sources"][0], "location": str(tmp_path / "export")}])
    (tmp_path / "spendlake.yaml").write_text(yaml.safe_dump(data))
    return str(tmp_path / "spendlake.yaml"), tmp_path / "lake"


def billed(path: Path) -> object:
    return duckdb.connect().execute("SELECT sum(BilledCost) FROM read_parquet(?)", [str(path)]).fetchone()[0]


def flip_a_billed_cost(data: Path) -> tuple[object, object]:
    """One bit flipped inside a BilledCost page of `data`, the first (from the page's end: its
    values, not its header) after which the file still reads, with another sum; its size,
    footer and modification time kept. Returns (sum before, sum after)."""
    metadata = pq.ParquetFile(data).metadata
    [chunk] = [metadata.row_group(g).column(c) for g in range(metadata.num_row_groups)
               for c in range(metadata.num_columns) if metadata.schema.column(c).name == "BilledCost"]
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    content, times, before = data.read_bytes(), data.stat(), billed(data)
    for offset in range(start + chunk.total_compressed_size - 1, start, -1):
        flipped = bytearray(content)
        flipped[offset] ^= 1
        data.write_bytes(flipped)
        try:
            after = billed(data)
        except duckdb.Error:
            continue
        if after != before:
            os.utime(data, ns=(times.st_atime_ns, times.st_mtime_ns))
            return before, after
    raise AssertionError("no bit of BilledCost's pages reads as another sum")


def test_attribute_check_names_a_partition_altered_in_place_not_a_bug_in_attribution_and_ingest_restores_it(
        lake_copy):
    config, lake = lake_copy
    data = max((lake / "costs").rglob("data.parquet"), key=lambda path: path.stat().st_size)
    period = data.parent.name.removeprefix("billing_period=")
    before, after = flip_a_billed_cost(data)
    assert invoke("--config", config, "status", "--format", "csv").exit_code == 0  # the quick check sees nothing
    result = invoke("--config", config, "attribute", "--check", "--format", "csv")
    assert result.exit_code == 3, result.output
    assert "bug in attribution" not in result.output, result.output
    assert f"error: {data}: cost partition source=focus/billing_period=" in result.output, result.output
    assert "is altered (its SHA-256 differs from the one recorded at commit)" in result.output, result.output
    assert "run `spendlake ingest --source focus` to restore it" in result.output, result.output
    # found as `verify` finds it, so status says it and the ingest it names reads the period again
    assert "altered" in invoke("--config", config, "status", "--format", "csv").output
    assert f"focus {period}: committed" in invoke("--config", config, "ingest", "--source", "focus").output
    assert billed(data) == before != after
    assert invoke("--config", config, "attribute", "--check", "--format", "csv").exit_code == 0
