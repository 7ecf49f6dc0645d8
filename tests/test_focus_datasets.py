"""focus-datasets: a FOCUS 1.3/1.4 export's Contract Commitment, Billing Period and Invoice
Detail files go to tables of their own, with the rows and money the files hold, and the cost
rows of the same folder (kind focus) link to them."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.inventory import run_inventory
from tests.conftest import DATA

TOOLKIT = DATA / "focus-toolkit"
# file name part → (table, the money column summed)
DATASETS = {"contract_commitment": ("contract_commitments", "ContractCommitmentCost"),
            "billing_period": ("billing_periods", None), "invoice_detail": ("invoice_details", "BilledCost")}
FOLDERS = ["convert/aws-1.3-synthetic-csv", "convert/azure-1.3-synthetic-parquet", "convert/gcp-1.2-synthetic-parquet-hive",
           "generate/aws-1.3", "generate/azure-1.3", "generate/gcp-1.3"]


def independent(folder: Path) -> dict[str, tuple[int, Decimal | None]]:
    """rows and Σ money per table, by plain DuckDB over the dataset files, at the lake's 12 decimals."""
    con = duckdb.connect()
    found: dict[str, tuple[int, Decimal | None]] = {}
    for part, (table, money) in DATASETS.items():
        files = [str(p) for p in folder.rglob(f"*{part}*") if p.is_file()]
        if not files:
            found[table] = (0, None)
            continue
        reader = "read_parquet(?)" if files[0].endswith(".parquet") else "read_csv(?, all_varchar = true)"
        total = f"sum(CAST({money} AS DECIMAL(38,12)))" if money else "NULL"
        found[table] = tuple(con.execute(f"SELECT count(*), {total} FROM {reader}", [files]).fetchall()[0])
    return found


def held(lake: Lake) -> dict[str, tuple[int, Decimal | None]]:
    with lake.query() as con:
        return {table: tuple(con.execute(f"SELECT count(*), {f'sum({money})' if money else 'NULL'} FROM {table}")
                             .fetchall()[0]) for table, money in DATASETS.values()}


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_dataset_lands_in_its_table_with_the_files_rows_and_money(tmp_path, folder):
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "focus", "kind": "focus-datasets", "path": str(TOOLKIT / folder)}]})
    [outcome] = run_inventory(config)
    assert outcome.error is None, outcome.error
    expected = independent(TOOLKIT / folder)
    assert held(Lake.of(config)) == expected
    assert sum(rows for rows, _ in expected.values()) > 0


def test_costs_link_to_their_invoice_details_commitments_and_billing_period(tmp_path):
    folder = TOOLKIT / "convert" / "azure-1.3-synthetic-parquet"
    document = {"lake": str(tmp_path / "lake"), "sources": [{"name": "azure", "kind": "focus", "location": str(folder)}],
                "inventory": [{"name": "azure-datasets", "kind": "focus-datasets", "path": str(folder)}]}
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(document))
    for command in ("ingest", "inventory"):
        result = CliRunner().invoke(cli, ["--config", str(path), command])
        assert result.exit_code == 0, result.output
    with Lake.of(parse_config(document)).query() as con:
        invoices = con.execute("SELECT count(*), count(d.InvoiceId) FROM costs c LEFT JOIN (SELECT DISTINCT InvoiceId "
                               "FROM invoice_details) d USING (InvoiceId) WHERE c.InvoiceId IS NOT NULL").fetchall()[0]
        applied = [element["ContractCommitmentId"] for (text,) in con.execute(
            "SELECT ContractApplied FROM costs WHERE ContractApplied IS NOT NULL").fetchall()
            for element in json.loads(text)["Elements"]]
        commitments = {row[0] for row in con.execute("SELECT ContractCommitmentId FROM contract_commitments").fetchall()}
        details = con.execute("SELECT count(*) FROM costs c WHERE InvoiceDetailId IS NOT NULL AND NOT EXISTS "
                              "(SELECT 1 FROM invoice_details d WHERE d.InvoiceDetailId = c.InvoiceDetailId)"
                              ).fetchall()[0][0]
        detailed = con.execute("SELECT count(*) FROM costs WHERE InvoiceDetailId IS NOT NULL").fetchall()[0][0]
        periods = con.execute("SELECT count(*) FROM costs c WHERE NOT EXISTS (SELECT 1 FROM billing_periods b "
                              "WHERE b.BillingPeriodStart = c.BillingPeriodStart)").fetchall()[0][0]
        billed = con.execute("SELECT (SELECT sum(BilledCost) FROM costs), (SELECT sum(BilledCost) FROM invoice_details)"
                             ).fetchall()[0]
    assert invoices[0] > 0 and invoices[0] == invoices[1]  # every invoiced cost row finds its invoice
    assert applied and set(applied) <= commitments
    assert detailed > 0 and details == 0  # FOCUS 1.4: each charge names its invoice detail row
    assert periods == 0
    assert billed[0] == billed[1]  # the invoice details add up to the cost rows' billed cost


def test_a_folder_without_these_datasets_fails_naming_it_and_a_missing_one_is_an_empty_snapshot(tmp_path):
    costs_only = TOOLKIT / "convert" / "aws-1.3-strict-parquet"
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "focus", "kind": "focus-datasets", "path": str(costs_only)}]})
    [outcome] = run_inventory(config)
    assert outcome.error is not None and str(costs_only) in str(outcome.error.where)
    assert "no FOCUS Contract Commitment, Billing Period or Invoice Detail files" in str(outcome.error)

    only_commitments = TOOLKIT / "generate" / "aws-1.3"
    config = parse_config({"lake": str(tmp_path / "lake2"),
                           "inventory": [{"name": "focus", "kind": "focus-datasets", "path": str(only_commitments)}]})
    [outcome] = run_inventory(config)
    assert outcome.error is None
    assert outcome.rows["billing_periods snapshot_date=" + next(iter(outcome.rows)).split("=", 1)[1]] == 0


def test_an_older_version_of_a_toolkit_bundle_is_not_read_beside_the_newer(tmp_path, caplog):
    """`focus-toolkit convert --on-exists version` writes the new bundle into `run-<id>/` inside the
    old one: each commitment, invoice and period row was stored twice. The newer one is read."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(TOOLKIT / "convert/azure-1.3-synthetic-parquet", out)
    shutil.copytree(TOOLKIT / "convert/azure-1.3-synthetic-parquet", out / "run-9865fbe6923c")
    run_json = json.loads((out / "_run.json").read_text())
    (out / "_run.json").write_text(json.dumps(run_json | {"generated_at": "2000-01-01T00:00:00+00:00"}))
    document = {"lake": str(tmp_path / "lake"), "inventory": [{"name": "focus", "kind": "focus-datasets", "path": str(out)}]}
    (tmp_path / "spendlake.yaml").write_text(yaml.safe_dump(document))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])
    assert result.exit_code == 0, result.output
    assert held(Lake.of(parse_config(document))) == independent(TOOLKIT / "convert/azure-1.3-synthetic-parquet")
    # told as `ingest` tells it of a focus source: a line of the command's output, not a log record
    skipped = f"focus {out}: skipped, a focus-data-toolkit bundle that run-9865fbe6923c/ replaces (generated later"
    assert result.output.splitlines()[0].startswith(skipped), result.output
    assert "skipped" not in caplog.text


def test_utf16_dataset_files_read_as_their_utf8_text(tmp_path):
    """A Contract Commitment or Invoice Detail CSV saved as UTF-16 (a byte order mark) lands with
    the rows and money of the UTF-8 file, as a UTF-16 cost file does."""
    folder = tmp_path / "export"
    shutil.copytree(TOOLKIT / FOLDERS[0], folder)
    for part in ("contract_commitment", "invoice_detail"):
        [path] = folder.glob(f"*{part}*")
        path.write_bytes(path.read_text(encoding="utf-8").encode("utf-16"))
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "focus", "kind": "focus-datasets", "path": str(folder)}]})
    [outcome] = run_inventory(config)
    assert outcome.error is None, outcome.error
    assert held(Lake.of(config)) == independent(TOOLKIT / FOLDERS[0])
