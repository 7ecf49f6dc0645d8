"""Currency codes as exports write them: 'usd' and ' USD ' are USD in the lake, whatever the
connector; a value that is no code after that fails its delivery, naming the file and the value.
A sum of zero is printed as a number, not as Decimal's `0E-12`."""

from __future__ import annotations

import csv

import yaml
from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli
from service.core import staging
from service.core.lake import Lake

SAMPLE = {"focus": SAMPLES / "focus" / "focus_1.0_sample_1000.csv",
          "azure-cost": SAMPLES / "azure" / "ea_actual_anonymous_sample.csv"}
CURRENCY = {"focus": "BillingCurrency", "azure-cost": "BillingCurrencyCode"}


def export_with(tmp_path, kind, codes, *, cost=None):
    """The kind's sample with its currency column cycling through `codes` (and, with `cost`,
    every billed cost set to it)."""
    rows = list(csv.reader(SAMPLE[kind].open(encoding="utf-8-sig", newline="")))
    header = rows[0]
    for number, row in enumerate(rows[1:]):
        row[header.index(CURRENCY[kind])] = codes[number % len(codes)]
        if cost is not None:
            row[header.index("BilledCost")] = cost
    path = tmp_path / "export" / "bill.csv"
    path.parent.mkdir(parents=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return path


def ingest(tmp_path, kind):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "bill", "kind": kind, "location": str(tmp_path / "export")}]}))
    result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def test_lower_case_and_padded_codes_are_one_currency_in_the_lake(tmp_path):
    for kind in SAMPLE:
        home = tmp_path / kind
        export_with(home, kind, ["usd", " USD ", "USD", "Usd"])
        result = ingest(home, kind)
        assert result.exit_code == 0, result.output
        currencies = Lake(home / "lake").query().execute("SELECT DISTINCT BillingCurrency FROM costs").fetchall()
        assert currencies == [("USD",)], (kind, currencies)


def test_a_value_that_is_no_currency_code_fails_the_delivery_naming_file_and_value(tmp_path):
    for kind in SAMPLE:
        home = tmp_path / kind
        export = export_with(home, kind, ["USD", "US$"])
        result = ingest(home, kind)
        assert result.exit_code == 3, result.output
        assert f"{export}: BillingCurrency 'US$' is not a three-letter currency code" in result.output, result.output
        assert "Traceback" not in result.output
        assert not list((home / "lake").glob("costs/**/*.parquet"))


def test_a_zero_total_is_printed_as_a_number(tmp_path):
    export_with(tmp_path, "focus", ["USD"], cost="0")
    result = ingest(tmp_path, "focus")
    assert result.exit_code == 0, result.output
    assert "committed 999 rows USD 0.000000000000 (estimated)" in result.output, result.output
    assert "E-" not in result.output


def test_a_lake_ingested_before_codes_were_normalised_is_rewritten_by_the_next_ingest(tmp_path, monkeypatch):
    export_with(tmp_path, "focus", ["usd", " USD "])
    with monkeypatch.context() as before:  # the stager as it was: codes kept as written
        before.setattr(staging, "with_currency_codes", lambda batch: batch)
        assert ingest(tmp_path, "focus").exit_code == 0
    lake = Lake(tmp_path / "lake")
    assert len(lake.query().execute("SELECT DISTINCT BillingCurrency FROM costs").fetchall()) == 2
    again = ingest(tmp_path, "focus")  # the same files: was 'unchanged', the two currencies kept
    assert again.exit_code == 0 and "committed 999 rows USD " in again.output, again.output
    assert lake.query().execute("SELECT DISTINCT BillingCurrency FROM costs").fetchall() == [("USD",)]
