"""What a source's location holds besides cost rows (RELIABILITY 41-42): the other FOCUS
datasets are skipped with one line each while the cost files ingest, and a location with
nothing the kind reads exits 3 for every registered kind, naming it."""

from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal
from pathlib import Path

import boto3
import duckdb
import pytest
import yaml
from click.testing import CliRunner
from moto import mock_aws

from service.cli.main import cli
from service.core.lake import Lake
from service.core.registry import CONNECTORS, Disposition
from tests.conftest import DATA

TOOLKIT = DATA / "focus-toolkit"
OTHER_DATASETS = {"contract_commitment": "Contract Commitment", "billing_period": "Billing Period",
                  "invoice_detail": "Invoice Detail"}


def spendlake(tmp_path: Path, command: str, entry: dict, section: str = "sources"):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), section: [entry]}))
    return CliRunner().invoke(cli, ["--config", str(config), command])


def reference() -> list[dict[str, str]]:
    with (TOOLKIT / "reference_sums.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def independent_sums(files: list[Path]) -> dict[tuple[str, str], tuple[int, Decimal, Decimal]]:
    """rows, Σ BilledCost, Σ EffectiveCost per (period, currency) at the lake's 12 decimals,
    by plain DuckDB over the cost files (Hive folder values included)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    found: dict[tuple[str, str], tuple[int, Decimal, Decimal]] = {}
    for path in files:
        reader = ("read_parquet(?, hive_partitioning = true)" if path.suffix == ".parquet"
                  else "read_csv(?, all_varchar = true)")
        for period, currency, rows, billed, effective in con.execute(
                f"SELECT left(CAST(BillingPeriodStart AS VARCHAR), 7), BillingCurrency, count(*), "
                f"sum(CAST(BilledCost AS DECIMAL(38,12))), sum(CAST(EffectiveCost AS DECIMAL(38,12))) "
                f"FROM {reader} GROUP BY ALL", [str(path)]).fetchall():
            n, b, e = found.get((period, currency), (0, Decimal(0), Decimal(0)))
            found[(period, currency)] = (n + rows, b + billed, e + effective)
    return found


TOOLKIT_FOLDERS = ["convert/aws-1.3-synthetic-csv", "convert/azure-1.3-synthetic-parquet",
                   "convert/gcp-1.2-synthetic-parquet-hive", "convert/aws-1.3-strict-parquet",
                   "generate/aws-1.3", "generate/azure-1.3", "generate/gcp-1.3"]


@pytest.mark.slow
@pytest.mark.parametrize("folder", TOOLKIT_FOLDERS)
def test_41_a_focus_toolkit_folder_ingests_its_cost_files_and_skips_the_other_datasets(tmp_path, folder):
    location = TOOLKIT / folder
    result = spendlake(tmp_path, "ingest", {"name": "toolkit", "kind": "focus", "location": str(location)})
    assert result.exit_code == 0, result.output
    others = sorted(p for p in location.rglob("*") if any(k in p.name for k in OTHER_DATASETS))
    skipped = [line for line in result.output.splitlines() if ": skipped, " in line]
    assert len(skipped) == len(others)  # one line each, naming the file and the dataset
    for path, line in zip(others, skipped):
        dataset = next(name for key, name in OTHER_DATASETS.items() if key in path.name)
        assert str(path) in line and f"a FOCUS {dataset} dataset" in line, line
    assert len([line for line in result.output.splitlines() if "committed" in line]) == 1

    cost = [p for p in location.rglob("*") if p.is_file() and "cost_and_usage" in str(p.relative_to(location))]
    lake = Lake(tmp_path / "lake")
    held = {(period, currency): (rows, billed, effective) for period, currency, rows, billed, effective
            in lake.query().execute("SELECT billing_period, BillingCurrency, count(*), sum(BilledCost), "
                                    "sum(EffectiveCost) FROM costs GROUP BY ALL").fetchall()}
    assert held == independent_sums(cost)
    for row in reference():  # and the toolkit's own 17-decimal sums, within the lake's rounding
        if row["dataset"] == "CostAndUsage" and row["file"].startswith(folder):
            rows, billed, _ = held[(row["billing_period_start"][:7], row["currency"])]
            assert rows == int(row["n_rows"]) and abs(billed - Decimal(row["billed"])) <= rows * Decimal("5e-13")
    again = spendlake(tmp_path, "ingest", {"name": "toolkit", "kind": "focus", "location": str(location)})
    assert again.exit_code == 0 and "unchanged" in again.output and len(skipped) == again.output.count(": skipped, ")


def test_41_a_folder_of_other_datasets_only_has_nothing_to_ingest(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    for path in (TOOLKIT / "convert" / "aws-1.3-synthetic-csv").glob("synthetic_*"):
        if "cost_and_usage" not in path.name:
            shutil.copy(path, export / path.name)
    result = spendlake(tmp_path, "ingest", {"name": "toolkit", "kind": "focus", "location": str(export)})
    assert result.exit_code == 3, result.output
    assert result.output.count(": skipped, ") == 3 and f"under {export}: 3 file(s) skipped" in result.output


# ---- 42: nothing the kind reads ------------------------------------------------------------

def locations(tmp_path: Path) -> dict[str, Path]:
    empty, foreign = tmp_path / "empty", tmp_path / "foreign"
    empty.mkdir()
    foreign.mkdir()
    (foreign / "README.md").write_text("# exports go here\n")
    (foreign / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (foreign / "notes.json").write_text(json.dumps({"hello": "world"}))
    (foreign / "other.csv").write_text("a,b\n1,2\n")
    return {"empty": empty, "foreign": foreign, "missing": tmp_path / "missing"}


def every_kind() -> list[str]:
    """Every kind that reads a location: billing kinds, and inventory kinds with a `path`
    (k8s-pods reads only Prometheus: tests/test_k8s_pods.py test_42_*)."""
    loaded, broken = CONNECTORS.load_all()
    assert not broken, broken
    return sorted(kind for kind, connector in loaded.items()
                  if connector.feeds.disposition is Disposition.PERIOD or "path" in connector.config_model.model_fields)


@pytest.mark.parametrize("case", ["empty", "foreign", "missing"])
@pytest.mark.parametrize("kind", every_kind())
def test_42_a_location_with_nothing_the_kind_reads_exits_3_naming_it(tmp_path, kind, case):
    location = locations(tmp_path)[case]
    billing = CONNECTORS.get(kind).feeds.disposition is Disposition.PERIOD
    if billing:
        result = spendlake(tmp_path, "ingest", {"name": "src", "kind": kind, "location": str(location)})
    else:
        result = spendlake(tmp_path, "inventory", {"name": "src", "kind": kind, "path": str(location)}, "inventory")
    assert result.exit_code == 3, result.output
    assert str(location) in result.output and "FAILED" in result.output
    assert "Traceback" not in result.output
    state = json.loads((tmp_path / "lake" / "_state" / "sources.json").read_text())["src"]
    assert "last_success" not in state and state["failures_total"] == 1
    assert not list((tmp_path / "lake").glob("*/source=src/*/*.parquet"))


@pytest.mark.parametrize("kind, expected", [
    ("aws-cur", "no legacy CUR manifests or data"), ("aws-cur2", "no CUR 2.0 manifests or data"),
    ("focus", "no FOCUS files"), ("gcp-billing", "no Cloud Billing export files"),
    ("azure-cost", "no Azure cost details files")])
def test_42_an_empty_s3_prefix_says_what_was_expected_under_it(tmp_path, kind, expected):
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="exports")
        s3.put_object(Bucket="exports", Key="elsewhere/report.csv", Body=b"a,b\n1,2\n")
        result = spendlake(tmp_path, "ingest", {"name": "src", "kind": kind, "location": "s3://exports/billing"})
    assert result.exit_code == 3, result.output
    assert f"{expected}" in result.output and "under s3://exports/billing" in result.output


def test_42_an_s3_objects_source_given_nothing_to_read_is_a_config_error(tmp_path):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "inventory": [{"name": "s3", "kind": "s3-objects"}]}))
    result = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert result.exit_code == 2, result.output
    assert "inventory[0]: nothing to read: set buckets, inventory_manifests, path or lifecycle_path" in result.output
