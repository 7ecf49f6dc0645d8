"""GCP billing export: native NDJSON and Parquet (nested, repeated), koku's pandas CSV, bad input."""

from __future__ import annotations

import gzip
import json
from datetime import datetime
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from billing_helpers import failures, ingest_files
from conftest import DATA, SAMPLES

from connectors.gcp_billing import picked, py_literal_json
from service.ingest.status import status

NDJSON = DATA / "gcp" / "detailed_export_2024-05.jsonl"

PAIRS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
UTC = pa.timestamp("us", tz="UTC")
BIGQUERY_SCHEMA = pa.schema([
    ("billing_account_id", pa.string()),
    ("service", pa.struct([("id", pa.string()), ("description", pa.string())])),
    ("sku", pa.struct([("id", pa.string()), ("description", pa.string())])),
    ("usage_start_time", UTC), ("usage_end_time", UTC),
    ("project", pa.struct([("id", pa.string()), ("number", pa.string()), ("name", pa.string()), ("labels", PAIRS),
                           ("ancestry_numbers", pa.string())])),
    ("labels", PAIRS), ("system_labels", PAIRS),
    ("location", pa.struct([("location", pa.string()), ("country", pa.string()), ("region", pa.string()),
                            ("zone", pa.string())])),
    ("resource", pa.struct([("name", pa.string()), ("global_name", pa.string())])),
    ("cost", pa.float64()), ("currency", pa.string()), ("currency_conversion_rate", pa.float64()),
    ("usage", pa.struct([("amount", pa.float64()), ("unit", pa.string()), ("amount_in_pricing_units", pa.float64()),
                         ("pricing_unit", pa.string())])),
    ("credits", pa.list_(pa.struct([("name", pa.string()), ("amount", pa.float64()), ("full_name", pa.string()),
                                    ("id", pa.string()), ("type", pa.string())]))),
    ("invoice", pa.struct([("month", pa.string())])),
    ("cost_type", pa.string()),
])


def bigquery_parquet(path) -> None:
    """The NDJSON fixture's rows as the Parquet a BigQuery extract writes (typed, nested)."""
    rows = [json.loads(line) for line in NDJSON.read_text().splitlines()]
    for row in rows:
        for key in ("usage_start_time", "usage_end_time"):
            row[key] = datetime.fromisoformat(row[key].replace(" UTC", "+00:00").replace("Z", "+00:00"))
        row.pop("export_time")
    pq.write_table(pa.Table.from_pylist(rows, schema=BIGQUERY_SCHEMA), path)


def period_sums(lake):
    return lake.query().execute(
        "SELECT billing_period, count(*), sum(BilledCost), sum(EffectiveCost), sum(x_credits) FROM costs "
        "GROUP BY ALL ORDER BY ALL").fetchall()


EXPECTED_PERIODS = [
    # invoice.month decides the period: the 31 May 23:00 GPU hour is invoiced in June.
    ("2024-05", 4, Decimal("14.1"), Decimal("10.35"), Decimal("-3.75")),
    ("2024-06", 1, Decimal("12.5"), Decimal("12.499995"), Decimal("-0.000005")),
]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "json array"])
def test_native_export_maps_nested_and_repeated_fields(tmp_path, fmt):
    path = NDJSON
    if fmt == "parquet":
        path = tmp_path / "export.parquet"
        bigquery_parquet(path)
    if fmt == "json array":  # the rows as one JSON document, pretty-printed: the same export
        path = tmp_path / "export.json"
        path.write_text(json.dumps([json.loads(line) for line in NDJSON.read_text().splitlines()], indent=2))
    lake, result = ingest_files(tmp_path, ("gcp", "gcp-billing", path))
    assert failures(result) == []
    assert period_sums(lake) == EXPECTED_PERIODS
    rows = lake.query().execute(
        "SELECT ChargePeriodStart, ServiceName, SkuId, SubAccountId, RegionId, AvailabilityZone, ResourceId, "
        "ResourceName, ChargeCategory, ProviderName, ConsumedQuantity, ConsumedUnit, Tags FROM costs "
        "ORDER BY ChargePeriodStart, BilledCost DESC").fetchall()
    gpu = rows[0]
    assert gpu[:10] == (datetime(2024, 5, 20, 10), "Compute Engine", "1F4A-2B3C-4D5E", "ml-pretrain-prod",
                        "us-central1", "us-central1-a",
                        "//compute.googleapis.com/projects/ml-pretrain-prod/zones/us-central1-a/instances/1234567890",
                        "gpu-node-7", "Usage", "Google Cloud")
    assert gpu[10:12] == (3600.0, "seconds")
    # system labels, overlaid by the project's labels, overlaid by the resource's own labels
    assert gpu[12] == {"team": "posttrain", "cost-center": "cc-7", "experiment": "run-42",
                       "compute.googleapis.com/machine_spec": "a3-highgpu-8g"}
    assert rows[2][12] == {" org": "trey"}
    assert [r[8] for r in rows] == ["Usage", "Usage", "Usage", "Usage", "Tax"]
    assert rows[4][12] == {} and rows[4][3] is None


# The export's `tags` column: the resource manager tags a line's resource has, its own or inherited
TAGS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string()), ("inherited", pa.bool_()),
                           ("namespace", pa.string())]))


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_resource_manager_tags_rank_below_the_resources_labels_above_its_projects_and_system_labels(tmp_path, fmt):
    rows = [json.loads(line) for line in NDJSON.read_text().splitlines()]
    # the GPU hour: labels team and experiment, project labels team and cost-center
    rows[0]["tags"] = [
        {"key": "team", "value": "infra", "inherited": True, "namespace": "111"},  # the label wins
        {"key": "cost-center", "value": "cc-9", "inherited": True, "namespace": "111"},  # wins over the project's
        {"key": "env", "value": "prod", "inherited": True, "namespace": "111"},  # one short key, two namespaces
        {"key": "env", "value": "canary", "inherited": False, "namespace": "ml-pretrain-prod"}]
    rows[1]["tags"] = [{"key": "owner", "value": "ana", "inherited": False, "namespace": "111"}]
    rows[1]["system_labels"] = [{"key": "owner", "value": "gke"}, {"key": "goog-k8s-cluster-name", "value": "c1"}]
    path = tmp_path / f"export.{fmt}"
    if fmt == "jsonl":
        path.write_text("\n".join(json.dumps(row) for row in rows))
    else:
        for row in rows:
            for key in ("usage_start_time", "usage_end_time"):
                row[key] = datetime.fromisoformat(row[key].replace(" UTC", "+00:00"))
            row.pop("export_time")
        pq.write_table(pa.Table.from_pylist(rows, schema=BIGQUERY_SCHEMA.append(pa.field("tags", TAGS))), path)
    lake, result = ingest_files(tmp_path, ("gcp", "gcp-billing", path))
    assert failures(result) == []
    assert period_sums(lake) == EXPECTED_PERIODS
    tags = lake.query().execute("SELECT Tags FROM costs ORDER BY ChargePeriodStart, BilledCost DESC").fetchall()
    assert tags[0][0] == {"team": "posttrain", "cost-center": "cc-9", "experiment": "run-42",
                          "111/env": "prod", "ml-pretrain-prod/env": "canary",
                          "compute.googleapis.com/machine_spec": "a3-highgpu-8g"}
    # a tag wins over a system label, which is kept where nothing else gives its key
    assert (tags[1][0]["owner"], tags[1][0]["goog-k8s-cluster-name"]) == ("ana", "c1")
    assert all("owner" not in row[0] for row in tags[2:])


def test_koku_pandas_csv_parses_python_repr_credits_and_labels(tmp_path):
    lake, result = ingest_files(tmp_path, ("gcp", "gcp-billing", SAMPLES / "gcp" / "koku_gcp_standard_export_202011.csv"))
    assert failures(result) == []
    assert period_sums(lake) == [("2020-11", 25, Decimal("0.000032"), Decimal("0"), Decimal("-0.000032"))]
    tagged = lake.query().execute(
        "SELECT Tags['goog-resource-type'], count(*) FROM costs WHERE cardinality(Tags) > 0 GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert tagged == [("bigquery_dataset", 4), ("bigquery_project", 1), ("bigquery_resource", 5)]


def test_each_distinct_python_repr_is_parsed_once(tmp_path):
    """The SQL reads a repeated field several times a line (its keys, its values, its check), and
    lines repeat their labels: each distinct text was parsed by Python each time (200,000 koku-like
    lines with labels and tags: 30 s and 135 s to ingest, 8 s and 14 s once per text)."""
    export = SAMPLES / "gcp" / "koku_gcp_standard_export_202011.csv"
    [(distinct,)] = duckdb.sql(
        "SELECT count(DISTINCT v) FROM (SELECT unnest([credits, labels, system_labels, \"project.labels\"]) AS v "
        "FROM read_csv(?, all_varchar = true)) WHERE v <> ''", params=[str(export)]).fetchall()
    py_literal_json.cache_clear()
    _, result = ingest_files(tmp_path, ("gcp", "gcp-billing", export))
    assert failures(result) == []
    assert 0 < py_literal_json.cache_info().misses <= distinct < py_literal_json.cache_info().hits


def test_python_repr_is_parsed_as_data_never_run():
    assert json.loads(py_literal_json("[{'key': 'a', 'value': None, 'n': -5e-06}]")) == [
        {"key": "a", "value": None, "n": -5e-06}]
    assert py_literal_json('[{"key": "a"}]') == '[{"key": "a"}]'
    assert py_literal_json("__import__('os').system('true')") is None
    assert py_literal_json("[{'key': 'a'") is None


def test_two_currencies_in_one_period_are_kept_apart(tmp_path):
    rows = [json.loads(line) for line in NDJSON.read_text().splitlines()][:2]
    rows[1]["currency"] = "JPY"
    path = tmp_path / "export.json"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    lake, result = ingest_files(tmp_path, ("gcp", "gcp-billing", path))
    assert failures(result) == []
    assert [(e["currency"], e["billed_cost"]) for e in status(lake)] == [("JPY", "0.100000000000"),
                                                                         ("USD", "12.500000000000")]


KOKU_HEADER = "billing_account_id,service.description,usage_start_time,cost,currency,credits,invoice.month"
KOKU_ROW = "A-1,Compute Engine,2020-11-09 23:00:00+00:00,{cost},USD,\"{credits}\",{month}"


def koku_csv(*rows: dict, header: str = KOKU_HEADER) -> bytes:
    defaults = {"cost": "5e-06", "credits": "[]", "month": "202011"}
    return "\n".join([header] + [KOKU_ROW.format(**{**defaults, **row}) for row in rows]).encode()


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("nomonth.csv", koku_csv({}, header=KOKU_HEADER.replace(",invoice.month", "")).rsplit(b",", 1)[0],
     ["nomonth.csv", "required field 'invoice.month' is missing"]),
    # a ragged line fails naming its line (the header is read as written, never sniffed)
    ("ragged.csv", koku_csv({}, {"cost": "1,5"}), ["ragged.csv", "line 3: Expected Number of Columns: 7 Found: 8"]),
    ("badcost2.csv", koku_csv({}, {}, {"cost": "x1"}), ["badcost2.csv", "line 4, column cost: could not convert 'x1'"]),
    ("badcredits.csv", koku_csv({"credits": "[{'amount': -1"}), ["badcredits.csv", "column credits: not a list"]),
    ("duplabels.csv", koku_csv({}).replace(b"credits", b"labels").replace(
        b'"[]"', b'"[{\'key\': \'team\', \'value\': \'a\'}, {\'key\': \'team\', \'value\': \'b\'}]"'),
     ["duplabels.csv", "column labels: a label key missing or given twice"]),
    ("badmonth.csv", koku_csv({"month": "2020-11"}), ["badmonth.csv", "column invoice.month: not YYYYMM"]),
    ("latin1.json", json.dumps({"cost": 1, "currency": "USD", "invoice": {"month": "202405"},
                                "usage_start_time": "2024-05-01T00:00:00Z", "project": {"name": "Société"}},
                               ensure_ascii=False).encode("latin-1"), ["latin1.json"]),
    ("empty.jsonl", b"", ["empty.jsonl", "the file is empty"]),
    ("truncated.json.gz", gzip.compress(NDJSON.read_bytes() * 50)[:-100], ["truncated.json.gz"]),
])
def test_bad_input_fails_the_delivery_naming_file_and_problem(tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    lake, result = ingest_files(tmp_path, ("gcp", "gcp-billing", path))
    [message] = failures(result)
    for part in expected:
        assert part in message
    assert "Possible fixes" not in message and "ignore_errors" not in message  # DuckDB's advice is not ours
    assert lake.ledger() == []


def write_export(path, rows, fmt, detailed=True):
    """Rows as one file of a bq extract: the detailed table's, or the standard table's (no `resource`)."""
    rows = [{k: v for k, v in r.items() if detailed or k != "resource"} for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows))
        return
    schema = BIGQUERY_SCHEMA if detailed else BIGQUERY_SCHEMA.remove(BIGQUERY_SCHEMA.get_field_index("resource"))
    for row in rows:
        for key in ("usage_start_time", "usage_end_time"):
            row[key] = datetime.fromisoformat(row[key].replace(" UTC", "+00:00"))
        row.pop("export_time")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_standard_and_detailed_export_of_one_account_month_fail_instead_of_counting_twice(tmp_path, fmt):
    """The standard and the detailed export of one billing account extracted under one source:
    the detailed one holds the same costs per resource, so May (in both) fails naming both
    folders, and June (in the detailed one only) commits. Another account's standard export
    beside the detailed one of May is a union, and commits."""
    rows = [json.loads(line) for line in NDJSON.read_text().splitlines()]
    may = [r for r in rows if r["invoice"]["month"] == "202405"]
    june = [r for r in rows if r["invoice"]["month"] == "202406"]
    root = tmp_path / "billing"
    write_export(root / "detailed" / f"billing-000000000000.{fmt}", may, fmt)
    write_export(root / "detailed" / f"billing-000000000001.{fmt}", june, fmt)
    write_export(root / "standard" / f"billing-000000000000.{fmt}", may, fmt, detailed=False)
    lake, result = ingest_files(tmp_path, ("gcp", "gcp-billing", root))
    [message] = failures(result)
    assert (f"the standard and the detailed Cloud Billing export of billing account 01A2B3-C4D5E6-F7A8B9 both hold "
            f"invoice month 2024-05: standard in {root}/standard/ (1 file); detailed in {root}/detailed/ (1 file)"
            in message)
    assert "point the source at the folder of one export" in message
    assert period_sums(lake) == [EXPECTED_PERIODS[1]]

    other = tmp_path / "accounts"
    write_export(other / f"a.{fmt}", may, fmt)
    write_export(other / f"b.{fmt}", [{**r, "billing_account_id": "0B0B0B-C4D5E6-F7A8B9"} for r in may], fmt,
                 detailed=False)
    lake, result = ingest_files(tmp_path / "union", ("gcp", "gcp-billing", other))
    assert failures(result) == []
    [(period, count, billed, _, _)] = period_sums(lake)
    assert (period, count, billed) == ("2024-05", 8, 2 * EXPECTED_PERIODS[0][2])


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_line_without_a_global_name_takes_its_resource_name_as_its_id(tmp_path, fmt):
    """The export has both resource fields, yet a service that gives no global name leaves it
    null on its own lines: such a line's ResourceId is its resource.name (as when the export has
    no global_name column at all), never null beside a named resource."""
    rows = [json.loads(line) for line in NDJSON.read_text().splitlines()]
    gpu = rows[0]
    assert gpu["resource"]["global_name"] and gpu["resource"]["name"] == "gpu-node-7"
    rows.append({**gpu, "resource": {"name": "gpu-node-8", "global_name": None}, "cost": 2.0, "credits": []})
    write_export(tmp_path / f"billing.{fmt}", rows, fmt)
    lake, result = ingest_files(tmp_path, ("gcp", "gcp-billing", tmp_path / f"billing.{fmt}"))
    assert failures(result) == []
    ids = lake.query().execute(
        "SELECT DISTINCT ResourceName, ResourceId FROM costs WHERE ResourceName LIKE 'gpu-node-%' ORDER BY 1").fetchall()
    assert ids == [("gpu-node-7", gpu["resource"]["global_name"]), ("gpu-node-8", "gpu-node-8")]


@pytest.mark.parametrize("kind, taken_as", [
    ("STRUCT(key VARCHAR, value VARCHAR)[]", "itself"),  # BigQuery's JSON and Parquet labels
    ("STRUCT(namespace VARCHAR, key VARCHAR, inherited BOOLEAN, value VARCHAR)[]", "picked"),  # tags' other fields
    ("STRUCT(key VARCHAR, value BIGINT)[]", "json"),  # a value of another type: JSON's text of it
])
def test_a_typed_repeated_field_is_read_as_its_records_without_a_json_round_trip(kind, taken_as):
    """Each label list was written to JSON and parsed back (to_json, json_transform): 0.15 CPU s per
    field per 250k lines. A list already holding the fields in their types is taken as it is, or
    its records' fields picked out; the records are those the round trip gives."""
    element = '[{"key": "VARCHAR", "value": "VARCHAR"}]'
    con = duckdb.connect()
    values = "'1'" if "BIGINT" not in kind else "1"
    con.execute(f"CREATE TABLE t AS SELECT CAST(l AS {kind}) AS l FROM (VALUES "
                f"([{{'key': 'é\"k', 'value': {values}}}, NULL, {{'key': NULL, 'value': NULL}}]), (NULL), ([])) v(l)")
    [(_, list_kind)] = con.execute("SELECT 'l', typeof(l) FROM t LIMIT 1").fetchall()
    sql = picked("l", duckdb.sqltype(list_kind), element)
    assert {None: "json", "l": "itself"}.get(sql, "picked") == taken_as
    round_trip = f"json_transform(to_json(l), '{element}')"
    assert con.execute(f"SELECT {sql or round_trip} FROM t").fetchall() == con.execute(
        f"SELECT {round_trip} FROM t").fetchall()
